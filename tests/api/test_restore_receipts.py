"""A database restored from an older copy cannot pass as the whole history: the players' receipts for the
commands after the copy are reported ``missing``, and the game is not valid with them.

The copy is the database's files at a moment the server was stopped (``CREATE DATABASE … TEMPLATE``, what
a base backup taken then restores to); the game then goes on, and the arbiter checks every receipt
against the restored database, through a server over it signing with the same key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
import pytest
from psycopg.conninfo import conninfo_to_dict

from service.api.config import ServeConfig
from service.api.server import RunningServer, start_server
from service.checkpoints import Signer
from service.checkpoints.keyring import Keyring
from tests.postgres import PostgresServer, service_url
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as audit_pb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc as audit_grpc
from uno_audit_client.gen.uno.audit.v1 import checkpoint_pb2 as cp
from uno_audit_client.gen.uno.audit.v1 import checkpoint_pb2_grpc as cp_grpc
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import ADMIN, ADMIN_TOKEN, SCRIPT_HANDS, create_scripted, header

pytestmark = pytest.mark.timeout(60)


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
    restored = postgres_server.create_database(template=conninfo_to_dict(database_url)["dbname"])
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
