"""Golden stored logs: one game of every rule set, as the event store holds its rows, kept in the repository.

Written by :func:`write` (``python -m tests.golden``) from bot games as the service stores them, hash-chained,
a dispute and a seed reveal appended as audit entries. They are never regenerated to make a test pass: a log
written today must verify with every later version of the code (``tests/test_stored_logs.py``). A file may be
added for a new stored type, field or row hash version: ``classic-v2`` (:func:`write_upgraded`) was stored
across the upgrade to version 2, ``classic-fixed`` (:func:`write_fixed`) dealt from the admin's fixed deck.
JSON Lines: a header ``{"game_id", "variant", "seed", "expected"}`` (``classic-v2``: and ``ledger``), then
rows ``{"version", "type", "payload", "metadata", "prev_hash", "hash"}`` (hashes in hex; ``classic-v2``: and
``hash_version``, ``recorded_at``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from service.app.handler import stored_form
from service.domain.catalogue import encode, type_name
from service.domain.entries import DisputeFiled, DisputeKind, SeedRevealed
from service.play.simulate import SimulatedGame, play_game
from service.rules.cards import DECKS, Card
from service.rules.commands import Catch, StartRound
from service.rules.fair import shuffled
from service.rules.options import Variant, make_options
from service.store import GENESIS_HASH, LedgerRow, StoredEvent, chain_hash
from service.store.model import stored_hash, utc_text

HERE = Path(__file__).parent / "data" / "stored"

#: The name of the log stored across the upgrade to row hash version 2 (:func:`write_upgraded`).
UPGRADED = "classic-v2"

#: The name of the log whose first round the admin dealt from a fixed deck (:func:`write_fixed`).
FIXED = "classic-fixed"

#: The time every row of a log without times (the rule sets' logs, all of row hash version 1) reads with.
AT = datetime(2026, 12, 1, tzinfo=UTC)


def path_of(name: Variant | str) -> Path:
    return HERE / f"{name.value if isinstance(name, Variant) else name}.jsonl"


def _game(variant: Variant) -> SimulatedGame:
    """The golden game of ``variant``: three bots, seed 2026, one round."""
    return play_game(variant, 3, 2026, options=make_options(variant, {"target_score": 1}))


def _entries(game: SimulatedGame, catch_at: int | None, end: int) -> list[tuple[Any, str]]:
    """The audit entries after the game, with their command ids: a dispute about the first catch (at
    ``catch_at``, else ``end``), and the seed revealed."""
    state = game.state
    assert state.seed_sha256 is not None
    filed = DisputeFiled("d-1", 1, DisputeKind.UNO_CATCH.value, catch_at or end, None, "too late", by=0)
    return [(filed, "dispute-1"), (SeedRevealed(state.seed_sha256, "adjudicator"), "reveal")]


def _header(game_id: str, game: SimulatedGame, events: int) -> dict[str, Any]:
    state = game.state
    assert state.winner is not None
    return {
        "game_id": game_id,
        "variant": state.variant.value,
        "seed": game.events[0].seed.hex(),  # type: ignore[union-attr]
        "expected": {
            "winner": state.players[state.winner],
            "scores": dict(zip(state.players, state.scores, strict=True)),
            "rounds": len(state.results),
            "events": events,
        },
    }


def _save(path: Path, header: dict[str, Any], rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(header), *(json.dumps(row, sort_keys=True) for row in rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write(variant: Variant) -> Path:
    """Play the golden game of ``variant`` and write its stored rows: every row of hash version 1
    (:func:`service.store.chain_hash`), with the command id alone in its metadata."""
    game = _game(variant)
    game_id = f"golden-{variant.value}"
    rows: list[dict[str, Any]] = []
    prev = GENESIS_HASH
    catch_at = None
    for number, (command, events) in enumerate([(None, (game.events[0],)), *game.steps]):
        if isinstance(command, Catch) and catch_at is None:
            catch_at = len(rows) + 1
        for event in events:
            new = stored_form(event)
            prev = _row(rows, game_id, new.type, new.payload, f"cmd-{number}", prev)
    for entry, command_id in _entries(game, catch_at, len(rows)):
        kind, payload = encode(entry)
        prev = _row(rows, game_id, kind, payload, command_id, prev)
    return _save(path_of(variant), _header(game_id, game, len(rows) - 2), rows)


def _row(
    rows: list[dict[str, Any]],
    game_id: str,
    kind: str,
    payload: dict[str, Any],
    command_id: str,
    prev: bytes,
    metadata: dict[str, Any] | None = None,
) -> bytes:
    version = len(rows) + 1
    digest = chain_hash(prev, game_id, version, kind, payload)
    rows.append(
        {
            "version": version,
            "type": kind,
            "payload": payload,
            "metadata": metadata or {"command_id": command_id},
            "prev_hash": prev.hex(),
            "hash": digest.hex(),
        }
    )
    return digest


#: The first command (0: the game's creation) of :data:`UPGRADED` stored after the upgrade, as version 2.
UPGRADE_AT = 75

#: When :data:`UPGRADED`'s game was created; its commands follow a few seconds apart each.
CREATED_AT = datetime(2026, 11, 30, 18, 4, 11, 250117, tzinfo=UTC)


def _when(number: int) -> datetime:
    """When command ``number`` was stored: whole microseconds, never on a whole second, the upgrade's
    deploy a quarter of an hour between commands ``UPGRADE_AT - 1`` and ``UPGRADE_AT``."""
    pause = timedelta(minutes=15) if number >= UPGRADE_AT else timedelta()
    return CREATED_AT + pause + timedelta(seconds=3 * number, microseconds=(number * 104_729) % 999_983 + 1)


def write_upgraded() -> Path:
    """Write :data:`UPGRADED`: the classic golden game as a store upgraded in its middle holds it.

    Commands before :data:`UPGRADE_AT` are rows of hash version 1, their metadata as the service wrote it
    then (command id, actor, command; no request hash); the rest of the game, the dispute and the seed
    reveal are rows of version 2, whose metadata also names the request's SHA-256 and whose time is under
    the hash. The request hashes stand in for the service's (a digest of the method, the caller and the
    command id); the reveal's is the auditor's own, ``b"reveal:" + game id``. The header keeps the
    command ledger the store wrote with the rows (``ledger``), and the first version of hash version 2.
    """
    game = _game(Variant.CLASSIC)
    game_id = f"golden-{UPGRADED}"
    rows: list[StoredEvent] = []
    ledger: list[LedgerRow] = []
    catch_at = None
    upgraded_at = None

    def store(
        number: int, command_id: str, actor: int | str, method: str, events: list[tuple[str, dict[str, Any]]]
    ) -> None:
        hash_version = 1 if number < UPGRADE_AT else 2
        recorded_at = _when(number)
        request = (
            b"reveal:" + game_id.encode()
            if command_id == "reveal"
            else hashlib.sha256(f"{method}\n{actor}\n{command_id}".encode()).digest()
        )
        metadata: dict[str, Any] = {"command_id": command_id, "actor": actor, "command": method}
        if method == "CreateGame":
            metadata["tournament_id"] = ""
        if hash_version == 2:
            metadata["request_sha256"] = request.hex()
        first = len(rows) + 1
        for kind, payload in events:
            prev = rows[-1].hash if rows else GENESIS_HASH
            version = len(rows) + 1
            row = StoredEvent(
                version, game_id, version, kind, payload, metadata, recorded_at, 1, prev, b"", hash_version
            )
            rows.append(dataclasses.replace(row, hash=stored_hash(row)))
        ledger.append(LedgerRow(command_id, request, first, len(rows), recorded_at))

    store(0, "cmd-0", "admin", "CreateGame", [_stored(game.events[0])])
    for number, (command, events) in enumerate(game.steps, start=1):
        if isinstance(command, Catch) and catch_at is None:
            catch_at = len(rows) + 1
        if number == UPGRADE_AT:
            upgraded_at = len(rows) + 1
        actor = "admin" if isinstance(command, StartRound) else command.player  # type: ignore[union-attr]
        store(number, f"cmd-{number}", actor, type(command).__name__, [_stored(e) for e in events])
    end = len(rows)
    for number, (entry, command_id) in enumerate(_entries(game, catch_at, end), start=len(game.steps) + 1):
        store(number, command_id, "audit", type_name(type(entry)), [encode(entry)])
    header = {
        **_header(game_id, game, end),
        "upgraded_at": upgraded_at,
        "ledger": [ledger_json(row) for row in ledger],
    }
    return _save(path_of(UPGRADED), header, [row_json(row, stamped=True) for row in rows])


def fixed_deck() -> tuple[Card, ...]:
    """The deck :data:`FIXED`'s first round is dealt from: a classic deck in an order no seed of the game
    made (shuffled under a label the engine never uses, so it stays the same for ever)."""
    return shuffled(b"a table's deck", "golden:fixed", DECKS["classic"])


def write_fixed() -> Path:
    """Write :data:`FIXED`: the classic golden game's players and seed, its one round dealt from
    :func:`fixed_deck` as the service deals an admin's fixed deck: ``CreateGame`` (actor ``admin``) writes
    the game and the round, whose ``RoundStarted`` says who fixed the deck. Rows of hash version 1, with
    the metadata the service wrote (command id, actor, command)."""
    game = play_game(
        Variant.CLASSIC,
        3,
        2026,
        options=make_options(Variant.CLASSIC, {"target_score": 1}),
        fixed_decks={1: fixed_deck()},
    )
    game_id = f"golden-{FIXED}"
    rows: list[dict[str, Any]] = []
    prev = GENESIS_HASH
    catch_at = None
    (deal, dealt), *steps = game.steps
    assert isinstance(deal, StartRound) and deal.fixed_by == "admin"
    # CreateGame with a fixed deck deals the first round in the same command, as the service does.
    commands: list[tuple[Any, int | str, list[Any]]] = [("CreateGame", "admin", [game.events[0], *dealt])]
    commands += [(command, command.player, list(events)) for command, events in steps]  # type: ignore[union-attr]
    for number, (command, actor, events) in enumerate(commands):
        if isinstance(command, Catch) and catch_at is None:
            catch_at = len(rows) + 1
        method = command if isinstance(command, str) else type(command).__name__
        metadata = {"command_id": f"cmd-{number}", "actor": actor, "command": method}
        for event in events:
            prev = _row(rows, game_id, *_stored(event), f"cmd-{number}", prev, metadata)
    for entry, command_id in _entries(game, catch_at, len(rows)):
        metadata = {"command_id": command_id, "actor": "audit", "command": type_name(type(entry))}
        prev = _row(rows, game_id, *encode(entry), command_id, prev, metadata)
    return _save(path_of(FIXED), _header(game_id, game, len(rows) - 2), rows)


def _stored(event: Any) -> tuple[str, dict[str, Any]]:
    new = stored_form(event)
    return new.type, new.payload


def row_json(row: StoredEvent, *, stamped: bool) -> dict[str, Any]:
    """``row`` as a line of a golden log; ``stamped``: with its hash version and time (:data:`UPGRADED`)."""
    line = {
        "version": row.version,
        "type": row.type,
        "payload": row.payload,
        "metadata": row.metadata,
        "prev_hash": row.prev_hash.hex(),
        "hash": row.hash.hex(),
    }
    if stamped:
        line.update(hash_version=row.hash_version, recorded_at=utc_text(row.recorded_at))
    return line


def ledger_json(row: LedgerRow) -> dict[str, Any]:
    return {
        "command_id": row.command_id,
        "request_sha256": row.request_sha256.hex(),
        "first_version": row.first_version,
        "last_version": row.last_version,
        "recorded_at": utc_text(row.recorded_at),
    }


def ledger(header: dict[str, Any]) -> list[LedgerRow]:
    """The command ledger a golden log's header keeps (``[]``: it keeps none)."""
    return [
        LedgerRow(
            row["command_id"],
            bytes.fromhex(row["request_sha256"]),
            row["first_version"],
            row["last_version"],
            datetime.fromisoformat(row["recorded_at"]),
        )
        for row in header.get("ledger", [])
    ]


def read(name: Variant | str) -> tuple[dict[str, Any], list[StoredEvent]]:
    """The header and the rows of a golden log (a rule set's, or :data:`UPGRADED`), as the store would
    return them. A row without a ``hash_version`` is of version 1; one without a time reads as :data:`AT`."""
    header, *lines = path_of(name).read_text(encoding="utf-8").splitlines()
    meta = json.loads(header)
    rows = [
        StoredEvent(
            position=row["version"],
            game_id=meta["game_id"],
            version=row["version"],
            type=row["type"],
            payload=row["payload"],
            metadata=row["metadata"],
            recorded_at=datetime.fromisoformat(row["recorded_at"]) if "recorded_at" in row else AT,
            xid=1,
            prev_hash=bytes.fromhex(row["prev_hash"]),
            hash=bytes.fromhex(row["hash"]),
            hash_version=row.get("hash_version", 1),
        )
        for row in map(json.loads, lines)
    ]
    return meta, rows


if __name__ == "__main__":  # pragma: no cover - run by hand to add a golden log
    for name in sys.argv[1:] or [variant.value for variant in Variant]:
        if name in (UPGRADED, FIXED):
            print(write_upgraded() if name == UPGRADED else write_fixed())
        else:
            print(write(Variant.parse(name)))
