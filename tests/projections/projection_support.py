"""Helpers for the projection tests: simulated games stored as the service stores them, and table dumps."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from projections.queries import connection
from projections.views import STAT_COLUMNS, VIEW_NAMES
from projections.writer import COLUMNS
from service.app.handler import stored_form
from service.play.bots import Habits
from service.play.simulate import SimulatedGame, play_game
from service.rules.cards import Card
from service.rules.events import GameCreated, RoundEnded, UnoCaught, Wd4Challenged
from service.rules.options import HOUSE_RULES, UNSUPPORTED, Variant, make_options
from service.store import EventStore


@dataclass(frozen=True, slots=True)
class Stored:
    """A simulated game and the id and tournament it was stored under."""

    game_id: str
    tournament_id: str
    game: SimulatedGame
    players: tuple[str, ...] = ()
    """The seats' names it was stored with, if not the simulation's own."""

    @property
    def names(self) -> tuple[str, ...]:
        """The seats' names as stored."""
        return self.players or self.game.state.players


#: Bots that forget UNO, catch and challenge often, so that penalties and challenges get counted.
TALKATIVE = Habits(forget_uno=0.5, late_call=0.2, catch=0.9, challenge=0.6)


def simulate(
    variant: Variant,
    players: int,
    seed: int,
    target_score: int = 150,
    house_rules: Mapping[str, Any] | None = None,
) -> SimulatedGame:
    """A complete bot game, kept short by a low target score (with ``house_rules``, played by them)."""
    options = make_options(variant, {"target_score": target_score, **(house_rules or {})})
    game = play_game(variant, players, seed, options=options, habits=TALKATIVE)
    assert not game.stalled, f"{variant.value} {players} {seed} {house_rules}: choose a seed that ends"
    return game


def every_house_rule(variant: Variant) -> dict[str, Any]:
    """Every house rule ``variant`` takes, on (stacking: any)."""
    return {
        name: ("any" if name == "stacking" else True)
        for name in HOUSE_RULES
        if name not in UNSUPPORTED[variant]
    }


#: Games played under house rules (docs/RULES.md §9): (variant, players, seed, house rules). Between them
#: they hold every house rule's events (jump-ins, swaps, rotations, stacked accepts, draws to a match).
HOUSE_SPECS: tuple[tuple[Variant, int, int, dict[str, Any]], ...] = (
    (Variant.CLASSIC, 3, 21, every_house_rule(Variant.CLASSIC)),
    (Variant.ATTACK, 4, 22, every_house_rule(Variant.ATTACK)),
    (Variant.SONIC, 3, 23, {"stacking": "draw-two", "jump_in": True, "seven_o": True}),
    (
        Variant.MARIO_KART,
        4,
        24,
        {"stacking": "draw-four", "draw_to_match": True, "force_play": True, "wd4_any_time": True},
    ),
    (Variant.CLASSIC, 2, 25, {"jump_in": True, "seven_o": True}),
    (Variant.ATTACK, 3, 26, {"stacking": "draw-two", "jump_in": True}),
)


def _hash(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


async def store_game(
    store: EventStore,
    game_id: str,
    game: SimulatedGame,
    *,
    tournament_id: str = "",
    pause: float = 0.0,
    steps: slice | None = None,
    players: Sequence[str] = (),
) -> Stored:
    """Store ``game`` like the service: ``create_game`` with ``GameCreated`` (the seed left out), then
    one append per accepted command with that command's events. ``steps`` stores only some commands
    (the creation is part of the first slice); ``pause`` yields between appends so that concurrent
    writers interleave. ``players`` renames the seats (straight into the store: no limit applies)."""
    created = game.events[0]
    if players:
        assert isinstance(created, GameCreated) and len(players) == len(created.players)
        created = dataclasses.replace(created, players=tuple(players))
    names = list(players or game.state.players)
    chosen = game.steps[steps] if steps is not None else game.steps
    first = steps is None or not steps.start
    version = 0
    if first:
        result = await store.create_game(
            game_id,
            variant=game.state.variant.value,
            players=names,
            tournament_id=tournament_id,
            seed=game.state.seed,
            seat_token_hashes=[_hash(f"{game_id}:{seat}") for seat in range(len(names))],
            command_id=f"{game_id}:create",
            request_hash=_hash(f"{game_id}:create"),
            events=[stored_form(created)],
            metadata={"actor": "admin", "command": "CreateGame", "tournament_id": tournament_id},
        )
        version = result.last_version
    else:
        version = await store.stream_version(game_id)
    offset = (steps.start or 0) if steps is not None else 0
    for number, (command, events) in enumerate(chosen, start=offset):
        await store.append(
            game_id,
            version,
            [stored_form(e) for e in events],
            command_id=f"{game_id}:{number}",
            request_hash=_hash(f"{game_id}:{number}"),
            metadata={"actor": 0, "command": type(command).__name__},
        )
        version += len(events)
        if pause:
            await asyncio.sleep(pause)
    if not pause:
        await wait_readable(store)
    return Stored(game_id, tournament_id, game, tuple(players))


GAME_SPECS: tuple[tuple[Variant, int, int], ...] = (
    (Variant.CLASSIC, 3, 1),
    (Variant.SONIC, 4, 2),
    (Variant.ATTACK, 3, 3),
    (Variant.MARIO_KART, 2, 4),
    (Variant.CLASSIC, 2, 5),
    (Variant.ATTACK, 4, 6),
)


async def wait_readable(store: EventStore, timeout: float = 60.0) -> None:
    """Wait until every stored event is below the gap-free horizon, i.e. readable by ``read_all``.

    The horizon is the oldest transaction running anywhere in the cluster, and other test sessions
    (other databases on the same server) may hold one open for a while; a projector that "caught up"
    before then has caught up with what is readable, not with everything stored.
    """
    deadline = asyncio.get_running_loop().time() + timeout
    async with connection(store) as conn:
        while True:
            cursor = await conn.execute(
                "SELECT count(*) FROM events WHERE xid >= pg_snapshot_xmin(pg_current_snapshot())"
            )
            row = await cursor.fetchone()
            if row is not None and row[0] == 0:
                return
            assert asyncio.get_running_loop().time() < deadline, "events stayed above the horizon"
            await asyncio.sleep(0.02)


async def store_games(
    store: EventStore, specs: Sequence[tuple[Variant, int, int]] = GAME_SPECS, *, prefix: str = "g"
) -> list[Stored]:
    """Store one simulated game per spec, concurrently (so the log interleaves them), two tournaments."""
    games = [simulate(variant, players, seed) for variant, players, seed in specs]
    return await _store_all(store, games, prefix)


async def store_house_games(
    store: EventStore,
    specs: Sequence[tuple[Variant, int, int, dict[str, Any]]] = HOUSE_SPECS,
    *,
    prefix: str = "h",
) -> list[Stored]:
    """:func:`store_games` for games played under house rules (:data:`HOUSE_SPECS`)."""
    games = [simulate(variant, players, seed, house_rules=rules) for variant, players, seed, rules in specs]
    return await _store_all(store, games, prefix)


async def _store_all(store: EventStore, games: Sequence[SimulatedGame], prefix: str) -> list[Stored]:
    stored = await asyncio.gather(
        *(
            store_game(store, f"{prefix}{i}", game, tournament_id=f"t{i % 2}", pause=0.0)
            for i, game in enumerate(games)
        )
    )
    await wait_readable(store)
    return list(stored)


async def dump(url: str, views: Sequence[str] = VIEW_NAMES, *, suffix: str = "") -> dict[str, list[Any]]:
    """Every row of the view tables, ordered by primary key (for row-by-row comparison); the aggregates
    without their hashed key columns, ordered by the text those are hashes of."""
    out: dict[str, list[Any]] = {}
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for view in views:
            columns, key = COLUMNS[view]
            shown = [column for column in columns if not column.endswith("_key")]
            order = [column for column in key if not column.endswith("_key")] or shown[: len(key)]
            query = f'SELECT {", ".join(shown)} FROM "{view}{suffix}" ORDER BY {", ".join(order)}'
            cursor = await conn.execute(query.encode())
            out[view] = await cursor.fetchall()
    return out


def expected_stats(game: SimulatedGame) -> list[tuple[int, ...]]:
    """The counters of every seat, counted straight from the events (independently of views.py)."""
    seats = len(game.state.players)
    counts = [Counter[str]() for _ in range(seats)]
    for event in game.events:
        if isinstance(event, GameCreated):
            for seat in range(seats):
                counts[seat]["games"] += 1
        elif isinstance(event, RoundEnded):
            counts[event.winner]["rounds_won"] += 1
            counts[event.winner]["points"] += event.points
        elif isinstance(event, UnoCaught):
            counts[event.by]["uno_penalties_given"] += 1
            counts[event.target]["uno_penalties_taken"] += 1
        elif isinstance(event, Wd4Challenged):
            counts[event.player]["challenges_won" if event.upheld else "challenges_lost"] += 1
    if game.state.winner is not None:
        counts[game.state.winner]["wins"] += 1
    return [tuple(count[name] for name in STAT_COLUMNS) for count in counts]


def _tokens(cards: Sequence[Card]) -> list[str]:
    return [card.token for card in cards]


def expected_views(games: Sequence[Stored]) -> dict[str, list[Any]]:
    """What every view must hold after ``games`` were played to the end, from the rules engine's own
    final states and the events (the order of :func:`dump`)."""
    views: dict[str, list[Any]] = {name: [] for name in VIEW_NAMES}
    standings: dict[tuple[str, str], list[int]] = {}
    player_stats: dict[str, list[int]] = {}
    for stored in games:
        state, gid = stored.game.state, stored.game_id
        views["hands"] += [(gid, seat, _tokens(hand)) for seat, hand in enumerate(state.hands)]
        views["tables"].append(
            (
                gid,
                state.variant.value,
                state.round,
                state.dealer,
                state.discard[-1].token if state.discard else None,
                state.colour.value if state.colour else None,
                state.direction,
                state.turn,
                state.awaiting.value,
                len(state.pile),
                len(state.discard),
                len(stored.game.events),
                "over" if state.awaiting.value == "game-over" else "playing",
            )
        )
        views["round_scores"] += [
            (gid, r.round, r.winner, r.points, [_tokens(hand) for hand in r.hands]) for r in state.results
        ]
        views["match_scores"] += [
            (gid, seat, stored.names[seat], total) for seat, total in enumerate(state.scores)
        ]
        for seat, stats in enumerate(expected_stats(stored.game)):
            player = stored.names[seat]
            keys: list[tuple[dict[Any, list[int]], Any]] = [(player_stats, player)]
            if stored.tournament_id:
                keys.append((standings, (stored.tournament_id, player)))
            for table, key in keys:
                total = table.setdefault(key, [0] * len(stats))
                for i, value in enumerate(stats):
                    total[i] += value
    views["standings"] = [(t, p, *v) for (t, p), v in standings.items()]
    views["player_stats"] = [(p, *v) for p, v in player_stats.items()]
    for name in ("hands", "round_scores", "match_scores", "tables", "standings", "player_stats"):
        key_length = len(COLUMNS[name][1])
        views[name].sort(key=lambda row, n=key_length: row[:n])
    return views
