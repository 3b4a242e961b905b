"""Checking a game's receipts against its log: was the history a player was signed rewritten since?

A receipt ("game ``G`` had, at version ``v``, head ``h``") holds if its signature verifies with a published
key, it is this game's, the log reaches ``v``, and the chain recomputed from the events (not the stored
``hash`` column) has head ``h`` at ``v``. docs/DESIGN.md ("A game's checkpoint and its receipts") says
what a receipt covers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from service.checkpoints.checkpoint import open_game_receipt
from service.checkpoints.keys import Verifier
from service.checkpoints.note import MAX_NOTE_BYTES, NoteError, NoteVerificationError
from service.store.canonical import canonical
from service.store.model import GENESIS_HASH, HASH_VERSIONS, StoredEvent, event_hash, row_facts

#: The most receipts one check reads: a player keeps one per command, and a game is bounded.
MAX_RECEIPTS = 100_000

#: The verdicts, in the order an arbiter cares about them.
MATCHES = "matches"  # the log at the receipt's version is the signed history
REWRITTEN = "rewritten"  # the log's recomputed head at that version differs: rewritten at or before it
MISSING = "missing"  # the log stops before the receipt's version: events it covered are gone
REFUSED = "refused"  # not a receipt of this game signed by a known key (forged, other game, malformed)


@dataclass(frozen=True, slots=True)
class ReceiptCheck:
    """The verdict on one receipt: ``index`` is its place in the list checked (0-based), ``version``
    the version it names (``None`` when it could not be read)."""

    index: int
    version: int | None
    verdict: str
    message: str

    @property
    def ok(self) -> bool:
        return self.verdict == MATCHES

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "version": self.version,
            "verdict": self.verdict,
            "message": self.message,
        }


def recomputed_heads(game_id: str, rows: Sequence[StoredEvent]) -> list[bytes]:
    """The head of the chain recomputed from the events' contents: ``heads[v - 1]`` at version ``v``.

    Rows are taken in the order given and numbered 1, 2, …: a missing or swapped row changes every head
    after it, as it should.
    """
    heads: list[bytes] = []
    previous = GENESIS_HASH
    for version, row in enumerate(rows, start=1):
        if row.hash_version not in HASH_VERSIONS:  # no writer's: matches no head
            previous = bytes(32)
        else:
            facts = row_facts(row.hash_version, row.metadata, row.recorded_at)
            content = canonical(row.type, row.payload)
            previous = event_hash(row.hash_version, previous, game_id, version, content, facts)
        heads.append(previous)
    return heads


def check_receipts(
    game_id: str,
    rows: Sequence[StoredEvent],
    receipts: Sequence[str],
    *,
    service: str,
    log_keys: Iterable[Verifier],
    witnesses: Iterable[Verifier] = (),
    threshold: int = 0,
) -> list[ReceiptCheck]:
    """The verdict on each of ``receipts`` (signed notes) against ``game_id``'s stored ``rows``."""
    keys, trusted = list(log_keys), list(witnesses)
    heads = recomputed_heads(game_id, rows)
    checks = []
    for index, note in enumerate(receipts[:MAX_RECEIPTS]):
        try:
            receipt = open_game_receipt(
                note, keys, service=service, game_id=game_id, witnesses=trusted, threshold=threshold
            )
        except (NoteError, NoteVerificationError) as refused:
            checks.append(ReceiptCheck(index, None, REFUSED, str(refused)))
            continue
        version = receipt.size
        if version == 0 or version > len(heads):
            held = f"holds {len(heads)} events" if heads else "holds no event of this game: it is not stored"
            checks.append(
                ReceiptCheck(
                    index, version, MISSING, f"the receipt covers version {version} but the log {held}"
                )
            )
        elif heads[version - 1] != receipt.root_hash:
            checks.append(
                ReceiptCheck(
                    index,
                    version,
                    REWRITTEN,
                    f"the log's head at version {version} is not the one signed: the history up to "
                    f"version {version} was rewritten after the receipt was issued",
                )
            )
        else:
            checks.append(ReceiptCheck(index, version, MATCHES, f"version {version} is the history signed"))
    return checks


def signed_for_game(checks: Iterable[ReceiptCheck]) -> bool:
    """Whether any receipt checked opened: signed by a key given, for this service and game. Only such a
    receipt is evidence that the service once held the game; a refused one (forged, another game's,
    malformed) says nothing about it."""
    return any(check.verdict != REFUSED for check in checks)


def read_receipts(text: str) -> list[str]:
    """The receipts of a receipts file: JSON Lines, each line a signed note as a JSON string or an object
    with the note under ``"receipt"`` (as ``uno-audit bots --receipts`` writes them). Blank lines are
    skipped. Raises ``ValueError`` naming the line of anything else."""
    notes = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            raise ValueError(f"line {number}: not JSON") from None
        note = value.get("receipt") if isinstance(value, dict) else value
        if not isinstance(note, str) or not note:
            raise ValueError(f'line {number}: expected a signed note or {{"receipt": "<note>"}}')
        if len(note.encode()) > MAX_NOTE_BYTES:
            raise ValueError(f"line {number}: a receipt is at most {MAX_NOTE_BYTES} bytes")
        notes.append(note)
        if len(notes) > MAX_RECEIPTS:
            raise ValueError(f"more than {MAX_RECEIPTS} receipts")
    return notes
