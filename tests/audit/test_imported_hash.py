"""An imported record's fingerprint: the SHA-256 and line count its ``RecordImported`` keeps are checked
against the ``RecordLine`` entries stored after it, so that an edit of the lines is found even when the
hash chain was recomputed over it (``fingerprint`` findings of the chain section).

The records are imported through the real service, edited as the database superuser, and verified over
gRPC (and with ``uno-audit verify --game``); the expected hashes, counts and positions come from the
record text and the edit each test made, never from the verifier's output.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from google.protobuf import json_format

from service.api.server import RunningServer
from service.audit.chain import ChainFinding, check_import
from service.audit.log import GameLog
from service.audit.stored_game import verify_game
from service.cli.main import main
from tests.api.support import ADMIN, new_id
from tests.rewrite import rewrite_recomputing_chain
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc

from .logs import imported_rows
from .test_damaged_logs import rehashed
from .test_tamper import tamper

AuditStub = audit_pb2_grpc.AuditServiceStub

#: A valid two-player record, 12 lines, ending with a line break.
RECORD = (Path(__file__).parent.parent / "data" / "records" / "classic_uno_catch.jsonl").read_text("utf-8")
LINES = RECORD.split("\n")[:-1]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def text_of(lines: list[str], final_newline: bool = True) -> str:
    return "\n".join(lines) + ("\n" if final_newline else "")


async def imported(audit: AuditStub, text: str = RECORD) -> str:
    """The id of the game ``text`` is imported as, through the service."""
    reply = await audit.ImportRecord(
        apb.ImportRecordRequest(command_id=new_id(), record=text), metadata=ADMIN
    )
    game_id: str = reply.game_id
    return game_id


async def verified(audit: AuditStub, game_id: str) -> tuple[apb.VerifyGameReply, dict[str, Any]]:
    reply: apb.VerifyGameReply = await audit.VerifyGame(
        apb.VerifyGameRequest(game_id=game_id), metadata=ADMIN
    )
    return reply, json_format.MessageToDict(reply.report)


def findings(report: dict[str, Any]) -> list[tuple[int, str, str]]:
    """The chain section's findings as (position, kind, message)."""
    return [(int(f["position"]), f["kind"], f["message"]) for f in report["chain"]["findings"]]


def line_text(line: int, text: str) -> Any:
    """An edit of record line ``line`` (at position ``line + 1``) to ``text``."""

    def edit(version: int, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {**payload, "text": text} if version == line + 1 else payload

    return edit


def announced(lines: int) -> Any:
    """An edit of the ``RecordImported`` (position 1) to announce ``lines`` lines."""

    def edit(version: int, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {**payload, "lines": lines} if version == 1 else payload

    return edit


async def cli(*argv: str) -> tuple[int, str]:
    """``uno-audit ARGV`` in a worker thread (it runs its own event loop): exit status and standard output."""

    def run() -> tuple[int, str]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = main(list(argv))
        return code, out.getvalue()

    return await asyncio.to_thread(run)


# --- an import left alone ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        RECORD,
        text_of(LINES, final_newline=False),
        "\r\n".join(LINES) + "\r\n",
        text_of([LINES[0], "", "# a table note", *LINES[1:], "", ""]),
    ],
    ids=["as-written", "no-final-newline", "crlf", "blank-and-comment-lines"],
)
async def test_an_untouched_import_keeps_its_fingerprint(
    server: RunningServer, audit: AuditStub, text: str
) -> None:
    game_id = await imported(audit, text)

    reply, report = await verified(audit, game_id)

    assert reply.valid and reply.chain_valid and reply.first_tampered_position == 0, report
    assert report["chain"]["findings"] == []
    exported = await audit.ExportGame(apb.ExportGameRequest(game_id=game_id), metadata=ADMIN)
    assert exported.record == text  # the text the fingerprint is checked of is the import's, byte for byte


# --- edits the recomputed chain cannot tell -------------------------------------------------------------


async def test_a_line_edited_under_a_recomputed_chain_is_a_sha256_mismatch_at_the_import(
    server: RunningServer, audit: AuditStub, database_url: str
) -> None:
    game_id = await imported(audit)
    # The same play in other spacing: the game replays as before, only the bytes differ.
    edited = LINES[2].replace(": ", ":").replace(", ", ",")
    assert edited != LINES[2] and json.loads(edited) == json.loads(LINES[2])
    await rewrite_recomputing_chain(database_url, game_id, line_text(3, edited))
    now = sha256(text_of([*LINES[:2], edited, *LINES[3:]]))

    reply, report = await verified(audit, game_id)

    message = (
        f"the record's lines make a text whose SHA-256 is {now}, not the {sha256(RECORD)} its "
        "RecordImported keeps: the record was changed after its import"
    )
    assert findings(report) == [(1, "fingerprint", message)]
    assert not reply.valid and not reply.chain_valid and reply.first_tampered_position == 1
    assert reply.rules_valid and not reply.outcome_differs  # the rules alone would not tell

    code, text = await cli("verify", "--game", game_id, "--database-url", database_url)
    assert code == 1
    assert f"game {game_id}: INVALID" in text
    assert "  hash chain: TAMPERED (13 events, head " in text
    assert f"    position 1: fingerprint: {message}\n" in text

    code, out = await cli("verify", "--game", game_id, "--json", "--database-url", database_url)
    printed = json.loads(out)
    assert code == 1 and printed["valid"] is False and printed["chain"]["valid"] is False
    assert printed["chain"]["findings"] == [{"position": 1, "kind": "fingerprint", "message": message}]


@pytest.mark.parametrize(
    ("lines", "position", "message"),
    [
        (13, 14, "line 13 is missing; RecordImported announces 13 lines, the log holds 12"),
        (15, 14, "lines 13–15 are missing; RecordImported announces 15 lines, the log holds 12"),
        (
            11,
            13,
            "the RecordLine at 13 (line 12) is one too many; "
            "RecordImported announces 11 lines, the log holds 12",
        ),
    ],
    ids=["one-more", "three-more", "one-fewer"],
)
async def test_a_line_count_edited_under_a_recomputed_chain_is_reported_where_the_lines_part(
    server: RunningServer, audit: AuditStub, database_url: str, lines: int, position: int, message: str
) -> None:
    game_id = await imported(audit)
    await rewrite_recomputing_chain(database_url, game_id, announced(lines))

    reply, report = await verified(audit, game_id)

    # The text is untouched: its hash still matches, and only the count is reported.
    assert findings(report) == [(position, "fingerprint", message)]
    assert not reply.valid and not reply.chain_valid and reply.first_tampered_position == position


async def test_the_last_line_deleted_is_reported_missing(
    server: RunningServer, audit: AuditStub, database_url: str
) -> None:
    game_id = await imported(audit)
    await tamper(database_url, ("DELETE FROM events WHERE game_id = %s AND version = 13", (game_id,)))
    await rewrite_recomputing_chain(database_url, game_id, lambda version, kind, payload: payload)

    reply, report = await verified(audit, game_id)

    # The command ledger still says 13 versions were written: the chain says where, and the fingerprint
    # which line; the hash of the whole text would say no more than the chain.
    assert [(p, kind) for p, kind, _ in findings(report)] == [(13, "deleted"), (13, "fingerprint")]
    assert findings(report)[1][2] == "line 12 is missing; RecordImported announces 12 lines, the log holds 11"
    assert not reply.valid and reply.first_tampered_position == 13


async def test_the_last_line_deleted_with_the_ledger_rewritten_is_told_by_the_fingerprint_alone(
    server: RunningServer, audit: AuditStub, database_url: str
) -> None:
    game_id = await imported(audit)
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        await conn.execute("ALTER TABLE events DISABLE TRIGGER USER")
        await conn.execute("ALTER TABLE commands DISABLE TRIGGER USER")
        await conn.execute("DELETE FROM events WHERE game_id = %s AND version = 13", (game_id,))
        await conn.execute("UPDATE commands SET last_version = 12 WHERE game_id = %s", (game_id,))
        await conn.execute("ALTER TABLE commands ENABLE TRIGGER USER")
        await conn.execute("ALTER TABLE events ENABLE TRIGGER USER")
        await conn.commit()
    await rewrite_recomputing_chain(database_url, game_id, lambda version, kind, payload: payload)

    reply, report = await verified(audit, game_id)

    assert [(p, kind) for p, kind, _ in findings(report)] == [(1, "fingerprint"), (13, "fingerprint")]
    assert sha256(text_of(LINES[:-1])) in findings(report)[0][2]
    assert findings(report)[1][2] == "line 12 is missing; RecordImported announces 12 lines, the log holds 11"
    assert not reply.valid and not reply.chain_valid and reply.first_tampered_position == 1


async def test_two_lines_swapped_under_a_recomputed_chain_are_reported_where_the_order_breaks(
    server: RunningServer, audit: AuditStub, database_url: str
) -> None:
    game_id = await imported(audit)
    payloads = {3: {"line": 3, "text": LINES[2]}, 4: {"line": 2, "text": LINES[1]}}
    await rewrite_recomputing_chain(
        database_url, game_id, lambda version, kind, payload: payloads.get(version, payload)
    )

    reply, report = await verified(audit, game_id)

    swapped = text_of([LINES[0], LINES[2], LINES[1], *LINES[3:]])
    assert [(p, kind) for p, kind, _ in findings(report)] == [(1, "fingerprint"), (3, "fingerprint")]
    assert sha256(swapped) in findings(report)[0][2]
    assert findings(report)[1][2] == (
        "line 2 is not at position 3: the RecordLine there is line 3; "
        "RecordImported announces 12 lines, the log holds 12"
    )
    assert not reply.valid


# --- an edit the chain already tells ---------------------------------------------------------------------


async def test_a_line_edited_without_the_chain_recomputed_is_reported_at_the_line_once(
    server: RunningServer, audit: AuditStub, database_url: str
) -> None:
    game_id = await imported(audit)
    await tamper(
        database_url,
        (
            "UPDATE events SET payload = jsonb_set(payload, '{text}', to_jsonb(%s::text)) "
            "WHERE game_id = %s AND version = 5",
            ("# gone", game_id),
        ),
    )

    reply, report = await verified(audit, game_id)

    # The chain names the row; the whole text's hash would only point at the import's first entry.
    assert [(p, kind) for p, kind, _ in findings(report)] == [(5, "changed")]
    assert not reply.valid and reply.first_tampered_position == 5


# --- the check itself, on logs built in memory ------------------------------------------------------------


def test_a_line_missing_from_the_middle_is_reported_where_it_belongs() -> None:
    rows = imported_rows("g", RECORD)
    damaged = rehashed([row for row in rows if row.version != 6])  # line 5; the hole is left

    report = verify_game(GameLog("g", damaged))

    assert [(f.position, f.kind) for f in report.chain.findings] == [(6, "deleted"), (6, "fingerprint")]
    assert report.chain.findings[1].message == (
        "line 5 is not at position 6: the next RecordLine, at 7, is line 6; "
        "RecordImported announces 12 lines, the log holds 11"
    )


def test_the_hash_is_left_out_only_for_a_chain_finding_among_the_imports_rows() -> None:
    log = GameLog("g", imported_rows("g", RECORD))
    fingerprint, lines = log.imported, log.record_lines()
    assert fingerprint is not None
    other = sha256("another text")

    def kinds(*chain: ChainFinding) -> list[tuple[int, str]]:
        return [(f.position, f.kind) for f in check_import(1, fingerprint, lines, other, chain)]

    assert kinds() == [(1, "fingerprint")]
    assert kinds(ChainFinding(7, "changed", "…")) == []
    assert kinds(ChainFinding(14, "deleted", "…")) == []  # where a line past the last would be
    assert kinds(ChainFinding(15, "changed", "…")) == [(1, "fingerprint")]  # an audit entry after them
    assert check_import(1, fingerprint, lines, sha256(RECORD)) == []
