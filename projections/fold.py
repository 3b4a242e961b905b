"""Folding batches of events into game views in memory, and the table changes a batch amounts to.

A :class:`Folder` keeps the committed views of recently touched games (bounded, least recently used first
out) and stages a batch on them: :meth:`Folder.apply`, :meth:`Folder.changes`, then :meth:`Folder.commit`
once the batch's transaction has committed (or :meth:`Folder.abort`). A view is applied an event of
version *v* only at *v − 1*; otherwise the game is re-folded (:meth:`Folder.seed`). docs/DESIGN.md ("The
read models as folds") says why.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from projections.views import (
    ENGINE_VIEWS,
    SCORING_EVENTS,
    VIEW_NAMES,
    GameFold,
    HandRow,
    MatchRow,
    RoundRow,
    Stats,
    TableRow,
    evolve,
    hand_rows,
    initial,
    match_rows,
    round_rows,
    stat_deltas,
    table_row,
)
from service.rules.events import Event
from service.rules.state import HANDLERS


@dataclass(slots=True)
class Changes:
    """The rows one batch writes: full rows to upsert, and counter differences to add."""

    hands: list[HandRow] = field(default_factory=list)
    tables: list[TableRow] = field(default_factory=list)
    round_scores: list[RoundRow] = field(default_factory=list)
    match_scores: list[MatchRow] = field(default_factory=list)
    standings: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    player_stats: dict[str, list[int]] = field(default_factory=dict)

    def rows(self) -> int:
        """How many rows the batch writes, over all tables."""
        return (
            len(self.hands)
            + len(self.tables)
            + len(self.round_scores)
            + len(self.match_scores)
            + len(self.standings)
            + len(self.player_stats)
        )


def _materialise(slot: list[Any]) -> GameFold:
    """The slot's view at the slot's version (see :class:`Folder`)."""
    view: GameFold = slot[0]
    if view.version != slot[2]:
        view = slot[0] = view._replace(version=slot[2], state=slot[1])
    return view


def _add(total: list[int] | None, delta: Stats) -> list[int]:
    if total is None:
        return list(delta)
    for i, value in enumerate(delta):
        total[i] += value
    return total


class Folder:
    """Game views in memory, a batch at a time. See the module docstring for the protocol.

    The hot path: a batch keeps, per game, a *slot* ``[view, state, version]``: the last materialised
    :class:`GameFold`, and the engine state and version the game has reached since. An event that is
    not a scoring event changes nothing else (:func:`~projections.views.evolve` replaces only ``state``
    and ``version`` then), so the slot advances those two and the view is rebuilt only when a scoring
    event comes or the batch ends — the same result as calling ``evolve`` per event
    (``tests/projections/test_views.py`` checks it), without a tuple per event.
    """

    def __init__(self, views: Iterable[str] = VIEW_NAMES, *, cache_size: int = 20_000) -> None:
        self.views = frozenset(views)
        unknown = self.views - set(VIEW_NAMES)
        if unknown:
            raise ValueError(f"no such view: {', '.join(sorted(unknown))}")
        self.engine = bool(self.views & ENGINE_VIEWS)
        self.cache_size = cache_size
        self._committed: OrderedDict[str, GameFold] = OrderedDict()
        self._pending: dict[str, list[Any]] = {}
        self._before: dict[str, GameFold | None] = {}

    def __len__(self) -> int:
        """The number of games with a committed view in memory."""
        return len(self._committed)

    def view(self, game_id: str) -> GameFold | None:
        """The game's staged or committed view, if in memory."""
        slot = self._pending.get(game_id)
        if slot is not None:
            return _materialise(slot)
        return self._committed.get(game_id)

    def apply(self, game_id: str, version: int, event: Event | None, tournament_id: str | None) -> bool:
        """Stage ``event`` (the game's version ``version``); ``False`` if the game must be re-folded first.

        After ``False`` the caller re-folds the game's events below ``version`` and passes that view to
        :meth:`seed`, then calls this again.
        """
        slot = self._pending.get(game_id)
        if slot is None:
            view = self._committed.get(game_id)
            if view is None:
                if version != 1:
                    return False
                view = initial(game_id)
            elif view.version != version - 1:
                return False
            self._before[game_id] = view if view.version else None
            slot = self._pending[game_id] = [view, view.state, view.version]
        elif slot[2] != version - 1:
            return False
        kind = type(event)
        if kind in SCORING_EVENTS:
            view = evolve(
                _materialise(slot), event, version, tournament_id=tournament_id or "", engine=self.engine
            )
            slot[0] = view
            slot[1] = view.state
        elif event is not None:
            state = slot[1]
            if state is not None:
                slot[1] = HANDLERS[kind](state, event)
        slot[2] = version
        return True

    def seed(self, view: GameFold) -> None:
        """Start the batch's fold of ``view.game_id`` from ``view`` (re-folded from its stream)."""
        if view.game_id in self._pending:
            raise ValueError(f"game {view.game_id!r} was already evolved in this batch")
        self._pending[view.game_id] = [view, view.state, view.version]
        self._before[view.game_id] = view if view.version else None

    def pending(self) -> int:
        """How many games the staged batch touched."""
        return len(self._pending)

    def pending_games(self) -> list[str]:
        """The games the staged batch touched, in the order it first touched them."""
        return list(self._pending)

    def pending_from(self, game_id: str) -> int:
        """The first version of ``game_id`` the staged batch holds (what the tables lack without it)."""
        before = self._before.get(game_id)
        return before.version + 1 if before is not None else 1

    def drop(self, game_id: str) -> None:
        """Forget ``game_id`` altogether: its staged events (the batch will not write them) and its
        committed view (a quarantined game is not folded any further)."""
        self._pending.pop(game_id, None)
        self._before.pop(game_id, None)
        self._committed.pop(game_id, None)

    def changes(self, games: Iterable[str] | None = None) -> Changes:
        """The rows the staged batch changes (only those of this folder's views), or only the rows of
        ``games`` (a batch written one game at a time: the sums of the parts are the whole's)."""
        out = Changes()
        wanted = self.views
        want_hands, want_tables = "hands" in wanted, "tables" in wanted
        want_rounds, want_matches = "round_scores" in wanted, "match_scores" in wanted
        want_standings, want_stats = "standings" in wanted, "player_stats" in wanted
        pending = self._pending
        slots = pending.items() if games is None else ((g, pending[g]) for g in games if g in pending)
        for game_id, slot in slots:
            after = _materialise(slot)
            before = self._before.get(game_id)
            if before is after:
                continue  # seeded, then nothing applied
            if want_hands:
                out.hands.extend(hand_rows(after, before))
            if want_tables:
                row = table_row(after)
                if row is not None:
                    out.tables.append(row)
            if want_rounds:
                out.round_scores.extend(round_rows(after, len(before.rounds) if before is not None else 0))
            if want_matches and (before is None or before.totals != after.totals):
                out.match_scores.extend(match_rows(after))
            if want_standings or want_stats:
                for tournament_id, player, delta in stat_deltas(before, after):
                    if want_standings and tournament_id:
                        key = (tournament_id, player)
                        out.standings[key] = _add(out.standings.get(key), delta)
                    if want_stats:
                        out.player_stats[player] = _add(out.player_stats.get(player), delta)
        return out

    def commit(self) -> None:
        """The batch's transaction committed: keep its views (finished games are let go)."""
        committed = self._committed
        for game_id, slot in self._pending.items():
            view = _materialise(slot)
            if view.ended:
                committed.pop(game_id, None)
            else:
                committed[game_id] = view
                committed.move_to_end(game_id)
        while len(committed) > self.cache_size:
            committed.popitem(last=False)
        self._pending.clear()
        self._before.clear()

    def abort(self) -> None:
        """The batch did not commit (or may not have): forget it."""
        self._pending.clear()
        self._before.clear()

    def clear(self) -> None:
        """Forget everything (after an error whose outcome is unknown, or to test re-folding)."""
        self.abort()
        self._committed.clear()
