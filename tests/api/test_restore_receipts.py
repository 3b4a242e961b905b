"""A database restored from an older copy cannot pass as the whole history: the players' receipts for the
commands after the copy are reported ``missing``, and the game is not valid with them — a game created
after the copy too, which the restored store does not know at all (it is lost, not "no game").

The copy is the database's files at a moment the server was stopped (``CREATE DATABASE … TEMPLATE``, what
a base backup taken then restores to); the games then go on, and the arbiter checks every receipt
against the restored database, through a server over it signing with the same key and on the command
line. A receipt the service did not sign (forged, altered, another game's) is no evidence of a loss.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from google.protobuf import json_format
from psycopg.conninfo import conninfo_to_dict

from service.api.config import ServeConfig
from service.api.server import RunningServer, start_server
from service.checkpoints import Signer, game_checkpoint
from service.checkpoints.keyring import Keyring
from tests.doc_commands import DOCS, follows, shell_block, steps
from tests.postgres import PostgresServer, service_url
from tests.test_cli_audit import cli
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as audit_pb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc as audit_grpc
from uno_audit_client.gen.uno.audit.v1 import checkpoint_pb2 as cp
from uno_audit_client.gen.uno.audit.v1 import checkpoint_pb2_grpc as cp_grpc
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import ADMIN, ADMIN_TOKEN, SCRIPT_HANDS, count_rows, create_scripted, fails_with, header

pytestmark = pytest.mark.timeout(60)

ARBITER_HEADING = "## A rewrite caught by a player's receipt"


@asynccontextmanager
async def serving(database_url: str, keyring: Keyring) -> AsyncIterator[grpc.aio.Channel]:
    running: RunningServer = await start_server(
        ServeConfig(listen="127.0.0.1:0", database_url=service_url(database_url), admin_token=ADMIN_TOKEN),
        keyring=keyring,
    )
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            yield channel
    finally:
        await running.stop(grace=2.0)


async def _play(
    stub: pb_grpc.GameServiceStub, game_id: str, tokens: list[str], cards: list[str]
) -> list[str]:
    """Seat 1 plays ``cards`` of the scripted hand, the others drawing between: the replies' receipts."""
    receipts = []
    for card in cards:
        reply = await stub.Play(
            pb.PlayRequest(header=header(game_id), card=card),
            metadata=(("authorization", f"Bearer {tokens[1]}"),),
        )
        receipts.append(reply.receipt)
        for seat in (2, 0):
            drawn = await stub.Draw(
                pb.DrawRequest(header=header(game_id)),
                metadata=(("authorization", f"Bearer {tokens[seat]}"),),
            )
            receipts.append(drawn.receipt)
    return receipts


async def test_receipts_after_an_older_restore_are_missing(
    database_url: str, postgres_server: PostgresServer
) -> None:
    keyring = Keyring(Signer.generate("restore-test"))
    early_cards, late_cards = SCRIPT_HANDS[1][:2], SCRIPT_HANDS[1][2:4]
    async with serving(database_url, keyring) as channel:
        stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
        game = await create_scripted(stub)
        early = [game.reply.receipt, *await _play(stub, game.game_id, game.tokens, list(early_cards))]
    # The copy, with the server stopped: what a base backup taken now would restore.
    restored = postgres_server.create_database(template=str(conninfo_to_dict(database_url)["dbname"]))
    try:
        async with serving(database_url, keyring) as channel:
            late = await _play(pb_grpc.GameServiceStub(channel), game.game_id, game.tokens, list(late_cards))  # type: ignore[no-untyped-call]
        receipts = early + late

        async with serving(restored, keyring) as channel:
            checked = await cp_grpc.CheckpointServiceStub(channel).CheckReceipts(  # type: ignore[no-untyped-call]
                cp.CheckReceiptsRequest(game_id=game.game_id, receipts=receipts), metadata=ADMIN
            )
            assert not checked.valid
            assert [c.verdict for c in checked.checks] == ["matches"] * len(early) + ["missing"] * len(late)
            verified = await audit_grpc.AuditServiceStub(channel).VerifyGame(  # type: ignore[no-untyped-call]
                audit_pb.VerifyGameRequest(game_id=game.game_id, receipts=receipts, check_projections=False),
                metadata=ADMIN,
            )
            assert verified.chain_valid and not verified.receipts_valid and not verified.valid
            # The restored log's chain alone is whole: only the receipts show that it is not the history.
            plain = await audit_grpc.AuditServiceStub(channel).VerifyGame(  # type: ignore[no-untyped-call]
                audit_pb.VerifyGameRequest(game_id=game.game_id, check_projections=False), metadata=ADMIN
            )
            assert plain.chain_valid and plain.receipts_valid

        async with serving(database_url, keyring) as channel:  # the live database has every one
            checked = await cp_grpc.CheckpointServiceStub(channel).CheckReceipts(  # type: ignore[no-untyped-call]
                cp.CheckReceiptsRequest(game_id=game.game_id, receipts=receipts), metadata=ADMIN
            )
            assert checked.valid and {c.verdict for c in checked.checks} == {"matches"}
    finally:
        postgres_server.drop_database(restored)


# --- a game created after the copy: the restored store does not know it -------------------------------


@dataclass(frozen=True, slots=True)
class LostWhole:
    """A restored copy and the receipts of two games: ``kept``, created before the copy (its receipts
    match it), and ``lost``, created and played only after it (none of its events is in the copy)."""

    url: str
    keyring: Keyring
    kept: str
    kept_receipts: list[str]
    lost: str
    lost_receipts: list[str]

    @property
    def key(self) -> str:
        return self.keyring.signer.verifier.encode()


@asynccontextmanager
async def a_game_lost_whole(database_url: str, postgres_server: PostgresServer) -> AsyncIterator[LostWhole]:
    keyring = Keyring(Signer.generate("restore-test"))
    cards = list(SCRIPT_HANDS[1][:2])
    async with serving(database_url, keyring) as channel:
        stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
        kept = await create_scripted(stub)
        kept_receipts = [kept.reply.receipt, *await _play(stub, kept.game_id, kept.tokens, cards)]
    restored = postgres_server.create_database(template=str(conninfo_to_dict(database_url)["dbname"]))
    try:
        async with serving(database_url, keyring) as channel:
            stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
            lost = await create_scripted(stub)
            lost_receipts = [lost.reply.receipt, *await _play(stub, lost.game_id, lost.tokens, cards)]
        yield LostWhole(restored, keyring, kept.game_id, kept_receipts, lost.game_id, lost_receipts)
    finally:
        postgres_server.drop_database(restored)


def forgeries(scene: LostWhole) -> list[str]:
    """Receipts of the lost game the service never signed: by another key under the service's name, a
    genuine one with a signature byte changed, and a genuine one's text changed (a later version)."""
    impostor = Signer.generate(scene.keyring.service)
    by_impostor = game_checkpoint(scene.keyring.service, scene.lost, 99, bytes(32)).sign(impostor)
    genuine = scene.lost_receipts[-1]
    text, _, signature_line = genuine.rstrip("\n").rpartition("\n")
    dash, name, signature = signature_line.split(" ")
    raw = bytearray(base64.b64decode(signature))
    raw[-1] ^= 1  # the key id (the first 4 bytes) still names the service's key: the signature fails
    bad_signature = f"{text}\n{dash} {name} {base64.b64encode(bytes(raw)).decode()}\n"
    origin, version, head = genuine.split("\n")[:3]
    later_text = genuine.replace(
        f"{origin}\n{version}\n{head}\n", f"{origin}\n{int(version) + 1}\n{head}\n", 1
    )
    return [by_impostor, bad_signature, later_text]


async def test_a_game_created_after_the_copy_is_lost_over_grpc(
    database_url: str, postgres_server: PostgresServer
) -> None:
    async with a_game_lost_whole(database_url, postgres_server) as scene:
        lost, receipts = scene.lost, scene.lost_receipts
        forged = forgeries(scene)
        async with serving(scene.url, scene.keyring) as channel:
            checkpoints = cp_grpc.CheckpointServiceStub(channel)  # type: ignore[no-untyped-call]
            audits = audit_grpc.AuditServiceStub(channel)  # type: ignore[no-untyped-call]

            async def check(game_id: str, notes: list[str]) -> cp.CheckReceiptsReply:
                reply: cp.CheckReceiptsReply = await checkpoints.CheckReceipts(
                    cp.CheckReceiptsRequest(game_id=game_id, receipts=notes), metadata=ADMIN
                )
                return reply

            async def verify(
                game_id: str, notes: list[str], reveal_seed: bool = False
            ) -> audit_pb.VerifyGameReply:
                request = audit_pb.VerifyGameRequest(
                    game_id=game_id, receipts=notes, check_projections=False, reveal_seed=reveal_seed
                )
                if reveal_seed:
                    request.command_id = "reveal-1"
                reply: audit_pb.VerifyGameReply = await audits.VerifyGame(request, metadata=ADMIN)
                return reply

            # Every receipt of the lost game is missing, as a lost command's is; the game is not valid.
            checked = await check(lost, receipts)
            assert not checked.valid
            assert [c.verdict for c in checked.checks] == ["missing"] * len(receipts)
            assert "the log holds no event of this game" in checked.checks[0].message
            first = checked.checks[0].version
            assert first >= 1 and [c.version for c in checked.checks] == sorted(
                c.version for c in checked.checks
            )
            verified = await verify(lost, receipts)
            assert not verified.valid and not verified.receipts_valid
            assert not verified.chain_valid and not verified.rules_valid  # nothing stored was checked
            assert verified.first_rewritten_version == first
            report = json_format.MessageToDict(verified.report)
            assert report["lost"] is True and report["valid"] is False and report["version"] == 0
            assert [r["verdict"] for r in report["receipts"]] == ["missing"] * len(receipts)
            assert f"up to version {checked.checks[-1].version}" in report["error"]
            # A seed reveal asked for a lost game has nothing to reveal, and writes nothing.
            before = await count_rows(scene.url)
            revealed = await verify(lost, receipts, reveal_seed=True)
            assert json_format.MessageToDict(revealed.report)["lost"] is True
            assert await count_rows(scene.url) == before

            # Receipts of two games in one request: the other game's are refused, not evidence.
            mixed = await check(lost, scene.kept_receipts + receipts)
            kept_count = len(scene.kept_receipts)
            assert [c.verdict for c in mixed.checks] == ["refused"] * kept_count + ["missing"] * len(receipts)
            # ... and against the game the copy holds, its own receipts match, the lost game's are refused.
            other = await check(scene.kept, scene.kept_receipts + receipts)
            assert [c.verdict for c in other.checks] == ["matches"] * kept_count + ["refused"] * len(receipts)

            # A forged receipt is refused beside a genuine one, and alone says nothing: still no game.
            beside = await check(lost, [*forged, receipts[0]])
            assert [c.verdict for c in beside.checks] == ["refused"] * len(forged) + ["missing"]
            unknown = [
                (lost, forged),
                (lost, ["not a receipt", "— x y\n"]),
                (lost, []),
                (lost, scene.kept_receipts),  # genuine, but of another game
                ("no-such-game", receipts),  # a typo: the receipts name another game
            ]
            for game_id, notes in unknown:
                error = await fails_with(
                    check(game_id, notes), grpc.StatusCode.NOT_FOUND, reason="UNKNOWN_GAME"
                )
                assert f"no game {game_id!r}" in (error.details() or "")
                error = await fails_with(
                    verify(game_id, notes), grpc.StatusCode.NOT_FOUND, reason="UNKNOWN_GAME"
                )
                assert ("nothing says it was lost" in (error.details() or "")) == bool(notes)
            await fails_with(check(lost, [""]), grpc.StatusCode.INVALID_ARGUMENT, field="receipts[0]")

        # A server whose reads go to a copy that lags (a standby) asks the primary before saying "lost".
        config = ServeConfig(
            listen="127.0.0.1:0",
            database_url=service_url(database_url),
            read_database_url=service_url(scene.url),
            admin_token=ADMIN_TOKEN,
        )
        running = await start_server(config, keyring=scene.keyring)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
                behind = await audit_grpc.AuditServiceStub(channel).VerifyGame(  # type: ignore[no-untyped-call]
                    audit_pb.VerifyGameRequest(game_id=lost, receipts=receipts, check_projections=False),
                    metadata=ADMIN,
                )
                # (A fixed deck is no seed's shuffle: the game itself is not valid, its receipts are.)
                assert behind.chain_valid and behind.receipts_valid and not behind.first_rewritten_version
                assert "lost" not in json_format.MessageToDict(behind.report)
        finally:
            await running.stop(grace=2.0)


async def test_a_game_created_after_the_copy_is_lost_on_the_command_line(
    capsys: pytest.CaptureFixture[str], database_url: str, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    async with a_game_lost_whole(database_url, postgres_server) as scene:

        def receipts_file(name: str, notes: list[str], game_id: str) -> str:
            path = tmp_path / name
            lines = [json.dumps({"game_id": game_id, "receipt": note}) for note in notes]
            path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            return str(path)

        lost_file = receipts_file("lost.jsonl", scene.lost_receipts, scene.lost)
        base = ["verify", "--no-projections", "--database-url", scene.url, "--key", scene.key]
        lost = [*base, "--game", scene.lost]
        count = len(scene.lost_receipts)
        capsys.readouterr()  # the servers' log lines, which are not the command's output

        code, out, err = await cli(capsys, *lost, "--receipts", lost_file, "--json")
        assert code == 1, err
        report = json.loads(out)
        assert report["lost"] is True and report["valid"] is False and report["game_id"] == scene.lost
        assert [r["verdict"] for r in report["receipts"]] == ["missing"] * count

        # docs/arbiter.md shows this run: its command, with the game, file and key given, prints its lines.
        [(words, shown)] = steps(shell_block(DOCS / "arbiter.md", ARBITER_HEADING, nth=1))
        assert (
            words[:2] == ["uno-audit", "verify"] and words[words.index("--receipts") + 1] == "receipts.jsonl"
        )
        # As written: only its stand-ins replaced, the database named as for a server's (DATABASE_URL).
        receipts_file("receipts.jsonl", scene.lost_receipts, scene.lost)  # the doc's file, in its folder
        given = {"9f1e…": scene.lost, "uno-audit.example+…": scene.key}
        with pytest.MonkeyPatch.context() as scoped:
            scoped.chdir(tmp_path)
            scoped.setenv("DATABASE_URL", scene.url)
            code, out, _ = await cli(capsys, *(given.get(word, word) for word in words[1:]))
        assert code == 1 and not follows(shown, out.splitlines()), out

        code, out, _ = await cli(capsys, *lost, "--receipts", lost_file, "--each")
        lines = out.splitlines()
        assert code == 1
        assert (
            lines[0] == f"game {scene.lost}: INVALID (lost: a receipt names it, the store holds none of it)"
        )
        assert lines[1].startswith(f"  not in the store: it holds no event of game {scene.lost!r}")
        assert lines[2] == f"  {count} receipts: {count} missing (their versions are past the log's end)"
        assert lines[3].startswith("  receipt 1 (version ") and ": MISSING: " in lines[3]
        assert len(lines) == 3 + count

        # Both games' receipts in one file: checked against each game, the other's are refused.
        mixed = receipts_file("mixed.jsonl", scene.kept_receipts + scene.lost_receipts, "either")
        code, out, _ = await cli(capsys, *lost, "--receipts", mixed, "--json")
        verdicts = [r["verdict"] for r in json.loads(out)["receipts"]]
        assert code == 1 and verdicts == ["refused"] * len(scene.kept_receipts) + ["missing"] * count
        code, out, _ = await cli(capsys, *base, "--game", scene.kept, "--receipts", mixed, "--json")
        verdicts = [r["verdict"] for r in json.loads(out)["receipts"]]
        assert code == 1 and verdicts == ["matches"] * len(scene.kept_receipts) + ["refused"] * count

        # No genuine receipt of it, no file's worth of receipts, or a typo: "no game", exit 2, as before.
        forged = receipts_file("forged.jsonl", forgeries(scene), scene.lost)
        empty = receipts_file("empty.jsonl", [], scene.lost)
        for game_id, path in ((scene.lost, forged), (scene.lost, empty), ("no-such-game", lost_file)):
            code, out, err = await cli(capsys, *base, "--game", game_id, "--receipts", path)
            assert (code, out) == (2, "") and f"no game {game_id!r}" in err, err
            assert ("nothing says it was lost" in err) == (path != empty) and "Traceback" not in err
        code, _, err = await cli(capsys, *lost)
        assert code == 2 and f"no game {scene.lost!r}" in err

        # A file that is not receipts is refused whole (exit 2), naming the line, whatever the game.
        garbage = tmp_path / "garbage.jsonl"
        garbage.write_text(f"{json.dumps(scene.lost_receipts[0])}\nnot json\n", encoding="utf-8")
        for game_id in (scene.lost, scene.kept):
            code, out, err = await cli(capsys, *base, "--game", game_id, "--receipts", str(garbage))
            assert (code, out) == (2, "") and "line 2: not JSON" in err
        with pytest.raises(SystemExit) as exited:  # argparse's usage error (a negative count raised before)
            await cli(capsys, *lost, "--receipts", lost_file, "--threshold", "-1")
        assert exited.value.code == 2 and "--threshold: -1 is not between 0" in capsys.readouterr().err
