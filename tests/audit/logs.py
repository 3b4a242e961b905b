"""Stored logs built in memory, chained as the event store chains them: inputs for the pure verifier."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from service.audit.log import record_sha256
from service.domain.catalogue import encode
from service.domain.entries import Entry, RecordImported, RecordLine
from service.records.record import FORMAT, read_record
from service.records.verify import verify_record
from service.store import GENESIS_HASH, StoredEvent, chain_hash

AT = datetime(2026, 12, 1, tzinfo=UTC)


def chained(game_id: str, entries: Iterable[Entry], rows: Sequence[StoredEvent] = ()) -> list[StoredEvent]:
    """``rows`` with ``entries`` appended, each hash-chained to the one before."""
    out = list(rows)
    for entry in entries:
        version = len(out) + 1
        prev = out[-1].hash if out else GENESIS_HASH
        kind, payload = encode(entry)
        digest = chain_hash(prev, game_id, version, kind, payload)
        out.append(
            StoredEvent(
                version, game_id, version, kind, payload, {"command_id": f"c{version}"}, AT, 1, prev, digest
            )
        )
    return out


def imported_rows(game_id: str, text: str, outcome: dict[str, object] | None = None) -> list[StoredEvent]:
    """The rows an import of the record ``text`` writes, as the auditor writes them: the verifier's
    outcome at import (or ``outcome``, as an edited log may say), then every physical line."""
    lines = text.split("\n")
    final_newline = lines[-1] == ""
    if final_newline:
        lines.pop()
    if outcome is None:
        outcome = verify_record(read_record(text)).import_outcome().to_json()
    imported = RecordImported(FORMAT, record_sha256(text), len(lines), final_newline, outcome)
    return chained(game_id, [imported, *(RecordLine(n, line) for n, line in enumerate(lines, start=1))])
