"""The consistency check of one game: its projected rows against a fold of its events through the engine.

:func:`check_game` folds the game's stream with :func:`service.rules.state.evolve` up to the version its
``tables`` row reflects and compares ``hands``, ``tables``, ``round_scores`` and ``match_scores`` row by
row, the scores against the engine's own scoring. docs/DESIGN.md ("Reads that wait, and the consistency
check") says how it copes with lag and concurrent batches.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from projections.projector import DEFAULT_SET
from projections.queries import connection
from projections.views import status, tokens
from service.domain.catalogue import GAME_TYPES, decode_event
from service.domain.codec import CodecError
from service.rules.events import Event, GameCreated
from service.rules.state import State, evolve, new_state
from service.store import Cursor, EventStore, StoredEvent, cursor_of

_PROJECTED = """
SELECT coalesce(cp.xid, '0'::xid8)::text::bigint, coalesce(cp.position, 0),
       (SELECT row_to_json(t) FROM tables t WHERE t.game_id = %(game)s),
       coalesce((SELECT json_agg(json_build_array(h.seat, h.cards) ORDER BY h.seat)
                   FROM hands h WHERE h.game_id = %(game)s), '[]'),
       coalesce((SELECT json_agg(json_build_array(r.round, r.winner, r.points, r.hands) ORDER BY r.round)
                   FROM round_scores r WHERE r.game_id = %(game)s), '[]'),
       coalesce((SELECT json_agg(json_build_array(m.seat, m.player, m.total) ORDER BY m.seat)
                   FROM match_scores m WHERE m.game_id = %(game)s), '[]')
  FROM (SELECT) AS one LEFT JOIN projection_checkpoints cp ON cp.projection_set = %(set)s
"""


#: A stored game event, decoded (raises :class:`~service.domain.codec.CodecError` for one that does
#: not decode).
Decode = Callable[[StoredEvent], Event]


def decode_stored(stored: StoredEvent) -> Event:
    """The catalogue's decoding of a stored game event."""
    return decode_event(stored.type, stored.payload)


async def check_game(
    store: EventStore,
    game_id: str,
    *,
    projection_set: str = DEFAULT_SET,
    stream: Sequence[StoredEvent] | None = None,
    decode: Decode = decode_stored,
) -> list[str]:
    """What is wrong with the projections of ``game_id`` (an empty list when they are consistent).

    ``stream`` is the game's stream when the caller has just read it (the auditor, which verifies it
    too), and ``decode`` its events as the caller decoded them: the check then reads only what the
    projection may hold beyond it (a game that moved on meanwhile), and decodes nothing twice.
    """
    async with connection(store) as conn:
        cursor = await conn.execute(_PROJECTED, {"game": game_id, "set": projection_set})
        row = await cursor.fetchone()
    assert row is not None
    checkpoint = Cursor(int(row[0]), int(row[1]))
    table, hands, rounds, matches = row[2], row[3], row[4], row[5]
    if stream is None:
        events = await store.read_stream(game_id)
    else:
        read = stream[-1].version if stream else 0
        ahead = table is not None and int(table["version"]) > read
        events = [*stream, *await store.read_stream(game_id, after_version=read)] if ahead else list(stream)
    if not events:
        if table is not None or hands or rounds or matches:
            return [f"game {game_id!r} has no events but has projected rows"]
        return []
    if table is None:
        if cursor_of(events[0]) <= checkpoint:
            return [f"game {game_id!r} is behind the checkpoint but has no tables row"]
        return []  # not projected yet
    version = int(table["version"])
    if version > events[-1].version:
        return [f"tables says version {version}, but the game's stream ends at {events[-1].version}"]
    try:
        # By version, not by count: an edited log may have lost a row below the projected version.
        state = fold_stream([event for event in events if event.version <= version], decode)
    except CodecError as bad:  # an edited log: the verifier's chain check says where and how
        return [f"game {game_id!r}: the log does not decode ({bad}), so the views cannot be checked"]
    except UnfoldableLog as bad:
        return [f"game {game_id!r}: {bad}, so the views cannot be checked"]
    if state is None:
        return [f"game {game_id!r} does not start with GameCreated"]
    problems: list[str] = []
    problems += _compare("tables", {k: v for k, v in table.items() if k != "game_id"}, _table(state, version))
    held = {seat: cards for seat, cards in hands}
    for seat, hand in enumerate(state.hands):
        expected = tokens(hand)
        if held.get(seat) != expected:
            problems.append(f"hands: seat {seat} holds {held.get(seat)} in the view, {expected} by the rules")
    for seat in sorted(set(held) - set(range(len(state.hands)))):
        problems.append(f"hands: the view has a seat {seat} the game does not have")
    expected_rounds = [
        [r.round, r.winner, r.points, [tokens(hand) for hand in r.hands]] for r in state.results
    ]
    problems += _compare_lists("round_scores", rounds, expected_rounds)
    expected_matches = [[seat, state.players[seat], total] for seat, total in enumerate(state.scores)]
    problems += _compare_lists("match_scores", matches, expected_matches)
    return problems


class UnfoldableLog(ValueError):
    """A stream whose events decode but cannot all be applied: an edited log (a card played that the
    hand does not hold, a seat the game does not have). ``position`` is the first such event."""

    def __init__(self, position: int) -> None:
        super().__init__(f"the event at position {position} contradicts the game before it")
        self.position = position


def fold_stream(events: Sequence[StoredEvent], decode: Decode = decode_stored) -> State | None:
    """The engine's state after the stored ``events`` (audit entries skipped), or ``None`` when they do
    not start with ``GameCreated``. ``evolve`` trusts its events, so a log edited into nonsense makes it
    fail, in whatever way the nonsense leads it to (an index out of range, a failed assertion…): that is
    :class:`UnfoldableLog`, never an exception of the engine's. ``evolve`` is a pure function of the
    state and the event, so whatever it raises on an event says that the event contradicts the game
    before it."""
    state: State | None = None
    for stored in events:
        if stored.type not in GAME_TYPES:
            continue
        event = decode(stored)
        if isinstance(event, GameCreated):
            state = new_state(event)
        elif state is None:
            return None
        else:
            try:
                state = evolve(state, event)
            except Exception:
                raise UnfoldableLog(stored.version) from None
    return state


def _table(state: State, version: int) -> dict[str, Any]:
    return {
        "variant": state.variant.value,
        "round": state.round,
        "dealer": state.dealer,
        "top": state.discard[-1].token if state.discard else None,
        "colour": state.colour.value if state.colour is not None else None,
        "direction": state.direction,
        "turn": state.turn,
        "awaiting": state.awaiting.value,
        "draw_pile": len(state.pile),
        "discard_pile": len(state.discard),
        "version": version,
        "status": status(state),
    }


def _compare(view: str, found: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    return [
        f"{view}: {name} is {found.get(name)!r} in the view, {value!r} by the rules"
        for name, value in expected.items()
        if found.get(name) != value
    ]


def _compare_lists(view: str, found: list[Any], expected: list[Any]) -> list[str]:
    problems = []
    for i in range(max(len(found), len(expected))):
        have = found[i] if i < len(found) else None
        want = expected[i] if i < len(expected) else None
        if have != want:
            problems.append(
                f"{view}: row {i} is {json.dumps(have)} in the view, {json.dumps(want)} by the rules"
            )
    return problems
