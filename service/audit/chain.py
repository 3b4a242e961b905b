"""Tamper evidence: recompute a game's hash chain and say where, and how, it was broken.

:func:`check_chain` reports ``changed``, ``swapped``, ``deleted`` and ``relinked`` events at their stream
version (1-based), each edit once; :func:`check_import` finds where an imported record's lines no longer
match its fingerprint (``fingerprint``), which no recomputed chain mends. docs/DESIGN.md ("A stored game,
read and checked") defines each finding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from service.domain.entries import RecordImported, RecordLine
from service.store import GENESIS_HASH, StoredEvent
from service.store.canonical import canonical as encode
from service.store.model import HASH_VERSIONS, event_hash, row_facts


@dataclass(frozen=True, slots=True)
class ChainFinding:
    """One break of the chain: where (stream version), what kind, and a sentence saying so."""

    position: int
    kind: str  # "changed" | "swapped" | "deleted" | "relinked" | "fingerprint"
    message: str

    def to_json(self) -> dict[str, object]:
        return {"position": self.position, "kind": self.kind, "message": self.message}


class _Contents:
    """The hash of a row's content (its type and payload, and the facts its hash version adds) at any
    place of the chain, from the row's canonical bytes (:func:`service.store.canonical.canonical`), each
    written once however often a swap search asks for it."""

    def __init__(self, rows: Sequence[StoredEvent], canonical: Sequence[bytes] | None) -> None:
        self.rows = rows
        self.canonical = canonical if canonical is not None else [encode(r.type, r.payload) for r in rows]
        self.facts = _row_facts(rows)

    def hash(self, index: int, prev_hash: bytes, version: int, beside: int | None = None) -> bytes:
        """The chain's hash of ``rows[index]``'s content at ``version``, after ``prev_hash``, with the row
        facts (metadata, time) of ``rows[beside]`` (default: its own)."""
        row = self.rows[index if beside is None else beside]
        if row.hash_version not in HASH_VERSIONS:
            return b""  # a hash version no writer ever used: the row matches no hash
        facts = self.facts[index if beside is None else beside]
        return event_hash(row.hash_version, prev_hash, row.game_id, version, self.canonical[index], facts)


def _row_facts(rows: Sequence[StoredEvent]) -> list[bytes]:
    """:func:`row_facts` of every row, written once per command: the events of one command share their
    time and metadata, so a row whose hash version, time and metadata equal the row's before it shares
    that row's facts. Only metadata of strings and integers on both rows counts as equal: ``1 == 1.0 ==
    True`` would share the JSON of values that write differently."""
    facts: list[bytes] = []
    before: StoredEvent | None = None
    for row in rows:
        if (
            before is not None
            and row.hash_version == before.hash_version
            and row.recorded_at == before.recorded_at
            and row.metadata == before.metadata
            and _plain(row.metadata)
            and _plain(before.metadata)
        ):
            facts.append(facts[-1])
        else:
            facts.append(row_facts(row.hash_version, row.metadata, row.recorded_at))
        before = row
    return facts


def _plain(metadata: object) -> bool:
    """Whether ``metadata`` is an object of strings and integers under string keys (no booleans, floats
    or nesting, whose equal values can write differently)."""
    return type(metadata) is dict and all(
        type(k) is str and (type(v) is str or type(v) is int) for k, v in metadata.items()
    )


def check_chain(
    game_id: str,
    rows: Sequence[StoredEvent],
    ledger_last_version: int | None = None,
    canonical: Sequence[bytes] | None = None,
) -> list[ChainFinding]:
    """The breaks in ``game_id``'s chain; ``rows`` are its stored events in version order.

    ``ledger_last_version`` is the highest version the command ledger says was written (the
    ``commands`` table): events missing from the end of the stream leave no gap, only that.
    ``canonical``: each row's canonical bytes when the caller has them (:mod:`service.audit.rows`),
    else they are written here.
    """
    if canonical is not None and len(canonical) != len(rows):
        raise ValueError(f"{len(canonical)} canonical forms for {len(rows)} rows")
    contents = _Contents(rows, canonical)
    findings: list[ChainFinding] = []
    prev = GENESIS_HASH
    expected = 1
    hash_version = 1  # the highest row hash version so far: a stream never goes back
    resume: dict[int, bytes] = {}  # the second row of a swap found earlier -> the hash its place links on
    for index, row in enumerate(rows):
        findings.extend(_stream_findings(game_id, row, expected, hash_version))
        if row.version > expected:
            prev = row.prev_hash  # nothing to link across a hole
        expected = row.version + 1
        hash_version = max(hash_version, row.hash_version)
        if index in resume:
            prev = resume.pop(index)
            continue
        prev = _link(contents, index, prev, resume, findings)
    findings.extend(_ledger_findings(rows, ledger_last_version))
    return findings


def _stream_findings(game_id: str, row: StoredEvent, expected: int, hash_version: int) -> list[ChainFinding]:
    """What ``row`` breaks in the stream's shape, before any hash: another game's event, versions missing
    before it (``expected`` is the version due), or a row hash version lower than ``hash_version``."""
    findings: list[ChainFinding] = []
    if row.game_id != game_id:
        findings.append(ChainFinding(row.version, "changed", f"the event at {row.version} is another game's"))
    if row.version > expected:
        missing = (
            f"version {expected} is"
            if row.version == expected + 1
            else f"versions {expected}–{row.version - 1} are"
        )
        findings.append(ChainFinding(expected, "deleted", f"{missing} missing from the stream"))
    if row.hash_version < hash_version:
        findings.append(
            ChainFinding(
                row.version,
                "changed",
                f"the event at {row.version} has row hash version {row.hash_version} after a version-"
                f"{hash_version} row: its metadata and time were taken out of the chain",
            )
        )
    return findings


def _link(
    contents: _Contents, index: int, prev: bytes, resume: dict[int, bytes], findings: list[ChainFinding]
) -> bytes:
    """Check that ``rows[index]`` links on ``prev`` and matches its hash, appending what breaks to
    ``findings``; returns the hash the next row links on. A swap found here puts its second row in
    ``resume``, with the hash the chain goes on from after it."""
    row = contents.rows[index]
    linked = row.prev_hash == prev
    consistent = contents.hash(index, row.prev_hash, row.version) == row.hash
    if linked and consistent:
        return row.hash
    swap = None if consistent else _swap_partner(contents, index)
    if swap is not None:
        other, here, there = swap
        resume[other] = there
        low, high = sorted((row.version, contents.rows[other].version))
        findings.append(
            ChainFinding(low, "swapped", f"the events at {low} and {high} stand at each other's places")
        )
        return here
    if not consistent:
        message = f"the {row.type} event at {row.version} does not match its hash: it was changed"
        findings.append(ChainFinding(row.version, "changed", message))
    else:
        message = (
            f"the event at {row.version - 1} was rewritten with a new hash: "
            f"the event at {row.version} still links to the old one"
        )
        findings.append(ChainFinding(row.version - 1, "changed", message))
    return row.hash


def _ledger_findings(rows: Sequence[StoredEvent], ledger_last_version: int | None) -> list[ChainFinding]:
    """Events the command ledger says were written past the stream's end: deleted from it."""
    last = rows[-1].version if rows else 0
    if ledger_last_version is None or ledger_last_version <= last:
        return []
    message = f"the command ledger wrote up to version {ledger_last_version}; the stream ends at {last}"
    return [ChainFinding(last + 1, "deleted", message)]


def check_import(
    imported_at: int,
    imported: RecordImported,
    lines: Sequence[tuple[int, RecordLine]],
    sha256: str,
    chain: Sequence[ChainFinding] = (),
) -> list[ChainFinding]:
    """Where an imported record's stored lines no longer match its fingerprint, the ``RecordImported``
    at ``imported_at``: ``lines`` are its ``RecordLine`` entries with their positions, in stream order,
    and ``sha256`` the hash of the text they make (the export's text). Both findings are ``fingerprint``:

    * at ``imported_at``: the text does not hash to ``imported.sha256``. Left out when ``chain`` (the
      chain's own findings) already breaks among the import's rows: those say which row was edited, where
      a hash of the whole text can only say that one was;
    * at the position line *k* belongs at (``imported_at + k``), for the first *k* that is not there: a
      line missing, out of order, or past the ``imported.lines`` announced.
    """
    findings: list[ChainFinding] = []
    announced, held = imported.lines, len(lines)
    end = imported_at + max(announced, held) + 1  # the position after the last line, where a deletion shows
    if sha256 != imported.sha256 and not any(imported_at <= f.position <= end for f in chain):
        findings.append(
            ChainFinding(
                imported_at,
                "fingerprint",
                f"the record's lines make a text whose SHA-256 is {sha256}, not the {imported.sha256} "
                "its RecordImported keeps: the record was changed after its import",
            )
        )
    counts = f"RecordImported announces {announced} lines, the log holds {held}"
    for k, (position, line) in enumerate(lines, start=1):
        at = imported_at + k
        if k > announced:
            message = f"the RecordLine at {position} (line {line.line}) is one too many; {counts}"
        elif line.line != k:
            there = "the RecordLine there" if position == at else f"the next RecordLine, at {position},"
            message = f"line {k} is not at position {at}: {there} is line {line.line}; {counts}"
        else:
            continue
        findings.append(ChainFinding(at, "fingerprint", message))
        return findings
    if held < announced:
        missing = f"line {held + 1} is" if held + 1 == announced else f"lines {held + 1}–{announced} are"
        findings.append(ChainFinding(imported_at + held + 1, "fingerprint", f"{missing} missing; {counts}"))
    return findings


def _swap_partner(contents: _Contents, index: int) -> tuple[int, bytes, bytes] | None:
    """The other row of a swap that put something else at ``rows[index]``, if there was one, with the
    hashes the chain continues on after this place and after the other row's.

    Two kinds of swap: the contents (type and payload) were exchanged and the hashes stayed, so the other
    row's content hashes to this place's stored hash; or whole rows changed places (versions exchanged),
    so this row's content hashes correctly at the other row's version.
    """
    rows = contents.rows
    row = rows[index]
    for other, candidate in enumerate(rows):
        if other == index or (candidate.type, candidate.payload) == (row.type, row.payload):
            continue
        # Both ways round: games repeat events (the same card played twice, the same prompt), so one
        # content fitting the other place proves nothing by itself.
        # Contents exchanged: each row's type and payload hash at the other's place with the metadata and
        # time that stayed there (a row of hash version 2 hashes them too).
        if (
            contents.hash(other, row.prev_hash, row.version, beside=index) == row.hash
            and contents.hash(index, candidate.prev_hash, candidate.version, beside=other) == candidate.hash
        ):
            return other, row.hash, candidate.hash
        if (
            contents.hash(index, row.prev_hash, candidate.version) == row.hash
            and contents.hash(other, candidate.prev_hash, row.version) == candidate.hash
        ):
            return other, candidate.hash, row.hash
    return None
