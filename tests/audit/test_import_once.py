"""A record is imported once: its text (its SHA-256) imported again, by another command, by the command
line, over gRPC or by several imports at the same moment, is the game it already is, never a second copy.

The command line answers with that game (exit 0, no seat token: they were shown at its import); the
ImportRecord RPC refuses with ALREADY_EXISTS (``GAME_EXISTS``), naming it. Another text, if only by a
comment line, is another game.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import grpc
import pytest

from service.app.auditor import Auditor, Imported
from service.store import EventStore
from tests.api.support import ADMIN, new_id
from tests.audit.support import DISPUTED
from tests.test_cli_audit import cli
from uno_audit_client import error_info
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc

pytestmark = pytest.mark.postgres

TEXT = DISPUTED.read_text(encoding="utf-8")


async def imported(auditor: Auditor, text: str, command_id: str) -> Imported:
    return await auditor.import_record(
        text,
        tournament_id="",
        seat_token_hashes=lambda count: [bytes([seat]) * 32 for seat in range(count)],
        command_id=command_id,
        request_hash=command_id.encode(),
    )


async def stored_games(store: EventStore) -> list[str]:
    return [game.game_id for game in await store.list_games(after=None, limit=100)]


async def test_a_record_imported_again_by_another_command_is_the_game_it_is(store: EventStore) -> None:
    auditor = Auditor(store)
    first = await imported(auditor, TEXT, "import-1")
    rows = len(await store.read_stream(first.game_id))
    again = await imported(auditor, TEXT, "import-2")
    assert (first.duplicate, again.duplicate) == (False, True)
    assert (again.game_id, again.version) == (first.game_id, first.version)
    assert await stored_games(store) == [first.game_id]
    assert len(await store.read_stream(first.game_id)) == rows
    # The first command retried is that game too; another text (a comment added) is another game.
    assert (await imported(auditor, TEXT, "import-1")).game_id == first.game_id
    other = await imported(auditor, "# a comment\n" + TEXT, "import-3")
    assert not other.duplicate and other.game_id != first.game_id


async def test_imports_of_one_record_at_once_make_one_game(store: EventStore) -> None:
    auditor = Auditor(store)
    results = await asyncio.gather(*(imported(auditor, TEXT, f"at-once-{n}") for n in range(8)))
    assert len({result.game_id for result in results}) == 1
    assert sorted(result.duplicate for result in results) == [False] + [True] * 7
    assert await stored_games(store) == [results[0].game_id]


async def test_the_command_line_answers_the_game_a_record_was_imported_as(
    capsys: pytest.CaptureFixture[str], database_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "disputed.jsonl"
    path.write_text(TEXT, encoding="utf-8")
    code, out, err = await cli(capsys, "import", str(path), "--json", "--database-url", database_url)
    assert code == 0, err
    first = json.loads(out)
    assert not first["duplicate"] and len(first["seats"]) == 2

    code, out, err = await cli(capsys, "import", str(path), "--database-url", database_url)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:2] == [
        f"{path} was imported before, as game {first['game_id']}: classic, 2 players, version 12",
        "nothing stored again; its seat tokens were shown at its import, not again",
    ]
    assert not any(line.startswith("  seat ") for line in lines)

    code, out, err = await cli(capsys, "import", str(path), "--json", "--database-url", database_url)
    again = json.loads(out)
    assert (code, again["game_id"], again["duplicate"], again["seats"]) == (0, first["game_id"], True, [])


async def test_the_rpc_refuses_a_record_imported_before_naming_its_game(
    audit: audit_pb2_grpc.AuditServiceStub,
) -> None:
    first = await audit.ImportRecord(
        apb.ImportRecordRequest(command_id=new_id(), record=TEXT), metadata=ADMIN
    )
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await audit.ImportRecord(apb.ImportRecordRequest(command_id=new_id(), record=TEXT), metadata=ADMIN)
    error = refused.value
    assert error.code() == grpc.StatusCode.ALREADY_EXISTS
    info = error_info(error)
    assert info is not None and info.reason == "GAME_EXISTS" and info.metadata["game_id"] == first.game_id
    assert first.game_id in (error.details() or "") and "shown once" in (error.details() or "")
