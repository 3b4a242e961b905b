"""Client keys and quotas: the operator's `clients` command, creations that need a key beyond loopback,
per-client quotas on creations and live games, and the stream attack that minting seat tokens was."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import grpc
import psycopg
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from service.api.access import Access, Quotas, is_loopback
from service.api.config import ServeConfig
from service.api.server import RunningServer, start_server
from service.cli.main import build_parser
from service.cli.serve import _access
from service.store import EventStore, NewEvent
from service.store.migrate import apply_migrations
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import ADMIN, ADMIN_TOKEN, add, auth, clients, count_rows, error_info, fails_with, new_id

if TYPE_CHECKING:  # the root conftest is not importable as a module of a package
    from tests.conftest import ServiceLogin

pytestmark = pytest.mark.timeout(60)


@contextlib.asynccontextmanager
async def serving(
    database_url: str, login_url: str, access: Access
) -> AsyncIterator[pb_grpc.GameServiceStub]:
    await apply_migrations(database_url)
    running: RunningServer = await start_server(
        ServeConfig(
            listen="127.0.0.1:0",
            database_url=login_url,
            admin_token=ADMIN_TOKEN,
            projector=False,
            access=access,
        )
    )
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            yield pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
    finally:
        await running.stop(grace=2.0)


def create() -> tuple[pb.CreateGameRequest, None]:
    return pb.CreateGameRequest(command_id=new_id(), variant=pb.CLASSIC, players=["a", "b"]), None


# --- the operator's command -----------------------------------------------------------------------------


async def test_a_key_is_shown_once_and_only_its_hash_is_kept(database_url: str) -> None:
    key = await add(database_url, "alice")
    assert key.startswith("uak_") and len(key) > 40
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        rows = await (await conn.execute("SELECT name, key_sha256, revoked_at FROM clients")).fetchall()
    assert rows == [("alice", hashlib.sha256(key.encode()).digest(), None)]

    code, out, _ = await clients("list", "--database-url", database_url)
    assert code == 0 and [json.loads(line)["client"] for line in out.splitlines()] == ["alice"]
    assert key not in out
    code, out, _ = await clients("revoke", "alice", "--database-url", database_url)
    assert code == 0 and json.loads(out) == {"client": "alice", "revoked": True}
    code, out, _ = await clients("list", "--database-url", database_url)
    assert json.loads(out)["revoked"] is not None


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["add", "alice"], "exists"),
        (["add", "Alice"], "client name"),
        (["add", "a b"], "client name"),
        (["add", "x" * 65], "client name"),
        (["add", "_lead"], "client name"),
        (["revoke", "nobody"], "no client"),
    ],
    ids=["taken", "capital", "space", "too-long", "leading-underscore", "unknown"],
)
async def test_a_bad_name_or_a_taken_one_is_refused_in_one_line(
    argv: list[str], says: str, database_url: str
) -> None:
    await add(database_url, "alice")
    code, out, err = await clients(*argv, "--database-url", database_url)
    assert code == 2 and out == "" and says in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize(
    ("listen", "anonymous", "required"),
    [
        ("127.0.0.1:50051", False, False),
        ("[::1]:50051", False, False),
        ("localhost:50051", False, False),
        ("0.0.0.0:50051", False, True),
        ("[::]:50051", False, True),
        ("10.1.2.3:50051", False, True),
        ("0.0.0.0:50051", True, False),
    ],
)
def test_a_key_is_required_beyond_loopback_unless_anonymous_is_allowed(
    listen: str, anonymous: bool, required: bool
) -> None:
    argv = ["serve", "--listen", listen, *(["--allow-anonymous"] if anonymous else [])]
    assert _access(build_parser().parse_args(argv)).require_key is required
    assert is_loopback(listen) is listen.startswith(("127.", "[::1]", "localhost"))


# --- creations ------------------------------------------------------------------------------------------


async def test_beyond_loopback_a_creation_needs_a_live_key_and_the_game_records_its_client(
    database_url: str, service_login: ServiceLogin
) -> None:
    key = await add(database_url, "alice")
    revoked = await add(database_url, "bob")
    await clients("revoke", "bob", "--database-url", database_url)
    login = await service_login.url(database_url)
    async with serving(database_url, login, Access(require_key=True)) as stub:
        rows = await count_rows(database_url)
        for metadata, reason in ((None, "CLIENT_KEY_REQUIRED"), (auth(revoked), "UNKNOWN_CLIENT_KEY")):
            request, _ = create()
            await fails_with(
                stub.CreateGame(request, metadata=metadata), grpc.StatusCode.UNAUTHENTICATED, reason=reason
            )
        assert await count_rows(database_url) == rows

        request, _ = create()
        created: pb.CreateGameReply = await stub.CreateGame(request, metadata=auth(key))
        by_admin: pb.CreateGameReply = await stub.CreateGame(create()[0], metadata=ADMIN)
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute(
            "SELECT g.client, e.metadata->>'client' FROM games g JOIN events e USING (game_id) "
            "WHERE e.version = 1 ORDER BY g.client"
        )
        assert await cursor.fetchall() == [("admin", "admin"), ("alice", "alice")]
    assert created.game_id != by_admin.game_id


async def test_creations_over_a_quota_are_refused_with_its_details_and_other_clients_go_on(
    database_url: str, service_login: ServiceLogin
) -> None:
    key = await add(database_url, "alice")
    login = await service_login.url(database_url)
    async with serving(database_url, login, Access(quotas=Quotas(creations_per_minute=3))) as stub:
        first = create()[0]
        await stub.CreateGame(first)
        for _ in range(2):
            await stub.CreateGame(create()[0])
        rows = await count_rows(database_url)
        error = await fails_with(
            stub.CreateGame(create()[0]), grpc.StatusCode.RESOURCE_EXHAUSTED, reason="QUOTA_EXCEEDED"
        )
        assert error_info(error).metadata["quota"] == "creations_per_minute"
        failure, retry = _quota_details(error)
        assert [v.subject for v in failure.violations] == ["client:anonymous"]
        assert retry.retry_delay.seconds > 0
        assert await count_rows(database_url) == rows
        # A retry of an admitted creation is told its game exists, not refused for the quota it counts in.
        await fails_with(stub.CreateGame(first), grpc.StatusCode.ALREADY_EXISTS, reason="GAME_EXISTS")
        # Another client's quota is its own.
        await stub.CreateGame(create()[0], metadata=auth(key))


async def test_live_games_count_until_they_end(database_url: str) -> None:
    await apply_migrations(database_url)
    async with await EventStore.open(database_url) as store:
        ids = []
        for n in range(3):
            game_id = f"g{n}"
            await store.create_game(
                game_id,
                variant="classic",
                players=["a", "b"],
                tournament_id="",
                seed=None,
                seat_token_hashes=[bytes(32), bytes(range(32))],
                command_id=f"create-{n}",
                request_hash=bytes(32),
                events=[NewEvent("GameCreated", {"n": n})],
                metadata={},
                client="alice",
            )
            ids.append(game_id)
        usage = await store.client_usage("alice", window_seconds=60, live_bound=10)
        assert (usage.created_recently, usage.live) == (3, 3)
        assert (await store.client_usage("alice", window_seconds=60, live_bound=2)).live == 2  # bounded
        await store.append(
            "g1", 1, [NewEvent("GameEnded", {})], command_id="end", request_hash=bytes(32), metadata={}
        )
        assert (await store.client_usage("alice", window_seconds=60, live_bound=10)).live == 2
        assert (await store.client_usage("bob", window_seconds=60, live_bound=10)).live == 0


async def test_live_games_over_the_quota_are_refused(database_url: str, service_login: ServiceLogin) -> None:
    login = await service_login.url(database_url)
    async with serving(database_url, login, Access(quotas=Quotas(live_games=2))) as stub:
        for _ in range(2):
            await stub.CreateGame(create()[0])
        error = await fails_with(
            stub.CreateGame(create()[0]), grpc.StatusCode.RESOURCE_EXHAUSTED, reason="QUOTA_EXCEEDED"
        )
        assert error_info(error).metadata["quota"] == "live_games"


# --- streams: the attack --------------------------------------------------------------------------------


async def test_streams_on_minted_seat_tokens_stop_at_each_seats_budget(
    database_url: str, service_login: ServiceLogin
) -> None:
    """Anonymous creations mint seat tokens; each opens its own seat's few streams, counted against no
    client (so the tokenless callers' streams do not lock each other out), and a seat of a game another
    client created still watches, counted against that client."""
    key = await add(database_url, "alice")
    login = await service_login.url(database_url)
    access = Access(quotas=Quotas(streams=8, spectators_per_game=4, streams_per_seat=2))
    async with serving(database_url, login, access) as stub:
        held = []
        for _ in range(3):  # 3 games of 4 seats, 2 streams each: three times a client's quota
            game: pb.CreateGameReply = await stub.CreateGame(
                pb.CreateGameRequest(command_id=new_id(), variant=pb.CLASSIC, players=["a", "b", "c", "d"])
            )
            for seat in game.seats:
                request = pb.WatchGameRequest(game_id=game.game_id)
                for _ in range(2):
                    call = stub.WatchGame(request, metadata=auth(seat.token))
                    assert isinstance(await asyncio.wait_for(call.read(), 10), pb.Event)
                    held.append(call)
                error = await fails_with(
                    stub.WatchGame(request, metadata=auth(seat.token)).read(),
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    reason="STREAM_LIMIT",
                )
                scope = f"game:{game.game_id}:seat:{seat.seat}"
                assert dict(error_info(error).metadata) == {"limit": "2", "scope": scope}
        assert len(held) == 24

        theirs: pb.CreateGameReply = await stub.CreateGame(create()[0], metadata=auth(key))
        watches = []
        for seat in theirs.seats:  # 2 seats of 2 streams: 4 of alice's 8
            for _ in range(2):
                call = stub.WatchGame(pb.WatchGameRequest(game_id=theirs.game_id), metadata=auth(seat.token))
                first = await asyncio.wait_for(call.read(), 10)
                assert isinstance(first, pb.Event) and first.type == "GameCreated"
                watches.append(call)
        # A spectator with the client's key counts against that client too: 4 more fill its quota.
        for _ in range(4):
            spectator = stub.WatchGame(pb.WatchGameRequest(game_id=theirs.game_id), metadata=auth(key))
            assert isinstance(await asyncio.wait_for(spectator.read(), 10), pb.Event)
            watches.append(spectator)
        error = await fails_with(
            stub.WatchGame(pb.WatchGameRequest(game_id=theirs.game_id), metadata=auth(key)).read(),
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            reason="STREAM_LIMIT",
        )
        assert dict(error_info(error).metadata) == {"limit": "8", "scope": "client:alice"}
        for call in [*held, *watches]:
            call.cancel()


def _quota_details(
    error: grpc.aio.AioRpcError,
) -> tuple[error_details_pb2.QuotaFailure, error_details_pb2.RetryInfo]:
    status = rpc_status.from_call(error)
    assert status is not None
    failure, retry = error_details_pb2.QuotaFailure(), error_details_pb2.RetryInfo()
    kinds = set()
    for detail in status.details:
        for message in (failure, retry):
            if detail.Is(message.DESCRIPTOR):
                detail.Unpack(message)
                kinds.add(type(message).__name__)
    assert kinds == {"QuotaFailure", "RetryInfo"}, kinds
    return failure, retry
