"""``ServeConfig.read_database_url``: the reads that may lag go to that database, everything else to the
primary's.

The read database here is a second database holding other games (a standby would hold the same ones,
later): a read that answers with a game only it has went there, and a command or a seed reveal that
finds only the primary's games stayed on the primary.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from service.api.config import ServeConfig
from service.api.server import RunningServer, start_server
from service.client.bots import run_bots
from service.rules.options import Variant
from tests.postgres import PostgresServer, service_url
from uno_audit_client.gen.uno.audit.v1 import audit_pb2, audit_pb2_grpc
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .shared_server import serving
from .support import ADMIN, ADMIN_TOKEN, create_game, fails_with, header

pytestmark = pytest.mark.timeout(90)

TOURNAMENT = "read-cup"


@pytest.fixture
async def read_database(postgres_server: PostgresServer, migrated_template: str) -> AsyncIterator[str]:
    url = postgres_server.create_database(template=migrated_template)
    try:
        yield url
    finally:
        postgres_server.drop_database(url)


async def test_lagging_reads_go_to_the_read_database(database_url: str, read_database: str) -> None:
    # The read database's own games: a finished bot game in a tournament, played through a server of its.
    async with serving(read_database) as other:
        summary = await run_bots(
            f"127.0.0.1:{other.port}", games=1, variant=Variant.SONIC, players=2, concurrency=1,
            tournament_id=TOURNAMENT,
        )  # fmt: skip
        assert summary.rejected == 0
        async with grpc.aio.insecure_channel(f"127.0.0.1:{other.port}") as channel:
            theirs_stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
            listed = await theirs_stub.ListGames(pb.ListGamesRequest(tournament_id=TOURNAMENT))
            cursor = (await theirs_stub.GetProjectionLag(pb.GetProjectionLagRequest())).checkpoint
    theirs = listed.games[0].game_id

    running: RunningServer = await start_server(
        ServeConfig(
            listen="127.0.0.1:0",
            database_url=service_url(database_url),
            read_database_url=service_url(read_database),
            admin_token=ADMIN_TOKEN,
        )
    )
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            games = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
            audit = audit_pb2_grpc.AuditServiceStub(channel)  # type: ignore[no-untyped-call]
            ours = await create_game(games, players=2)
            started = await games.StartRound(
                pb.StartRoundRequest(header=header(ours.game_id)), metadata=ADMIN
            )
            assert started.view.round == 1  # commands: the primary

            # Verifying, exporting, replaying and standings: the read database.
            verified = await audit.VerifyGame(audit_pb2.VerifyGameRequest(game_id=theirs), metadata=ADMIN)
            assert verified.valid
            exported = await audit.ExportGame(audit_pb2.ExportGameRequest(game_id=theirs), metadata=ADMIN)
            assert exported.record
            replayed = await audit.ReplayGame(audit_pb2.ReplayGameRequest(game_id=theirs), metadata=ADMIN)
            assert "<html" in replayed.html.lower()
            standings = await games.GetStandings(
                pb.GetStandingsRequest(tournament_id=TOURNAMENT, min_cursor=cursor)
            )
            assert {row.player for row in standings.standings} == {"bot1", "bot2"}
            # The primary's own game is not there (a standby that lags would not have it yet either).
            await fails_with(
                audit.VerifyGame(audit_pb2.VerifyGameRequest(game_id=ours.game_id), metadata=ADMIN),
                grpc.StatusCode.NOT_FOUND,
            )
            await fails_with(
                audit.ExportGame(audit_pb2.ExportGameRequest(game_id=ours.game_id), metadata=ADMIN),
                grpc.StatusCode.NOT_FOUND,
            )

            # A seed reveal appends an entry: the primary's, where the read database's game is unknown.
            await fails_with(
                audit.VerifyGame(
                    audit_pb2.VerifyGameRequest(game_id=theirs, reveal_seed=True, command_id="reveal-1"),
                    metadata=ADMIN,
                ),
                grpc.StatusCode.NOT_FOUND,
            )
    finally:
        await running.stop(grace=2.0)
