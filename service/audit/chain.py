"""Tamper evidence: recompute a game's hash chain and say where, and how, it was broken.

Every stored event carries ``hash = chain_hash(prev_hash, game, version, type, payload)`` and its
predecessor's hash (:func:`service.store.chain_hash`). The service can only append, but whoever holds the
database superuser can switch the triggers off and edit rows. :func:`check_chain` finds what such an edit
leaves behind, at the position it happened:

* ``changed`` — an event's type or payload no longer hashes to its stored hash;
* ``swapped`` — two events stand at each other's places (their contents, or whole rows, were exchanged);
* ``deleted`` — a version is missing from the stream, or events the command ledger says were written
  are gone from its end;
* ``relinked`` — an event's stored ``prev_hash`` is not its predecessor's hash (hashes were rewritten).

A finding's ``position`` is the stream version (1-based) of the event concerned. After a finding the
check goes on from the stored hash, so one edit is reported once, not as every later event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from service.store import GENESIS_HASH, StoredEvent, chain_hash


@dataclass(frozen=True, slots=True)
class ChainFinding:
    """One break of the chain: where (stream version), what kind, and a sentence saying so."""

    position: int
    kind: str  # "changed" | "swapped" | "deleted" | "relinked"
    message: str

    def to_json(self) -> dict[str, object]:
        return {"position": self.position, "kind": self.kind, "message": self.message}


def _content_hash(row: StoredEvent, prev_hash: bytes, version: int) -> bytes:
    return chain_hash(prev_hash, row.game_id, version, row.type, row.payload)


def check_chain(
    game_id: str, rows: Sequence[StoredEvent], ledger_last_version: int | None = None
) -> list[ChainFinding]:
    """The breaks in ``game_id``'s chain; ``rows`` are its stored events in version order.

    ``ledger_last_version`` is the highest version the command ledger says was written (the
    ``commands`` table): events missing from the end of the stream leave no gap, only that.
    """
    findings: list[ChainFinding] = []
    prev = GENESIS_HASH
    expected = 1
    resume: dict[int, bytes] = {}  # the second row of a swap found earlier -> the hash its place links on
    for index, row in enumerate(rows):
        if row.game_id != game_id:
            findings.append(
                ChainFinding(row.version, "changed", f"the event at {row.version} is another game's")
            )
        if row.version > expected:
            missing = (
                f"version {expected} is"
                if row.version == expected + 1
                else f"versions {expected}–{row.version - 1} are"
            )
            findings.append(ChainFinding(expected, "deleted", f"{missing} missing from the stream"))
            prev = row.prev_hash  # nothing to link across a hole
        expected = row.version + 1
        if index in resume:
            prev = resume.pop(index)
            continue
        linked = row.prev_hash == prev
        consistent = _content_hash(row, row.prev_hash, row.version) == row.hash
        if not (linked and consistent):
            swap = None if consistent else _swap_partner(rows, index)
            if swap is not None:
                other, here, there = swap
                resume[other] = there
                low, high = sorted((row.version, rows[other].version))
                findings.append(
                    ChainFinding(
                        low, "swapped", f"the events at {low} and {high} stand at each other's places"
                    )
                )
                prev = here
                continue
            if not consistent:
                findings.append(
                    ChainFinding(
                        row.version,
                        "changed",
                        f"the {row.type} event at {row.version} does not match its hash: it was changed",
                    )
                )
            else:
                findings.append(
                    ChainFinding(
                        row.version - 1,
                        "changed",
                        f"the event at {row.version - 1} was rewritten with a new hash: "
                        f"the event at {row.version} still links to the old one",
                    )
                )
        prev = row.hash
    last = rows[-1].version if rows else 0
    if ledger_last_version is not None and ledger_last_version > last:
        findings.append(
            ChainFinding(
                last + 1,
                "deleted",
                f"the command ledger wrote up to version {ledger_last_version}; the stream ends at {last}",
            )
        )
    return findings


def _swap_partner(rows: Sequence[StoredEvent], index: int) -> tuple[int, bytes, bytes] | None:
    """The other row of a swap that put something else at ``rows[index]``, if there was one, with the
    hashes the chain continues on after this place and after the other row's.

    Two kinds of swap: the contents (type and payload) were exchanged and the hashes stayed, so the other
    row's content hashes to this place's stored hash; or whole rows changed places (versions exchanged),
    so this row's content hashes correctly at the other row's version.
    """
    row = rows[index]
    for other, candidate in enumerate(rows):
        if other == index or (candidate.type, candidate.payload) == (row.type, row.payload):
            continue
        # Both ways round: games repeat events (the same card played twice, the same prompt), so one
        # content fitting the other place proves nothing by itself.
        if (
            _content_hash(candidate, row.prev_hash, row.version) == row.hash
            and _content_hash(row, candidate.prev_hash, candidate.version) == candidate.hash
        ):
            return other, row.hash, candidate.hash
        if (
            _content_hash(row, row.prev_hash, candidate.version) == row.hash
            and _content_hash(candidate, candidate.prev_hash, row.version) == candidate.hash
        ):
            return other, candidate.hash, row.hash
    return None
