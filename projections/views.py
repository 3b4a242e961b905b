"""The read models as pure folds: an initial value and ``evolve(view, event)``, and the rows each table gets.

One fold per game, :class:`GameFold`, feeds all six tables: ``hands`` and ``tables`` from the engine's own
:class:`~service.rules.state.State`, ``round_scores`` and ``match_scores`` from the scoring events,
``standings`` and ``player_stats`` as sums of per-game counters (:data:`STAT_COLUMNS`,
:func:`stat_deltas`). Everything here is pure. docs/DESIGN.md ("The read models as folds") says why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from psycopg.types.json import Jsonb

from service.rules.cards import Card
from service.rules.events import (
    Awaiting,
    Event,
    GameCreated,
    GameEnded,
    RoundEnded,
    UnoCaught,
    Wd4Challenged,
)
from service.rules.state import HANDLERS, State, new_state

#: Every view (table) of the projection set, in the order they are written.
VIEW_NAMES: tuple[str, ...] = ("hands", "tables", "round_scores", "match_scores", "standings", "player_stats")
#: The views derived from the rules engine's state (a fold without them skips the engine).
ENGINE_VIEWS = frozenset({"hands", "tables"})

#: The per-seat counters summed into ``standings`` and ``player_stats``, in column order.
STAT_COLUMNS: tuple[str, ...] = (
    "games",
    "wins",
    "rounds_won",
    "points",
    "uno_penalties_given",
    "uno_penalties_taken",
    "challenges_won",
    "challenges_lost",
)
Stats = tuple[int, ...]
_GAMES, _WINS, _ROUNDS_WON, _POINTS, _GIVEN, _TAKEN, _CH_WON, _CH_LOST = range(len(STAT_COLUMNS))
ZERO_STATS: Stats = (0,) * len(STAT_COLUMNS)
_NEW_SEAT: Stats = (1, *ZERO_STATS[1:])


class FoldedRound(NamedTuple):
    """One finished round as ``RoundEnded`` reported it: every seat's cards at the end, by seat."""

    round: int
    winner: int
    points: int
    hands: tuple[tuple[Card, ...], ...]


class GameFold(NamedTuple):
    """Everything the projections know about one game, as of stream version ``version``.

    ``state`` is the rules engine's state (``None`` before ``GameCreated``, or in a fold that skips the
    engine because no engine view is wanted). ``totals`` are the match scores by seat and ``stats`` the
    counters of :data:`STAT_COLUMNS` by seat, both folded from the scoring events.
    """

    game_id: str
    version: int
    tournament_id: str
    variant: str
    players: tuple[str, ...]
    state: State | None
    rounds: tuple[FoldedRound, ...]
    totals: tuple[int, ...]
    stats: tuple[Stats, ...]
    ended: bool


def initial(game_id: str) -> GameFold:
    """The view of a game before its first event."""
    return GameFold(game_id, 0, "", "", (), None, (), (), (), False)


# --- evolve ---------------------------------------------------------------------------------------------

_Scorer = Callable[[GameFold, Any, int, State | None, str, bool], GameFold]


def evolve(
    view: GameFold, event: Event | None, version: int, *, tournament_id: str = "", engine: bool = True
) -> GameFold:
    """The view after ``event``, the game's version ``version``. Pure; the event is trusted.

    ``tournament_id`` matters only for ``GameCreated`` (it is the event's metadata, not part of the
    event). ``event`` is ``None`` for an event type the projections do not know (a newer build's): only
    the version moves, so the tables still say how far the game's log was read. ``engine=False`` skips
    the rules engine (for a rebuild of the scoring views alone).
    """
    kind = type(event)
    state = view.state
    if state is not None and event is not None:
        state = HANDLERS[kind](state, event)
    scorer = _SCORERS.get(kind)
    if scorer is None:
        # The hot path (nine events in ten): a new version and state, everything else shared.
        return tuple.__new__(GameFold, (view[0], version, view[2], view[3], view[4], state, *view[6:]))
    return scorer(view, event, version, state, tournament_id, engine)


def fold_game(
    game_id: str, events: Iterable[tuple[int, Event | None, str]], *, engine: bool = True
) -> GameFold:
    """The view of a game from ``(version, event, tournament_id)`` triples in version order."""
    view = initial(game_id)
    for version, event, tournament_id in events:
        view = evolve(view, event, version, tournament_id=tournament_id, engine=engine)
    return view


def _bump(stats: tuple[Stats, ...], seat: int, column: int, amount: int = 1) -> tuple[Stats, ...]:
    row = list(stats[seat])
    row[column] += amount
    return (*stats[:seat], tuple(row), *stats[seat + 1 :])


def _game_created(
    view: GameFold, event: GameCreated, version: int, state: State | None, tournament: str, engine: bool
) -> GameFold:
    n = len(event.players)
    return GameFold(
        game_id=view.game_id,
        version=version,
        tournament_id=tournament,
        variant=event.variant.value,
        players=event.players,
        state=new_state(event) if engine else None,
        rounds=(),
        totals=(0,) * n,
        stats=(_NEW_SEAT,) * n,
        ended=False,
    )


def _round_ended(
    view: GameFold, event: RoundEnded, version: int, state: State | None, tournament: str, engine: bool
) -> GameFold:
    seat = event.winner
    totals = list(view.totals)
    totals[seat] += event.points
    stats = _bump(_bump(view.stats, seat, _ROUNDS_WON), seat, _POINTS, event.points)
    rounds = (*view.rounds, FoldedRound(event.round, seat, event.points, event.hands))
    return view._replace(version=version, state=state, rounds=rounds, totals=tuple(totals), stats=stats)


def _game_ended(
    view: GameFold, event: GameEnded, version: int, state: State | None, tournament: str, engine: bool
) -> GameFold:
    stats = _bump(view.stats, event.winner, _WINS)
    return view._replace(version=version, state=state, stats=stats, ended=True)


def _uno_caught(
    view: GameFold, event: UnoCaught, version: int, state: State | None, tournament: str, engine: bool
) -> GameFold:
    stats = _bump(_bump(view.stats, event.by, _GIVEN), event.target, _TAKEN)
    return view._replace(version=version, state=state, stats=stats)


def _wd4_challenged(
    view: GameFold, event: Wd4Challenged, version: int, state: State | None, tournament: str, engine: bool
) -> GameFold:
    # Upheld: the offender's Wild Draw Four was illegal, the challenger won; otherwise it lost.
    stats = _bump(view.stats, event.player, _CH_WON if event.upheld else _CH_LOST)
    return view._replace(version=version, state=state, stats=stats)


_SCORERS: dict[type, _Scorer] = {
    GameCreated: _game_created,
    RoundEnded: _round_ended,
    GameEnded: _game_ended,
    UnoCaught: _uno_caught,
    Wd4Challenged: _wd4_challenged,
}

#: The event types that change more than the engine's state and the version (see :func:`evolve`).
SCORING_EVENTS: frozenset[type] = frozenset(_SCORERS)


# --- rows -----------------------------------------------------------------------------------------------

HandRow = tuple[str, int, list[str]]
TableRow = tuple[str, str, int, int | None, str | None, str | None, int, int, str, int, int, int, str]
RoundRow = tuple[str, int, int, int, Jsonb]
MatchRow = tuple[str, int, str, int]


def tokens(cards: Iterable[Card]) -> list[str]:
    """Card tokens as the tables store them (``text[]``, JSON arrays)."""
    return [card.token for card in cards]


def status(state: State) -> str:
    """``created`` (no round dealt yet), ``playing``, ``between-rounds`` or ``over``."""
    if state.awaiting is Awaiting.GAME_OVER:
        return "over"
    if state.awaiting is Awaiting.ROUND_START:
        return "created" if state.round == 0 else "between-rounds"
    return "playing"


def hand_rows(view: GameFold, before: GameFold | None = None) -> list[HandRow]:
    """The ``hands`` rows of the game: every seat, or only those whose hand changed since ``before``."""
    state = view.state
    if state is None:
        return []
    old = before.state.hands if before is not None and before.state is not None else None
    return [
        (view.game_id, seat, tokens(hand))
        for seat, hand in enumerate(state.hands)
        if old is None or old[seat] != hand
    ]


def table_row(view: GameFold) -> TableRow | None:
    """The game's ``tables`` row (``None`` before ``GameCreated`` or without the engine's state)."""
    state = view.state
    if state is None:
        return None
    top = state.discard[-1].token if state.discard else None
    colour = state.colour.value if state.colour is not None else None
    return (
        view.game_id,
        view.variant,
        state.round,
        state.dealer,
        top,
        colour,
        state.direction,
        state.turn,
        state.awaiting.value,
        len(state.pile),
        len(state.discard),
        view.version,
        status(state),
    )


def round_rows(view: GameFold, start: int = 0) -> list[RoundRow]:
    """The ``round_scores`` rows of the game's rounds from index ``start`` (earlier ones never change)."""
    return [
        (view.game_id, r.round, r.winner, r.points, Jsonb([tokens(hand) for hand in r.hands]))
        for r in view.rounds[start:]
    ]


def match_rows(view: GameFold) -> list[MatchRow]:
    """The ``match_scores`` rows: every seat's player and running total."""
    return [(view.game_id, seat, view.players[seat], total) for seat, total in enumerate(view.totals)]


def stat_deltas(before: GameFold | None, after: GameFold) -> Iterable[tuple[str, str, Stats]]:
    """``(tournament_id, player, after − before)`` for every seat whose counters changed."""
    old = before.stats if before is not None and before.stats else None
    for seat, stats in enumerate(after.stats):
        base = old[seat] if old is not None else ZERO_STATS
        if stats != base:
            yield (
                after.tournament_id,
                after.players[seat],
                tuple(a - b for a, b in zip(stats, base, strict=True)),
            )
