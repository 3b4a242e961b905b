"""The tamper matrix: every column of every table, edited as a superuser, is found or listed as unread.

A game is played over gRPC to the end of a round (so every read model has rows), with its players'
receipts kept. Then, for each column ``information_schema`` lists, a copy of that database gets one edit
of that column on the game's rows (triggers off), and ``uno-audit verify --game --receipts --json``
must report it where the table's facts are checked. A column no verdict, grouping, reply or receipt reads
is in docs/DESIGN.md's list ("What the hash covers"), with its reason; a column in neither fails.
The full tier edits every such column; the fast tier eight, drawn afresh each run.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
import pytest_asyncio
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from service.cli.main import main
from tests import tiers
from tests.api.shared_server import serving
from tests.api.support import SCRIPT_DECK, SCRIPT_HANDS, create_game, header
from tests.postgres import PostgresServer
from tests.rewrite import rewrite_recomputing_chain
from uno_audit_client.gen.uno.audit.v1 import checkpoint_pb2 as cp
from uno_audit_client.gen.uno.audit.v1 import checkpoint_pb2_grpc as cp_grpc
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(240)]

DESIGN = Path(__file__).parents[2] / "docs" / "DESIGN.md"


@dataclass(frozen=True, slots=True)
class Played:
    """The database a game was played in (its name, a template for the edits), the game, the command
    whose rows get the edits (its first and last version), the receipts and the service's key."""

    template: str
    game_id: str
    command_id: str
    first: int
    last: int
    receipts: tuple[str, ...]
    key: str


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def played(postgres_server: PostgresServer, migrated_template: str) -> AsyncIterator[Played]:
    url = postgres_server.create_database(template=migrated_template)
    try:
        async with serving(url) as running, grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
            keys = cp_grpc.CheckpointServiceStub(channel)  # type: ignore[no-untyped-call]
            game = await create_game(stub, fixed_deck=SCRIPT_DECK, options={"dealer_selection": "given"})
            replies: list[Any] = [game.reply, *await _play_a_round(stub, game.game_id, game.seat)]
            assert replies[-1].view.awaiting == "round-start", "the game goes on: its seed stays secret"
            key = (await keys.GetCheckpointKeys(cp.GetCheckpointKeysRequest())).keys[0].verifier_key
            await _projected(url, game.game_id, replies[-1].version)
        ledger = await _rows(url, "SELECT command_id, first_version, last_version FROM commands ORDER BY 2")
        # A command of several events, midway: an edit of its rows has neighbours on both sides.
        middle = [row for row in ledger if row[2] > row[1]][len(ledger) // 4]
        receipts = tuple(reply.receipt for reply in replies)
        yield Played(
            str(conninfo_to_dict(url)["dbname"]), game.game_id, middle[0], middle[1], middle[2], receipts, key
        )
    finally:
        postgres_server.drop_database(url)


async def _play_a_round(
    stub: pb_grpc.GameServiceStub, game_id: str, seat: Callable[[int], Any]
) -> list[pb.CommandReply]:
    """The scripted round (tests/api/support.py) to its end; the game, to 500 points, goes on."""
    replies: list[pb.CommandReply] = []
    for i, card in enumerate(SCRIPT_HANDS[1]):
        request = pb.PlayRequest(header=header(game_id), card=card, uno=i == 5)
        replies.append(await stub.Play(request, metadata=seat(1)))
        if i < 6:
            for other in (2, 0):
                draw = pb.DrawRequest(header=header(game_id))
                replies.append(await stub.Draw(draw, metadata=seat(other)))
    return replies


async def _rows(url: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute(query, params)
        return await cursor.fetchall()


async def _projected(url: str, game_id: str, version: int) -> None:
    """Wait until the read models hold the game at ``version`` (the server's projector runs behind)."""
    while (
        await _rows(url, "SELECT 1 FROM tables WHERE game_id = %s AND version = %s", (game_id, version)) == []
    ):
        await asyncio.sleep(0.05)


# --- the columns, and where an edit of each must show ------------------------------------------------


def unread_columns() -> set[str]:
    """docs/DESIGN.md's list of columns no verdict, grouping, reply or receipt reads (``table.*`` for all
    of a table's), from its section "What the hash covers"."""
    text = DESIGN.read_text(encoding="utf-8")
    section = text.split("### What the hash covers", 1)[1].split("\n### ", 1)[0]
    listed = section.split("What no verdict, grouping, reply or receipt reads", 1)[1]
    return set(re.findall(r"`([a-z_]+\.(?:[a-z_0-9]+|\*))`", listed))


async def columns(url: str) -> dict[str, str]:
    """Every column of every table of the database's schema, ``table.column`` → its data type."""
    rows = await _rows(
        url,
        "SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c "
        "JOIN information_schema.tables t USING (table_schema, table_name) "
        "WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'",
    )
    return {f"{table}.{column}": kind for table, column, kind in rows}


def listed(column: str, unread: set[str]) -> bool:
    return column in unread or f"{column.split('.')[0]}.*" in unread


#: How a column's value is changed, by its data type (every value becomes another of the same type).
CHANGES = {
    "integer": "{c} + 1",
    "smallint": "CASE WHEN {c} = 1 THEN 2 ELSE 1 END",
    "bigint": "{c} + 1",
    "text": "{c} || '~'",
    "jsonb": "jsonb_build_array({c})",
    "json": "json_build_array({c})",
    "bytea": "sha256({c})",
    "timestamp with time zone": "{c} + interval '1 second'",
    "boolean": "NOT {c}",
    "ARRAY": "array_append({c}, {c}[1])",
}

#: Where the type's change would break a key, the edit moves the value out of the way instead.
MOVES = dict.fromkeys(
    ("events.version", "hands.seat", "match_scores.seat", "round_scores.round"), "{c} + 1000000"
)

#: Which of a table's rows are edited: the game's (and of the log, one command's).
ROWS = {
    "events": "game_id = %(game)s AND version = %(first)s",
    "commands": "game_id = %(game)s AND command_id = %(command)s",
}


Report = dict[str, Any]


def _findings(report: Report) -> set[tuple[int, str]]:
    return {(f["position"], f["kind"]) for f in report["chain"]["findings"]}


#: Where an edit of each checked table's rows must show in the report (verify --json with receipts): the
#: events' at the edited version, the ledger's at the command's first version, the catalogue's at 1, the
#: secret seed's as a seed that does not match its commitment, the read models' as their problems.
FOUND: dict[str, Callable[[Report, Played], bool]] = {
    "events": lambda report, played: any(at == played.first for at, _ in _findings(report)),
    "commands": lambda report, played: (played.first, "ledger") in _findings(report),
    "games": lambda report, played: (1, "games") in _findings(report),
    "game_secrets": lambda report, played: report["seed"]["commitment_ok"] is False,
    **dict.fromkeys(
        ("tables", "hands", "round_scores", "match_scores"),
        lambda report, played: bool(report["projections"]["problems"]),
    ),
}


async def verify(url: str, played: Played, tmp: Path) -> dict[str, Any]:
    receipts = tmp / "receipts.jsonl"
    receipts.write_text("".join(json.dumps({"receipt": r}) + "\n" for r in played.receipts))
    argv = ["verify", "--game", played.game_id, "--json", "--receipts", str(receipts), "--key", played.key]
    code, out = await asyncio.to_thread(_run, [*argv, "--database-url", url])
    report: dict[str, Any] = json.loads(out)
    assert code == (0 if report["valid"] else 1)
    return report


def _run(argv: list[str]) -> tuple[int, str]:
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(argv)
    return code, printed.getvalue()


# --- the tests ---------------------------------------------------------------------------------------


async def test_every_column_is_checked_or_listed_with_its_reason(
    played: Played, postgres_server: PostgresServer
) -> None:
    url = postgres_server.create_database(template=played.template)
    try:
        present = await columns(url)
    finally:
        postgres_server.drop_database(url)
    unread = unread_columns()
    assert unread, "docs/DESIGN.md lists no unread column: the section moved?"
    assert {c for c in unread if not c.endswith(".*")} <= set(present), (
        "DESIGN.md lists columns that do not exist"
    )
    unlisted = {column: kind for column, kind in present.items() if not listed(column, unread)}
    unchecked = sorted({column.split(".")[0] for column in unlisted} - set(FOUND))
    assert unchecked == [], f"tables with columns neither checked nor listed in docs/DESIGN.md: {unchecked}"
    changeless = sorted(column for column, kind in unlisted.items() if kind not in CHANGES)
    assert changeless == [], f"columns whose type the matrix cannot change yet: {changeless}"


async def test_the_untouched_game_verifies_with_every_receipt(
    played: Played, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    url = postgres_server.create_database(template=played.template)
    try:
        report = await verify(url, played, tmp_path)
    finally:
        postgres_server.drop_database(url)
    # Dealt from the admin's fixed deck, which its round says: the game is valid, every receipt matches.
    assert report["valid"], report["violations"]
    assert report["chain"]["findings"] == []
    assert {r["verdict"] for r in report["receipts"]} == {"matches"}
    assert [table for table, shows in FOUND.items() if shows(report, played)] == []


async def test_an_edit_of_any_column_no_list_excuses_is_found(
    played: Played, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    unread = unread_columns()
    url = postgres_server.create_database(template=played.template)
    try:
        present = await columns(url)
    finally:
        postgres_server.drop_database(url)
    checked = [(column, kind) for column, kind in sorted(present.items()) if not listed(column, unread)]
    missed = []
    for column, kind in tiers.sample(checked, fast=8):
        table, name = column.split(".")
        url = postgres_server.create_database(template=played.template)
        try:
            edited = await _edit(url, table, name, MOVES.get(column, CHANGES[kind]), played)
            assert edited, f"{column}: the game has no row to edit"
            report = await verify(url, played, tmp_path)
        finally:
            postgres_server.drop_database(url)
        if not FOUND[table](report, played):
            missed.append(f"{column}: {report['chain']['findings'][:2]}")
    assert missed == [], (
        "edits no check found (check them, or list the column in docs/DESIGN.md):\n" + "\n".join(missed)
    )


async def _edit(url: str, table: str, column: str, change: str, played: Played) -> int:
    """Change ``column`` on one of the game's rows of ``table`` as the superuser, triggers off; how many
    rows changed."""
    where = ROWS.get(table, "game_id = %(game)s")
    where = f"ctid = (SELECT ctid FROM {table} WHERE {where} ORDER BY ctid LIMIT 1)"
    statement = sql.SQL("UPDATE {} SET {} = " + change.format(c="{}") + " WHERE " + where).format(
        sql.Identifier(table), sql.Identifier(column), *([sql.Identifier(column)] * change.count("{c}"))
    )
    params = {"game": played.game_id, "first": played.first, "command": played.command_id}
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await conn.execute("SET session_replication_role = replica")  # no trigger fires, not even ours
        cursor = await conn.execute(statement, params)
        return cursor.rowcount


async def test_a_metadata_rewrite_under_a_recomputed_chain_is_caught_by_the_receipts_from_it(
    played: Played, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """The chain covers metadata since row version 2, so the receipts do: an actor rewritten on one
    event, with every hash after it recomputed, leaves the chain intact and every receipt from that
    version on ``rewritten``."""
    url = postgres_server.create_database(template=played.template)
    try:

        def actor(version: int, metadata: dict[str, Any]) -> dict[str, Any]:
            return {**metadata, "actor": "someone else"} if version == played.first else metadata

        await rewrite_recomputing_chain(url, played.game_id, lambda version, kind, payload: payload, actor)
        report = await verify(url, played, tmp_path)
    finally:
        postgres_server.drop_database(url)
    assert report["chain"]["findings"] == []
    verdicts = {r["version"]: r["verdict"] for r in report["receipts"]}
    assert verdicts == {v: "rewritten" if v >= played.first else "matches" for v in verdicts}
