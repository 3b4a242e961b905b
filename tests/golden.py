"""Golden stored logs: one game of every rule set, as the event store holds its rows, kept in the repository.

The files under ``tests/data/stored/`` were written by :func:`write` (``python -m tests.golden``) from bot
games, exactly as the service stores them: every command's events in the stored form
(:func:`service.api.handler.stored_form`, the catalogue's encoding), hash-chained by
:func:`service.store.chain_hash`, with the command id in the metadata; a dispute and a seed reveal are
appended as audit entries. They are never regenerated to make a test pass: a log written today must
verify with every later version of the code (``tests/test_stored_logs.py``). A new file may be added
when a new stored type appears.

Each file is JSON Lines: a header ``{"game_id", "variant", "seed", "expected"}`` (the revealed seed in hex,
and the outcome the game had), then one row per line ``{"version", "type", "payload", "metadata",
"prev_hash", "hash"}`` (hashes in hex).
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from service.api.handler import stored_form
from service.audit.entries import DisputeFiled, DisputeKind, SeedRevealed
from service.catalogue import encode
from service.play.simulate import play_game
from service.rules.commands import Catch
from service.rules.options import Variant, make_options
from service.store import GENESIS_HASH, StoredEvent, chain_hash

HERE = Path(__file__).parent / "data" / "stored"


def path_of(variant: Variant) -> Path:
    return HERE / f"{variant.value}.jsonl"


def write(variant: Variant) -> Path:
    """Play the golden game of ``variant`` and write its stored rows (see the module docstring)."""
    game = play_game(variant, 3, 2026, options=make_options(variant, {"target_score": 1}))
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
    state = game.state
    assert state.winner is not None and state.seed_sha256 is not None
    filed = DisputeFiled("d-1", 1, DisputeKind.UNO_CATCH.value, catch_at or len(rows), None, "too late", by=0)
    for entry, command_id in (
        (filed, "dispute-1"),
        (SeedRevealed(state.seed_sha256, "adjudicator"), "reveal"),
    ):
        kind, payload = encode(entry)
        prev = _row(rows, game_id, kind, payload, command_id, prev)
    header = {
        "game_id": game_id,
        "variant": variant.value,
        "seed": game.events[0].seed.hex(),  # type: ignore[union-attr]
        "expected": {
            "winner": state.players[state.winner],
            "scores": dict(zip(state.players, state.scores, strict=True)),
            "rounds": len(state.results),
            "events": len(rows) - 2,
        },
    }
    path = path_of(variant)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(header), *(json.dumps(row, sort_keys=True) for row in rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _row(
    rows: list[dict[str, Any]], game_id: str, kind: str, payload: dict[str, Any], command_id: str, prev: bytes
) -> bytes:
    version = len(rows) + 1
    digest = chain_hash(prev, game_id, version, kind, payload)
    rows.append(
        {
            "version": version,
            "type": kind,
            "payload": payload,
            "metadata": {"command_id": command_id},
            "prev_hash": prev.hex(),
            "hash": digest.hex(),
        }
    )
    return digest


def read(variant: Variant) -> tuple[dict[str, Any], list[StoredEvent]]:
    """The header and the rows of ``variant``'s golden log, as the store would return them."""
    header, *lines = path_of(variant).read_text(encoding="utf-8").splitlines()
    at = datetime(2026, 12, 1, tzinfo=UTC)
    meta = json.loads(header)
    rows = [
        StoredEvent(
            position=row["version"],
            game_id=meta["game_id"],
            version=row["version"],
            type=row["type"],
            payload=row["payload"],
            metadata=row["metadata"],
            recorded_at=at,
            xid=1,
            prev_hash=bytes.fromhex(row["prev_hash"]),
            hash=bytes.fromhex(row["hash"]),
        )
        for row in map(json.loads, lines)
    ]
    return meta, rows


if __name__ == "__main__":  # pragma: no cover - run by hand to add a golden log
    for name in sys.argv[1:] or [variant.value for variant in Variant]:
        print(write(Variant.parse(name)))
