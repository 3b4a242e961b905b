"""What the store keeps beside a game's events, checked against the hashed events: the command ledger and
the games row.

:func:`check_ledger` compares the ``commands`` table with what the events of row hash version 2 say
(``ledger`` findings); :func:`check_game_row` compares the game's row in ``games`` with its first event and
hashed metadata (``games`` findings). docs/DESIGN.md ("A stored game, read and checked").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from service.audit.chain import ChainFinding
from service.store import GameRow, LedgerRow, StoredEvent
from service.store.model import utc_text


@dataclass(frozen=True, slots=True)
class Beside:
    """What the store keeps beside a game's events: its command ledger, and its row in ``games`` (``None``:
    there is none)."""

    ledger: Sequence[LedgerRow]
    game: GameRow | None


@dataclass(frozen=True, slots=True)
class _Said:
    """The ledger row a command's hashed events say."""

    command_id: str
    request_sha256: str
    first_version: int
    last_version: int
    recorded_at: datetime


def check_ledger(
    rows: Sequence[StoredEvent], ledger: Sequence[LedgerRow], chain: Sequence[ChainFinding] = ()
) -> list[ChainFinding]:
    """Where the ledger and the hashed events disagree, in version order. A command the chain check
    (``chain``) already found edited — a finding at, or next to, any of its events or its ledger row's
    versions — is left to that finding: the edit is the events', and the ledger would only echo it."""
    edited = {finding.position for finding in chain}

    def touched(first: int, last: int) -> bool:  # a version deleted just before or after counts too
        return bool(edited & set(range(first - 1, last + 2)))

    runs = list(_said(rows))
    seen = Counter(s.command_id for s in runs)  # an id on two runs of events: an edit, which the chain tells
    skipped = {
        s.command_id for s in runs if touched(s.first_version, s.last_version) or seen[s.command_id] > 1
    }
    said = {s.command_id: s for s in runs if s.command_id not in skipped}
    first_hashed = next((row.version for row in rows if row.hash_version >= 2), None)
    findings: list[tuple[int, str, ChainFinding]] = []
    listed = {row.command_id: row for row in ledger}
    for command in said.values():
        row = listed.get(command.command_id)
        versions = f"{command.first_version}–{command.last_version}"
        if row is None:
            message = (
                f"the command ledger has no row for command {command.command_id!r}, "
                f"whose events are {versions}"
            )
        else:
            differences = _differences(command, row)
            if not differences:
                continue
            message = (
                f"the command ledger's row for command {command.command_id!r} differs from its events "
                f"({versions}): " + "; ".join(differences)
            )
        findings.append(
            (
                command.first_version,
                command.command_id,
                ChainFinding(command.first_version, "ledger", message),
            )
        )
    for row in ledger:
        hashed = first_hashed is not None and row.first_version >= first_hashed
        if (
            row.command_id in said
            or row.command_id in skipped
            or not hashed
            or touched(row.first_version, row.last_version)
        ):
            continue
        message = (
            f"the command ledger's row for command {row.command_id!r} (versions {row.first_version}–"
            f"{row.last_version}) is extra: no events carry that command id"
        )
        findings.append(
            (row.first_version, row.command_id, ChainFinding(row.first_version, "ledger", message))
        )
    return [finding for _, _, finding in sorted(findings, key=lambda found: found[:2])]


def _said(rows: Sequence[StoredEvent]) -> Iterator[_Said]:
    """The ledger row of each run of consecutive version-2 rows with one command id."""
    run: list[StoredEvent] = []
    for row in rows:
        command_id = _command_of(row) if row.hash_version >= 2 else None
        if run and command_id != _command_of(run[0]):
            yield _row_of(run)
            run = []
        if command_id is not None:
            run.append(row)
    if run:
        yield _row_of(run)


def _row_of(run: Sequence[StoredEvent]) -> _Said:
    first, last = run[0], run[-1]
    command_id = _command_of(first)
    assert command_id is not None
    request = first.metadata.get("request_sha256")
    return _Said(
        command_id,
        request if isinstance(request, str) else "",
        first.version,
        last.version,
        first.recorded_at,
    )


def _command_of(row: StoredEvent) -> str | None:
    command_id = row.metadata.get("command_id") if isinstance(row.metadata, dict) else None
    return command_id if isinstance(command_id, str) else None


def _differences(said: _Said, row: LedgerRow) -> list[str]:
    """What the ledger's ``row`` says otherwise than the hashed events."""
    differences = []
    if (row.first_version, row.last_version) != (said.first_version, said.last_version):
        differences.append(f"it says versions {row.first_version}–{row.last_version}")
    if row.request_sha256.hex() != said.request_sha256:
        differences.append(
            f"it says request SHA-256 {row.request_sha256.hex()}, the events {said.request_sha256 or 'none'}"
        )
    # Equal instants write the same UTC text: only different ones need writing (two a command, else).
    if row.recorded_at != said.recorded_at and utc_text(row.recorded_at) != utc_text(said.recorded_at):
        differences.append(
            f"it says recorded at {utc_text(row.recorded_at)}, the events {utc_text(said.recorded_at)}"
        )
    return differences


def check_game_row(
    rows: Sequence[StoredEvent], game: GameRow | None, variant: str | None, players: Sequence[str] | None
) -> list[ChainFinding]:
    """Where the games row ``game`` says otherwise than the hashed events, as one ``games``
    finding at version 1. ``variant`` and ``players`` are what the game's first event says (``None``:
    it no longer says, which the chain or the replay reports)."""
    if not rows:
        return []
    if game is None:
        return [
            ChainFinding(1, "games", "the games table has no row for this game: it was deleted or renamed")
        ]
    first = rows[0]
    differences = []
    if variant is not None and game.variant != variant:
        differences.append(f"it says variant {game.variant!r}, the events {variant!r}")
    if players is not None and list(game.players) != list(players):
        differences.append(f"it says players {list(game.players)}, the events {list(players)}")
    if first.hash_version >= 2 and isinstance(first.metadata, dict):
        tournament = first.metadata.get("tournament_id")
        if isinstance(tournament, str) and game.tournament_id != tournament:
            differences.append(f"it says tournament {game.tournament_id!r}, the events {tournament!r}")
        client = first.metadata.get("client")
        if isinstance(client, str) and game.client != client:
            differences.append(f"it says client {game.client!r}, the events {client!r}")
        if utc_text(game.created_at) != utc_text(first.recorded_at):
            differences.append(
                f"it says created at {utc_text(game.created_at)}, the events {utc_text(first.recorded_at)}"
            )
    if not differences:
        return []
    return [
        ChainFinding(1, "games", "the game's row in games differs from its events: " + "; ".join(differences))
    ]
