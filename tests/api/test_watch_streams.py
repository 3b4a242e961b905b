"""What WatchGame streams cost and how they hold up: idle streams read nothing, a lost LISTEN connection
loses no event, the stream limits, and catching up in pages at the client's pace.

Reads are counted by wrapping the server's ``store.read_stream`` (every stream reads through it), so a
stream that polled would show up as reads while nothing is appended.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import grpc
import psycopg
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from projections.migrate import apply_migrations
from service.api.access import Access, Quotas
from service.api.config import ServeConfig
from service.api.notify import Notifier
from service.api.server import RunningServer, start_server
from service.domain.auth import SPECTATOR, Caller
from service.domain.catalogue import encode
from service.domain.entries import DisputeFiled
from service.domain.errors import ResourceExhausted
from service.store import EventStore, MemoryStore, NewEvent
from service.store.clients import ANONYMOUS
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

if TYPE_CHECKING:  # the root conftest is not importable as a module of a package
    from tests.conftest import ServiceLogin

from .support import (
    ADMIN,
    ADMIN_TOKEN,
    Game,
    Metadata,
    add,
    auth,
    create_game,
    create_scripted,
    error_info,
    fails_with,
    header,
    new_id,
    play_script,
)
from .watching import CountedReads, Reader, until

pytestmark = pytest.mark.timeout(60)


async def _play_first_card(stub: pb_grpc.GameServiceStub, game_id: str, seat: Metadata) -> pb.CommandReply:
    reply: pb.CommandReply = await stub.Play(pb.PlayRequest(header=header(game_id), card="R1"), metadata=seat)
    return reply


async def test_idle_streams_read_nothing_until_something_is_appended(
    stub: pb_grpc.GameServiceStub, server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    game = await create_scripted(stub)
    finished = await create_scripted(stub)
    ended = await play_script(stub, finished)
    callers: list[Metadata | None] = [None, game.seat(0), game.seat(1), game.seat(2), ADMIN]
    live = [Reader(stub.WatchGame(pb.WatchGameRequest(game_id=game.game_id), metadata=m)) for m in callers]
    following = Reader(stub.WatchGame(pb.WatchGameRequest(game_id=finished.game_id, follow=True)))
    for reader in live:
        await reader.has(game.reply.version)
    await following.has(ended[-1].version)

    reads = CountedReads(server.store, monkeypatch)
    await asyncio.sleep(3.0)  # a stream polling once a second would have read about 18 times by now
    assert reads.limits == [], f"idle streams read the store {len(reads.limits)} times"

    played = await _play_first_card(stub, game.game_id, game.seat(1))
    for reader in live:
        events = await reader.has(played.version)
        assert [e.version for e in events] == list(range(1, played.version + 1))
    # Each live stream read once for the append (the command itself read nothing: the handler's cache).
    assert 1 <= len(reads.limits) <= 2 * len(live)
    assert not following.task.done() and len(following.events) == ended[-1].version
    for reader in [*live, following]:
        await reader.close()


async def test_a_lost_listen_connection_loses_no_event(
    stub: pb_grpc.GameServiceStub,
    server: RunningServer,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    game = await create_scripted(stub)
    created = game.reply.version
    reader = Reader(stub.WatchGame(pb.WatchGameRequest(game_id=game.game_id, after_version=created)))
    await until(lambda: server.notifier.listening and server.notifier.open_streams == 1, "the stream")

    # From now on, listening again waits for the gate: the outage lasts as long as the test wants.
    gate = asyncio.Event()
    listen = server.store.listen

    @contextlib.asynccontextmanager
    async def gated() -> AsyncIterator[Any]:
        await gate.wait()
        async with listen() as wakeups:
            yield wakeups

    monkeypatch.setattr(server.store, "listen", gated)
    reads = CountedReads(server.store, monkeypatch)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query = 'LISTEN uno_events'"
        )
        assert await cursor.fetchall(), "no LISTEN connection to terminate"
    await until(lambda: not server.notifier.listening, "the notifier to see its connection gone")
    await until(lambda: reads.finished >= 1, "the read every stream makes when the connection is lost")

    # Appended while nobody listens: its notification goes nowhere.
    played = await _play_first_card(stub, game.game_id, game.seat(1))
    await asyncio.sleep(0.5)
    assert reader.events == [], "the event arrived before anyone listened again"
    gate.set()
    events = await reader.has(played.version - created)
    assert [e.version for e in events] == list(range(created + 1, played.version + 1))
    assert server.notifier.listening

    # And the new connection delivers what comes next.
    drawn: pb.CommandReply = await stub.Draw(
        pb.DrawRequest(header=header(game.game_id)), metadata=game.seat(2)
    )
    events = await reader.has(drawn.version - created)
    assert [e.version for e in events] == list(range(created + 1, drawn.version + 1))
    await reader.close()


async def _listen_connections(database_url: str) -> int:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query = 'LISTEN uno_events'"
        )
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def test_the_server_listens_only_while_streams_are_open(
    database_url: str, service_login: ServiceLogin
) -> None:
    # No projector: its own LISTEN connection would count beside the notifier's.
    await apply_migrations(database_url)
    server = await start_server(
        ServeConfig(
            listen="127.0.0.1:0",
            database_url=await service_login.url(database_url),
            admin_token=ADMIN_TOKEN,
            projector=False,
        )
    )
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            await _listen_only_while_watched(pb_grpc.GameServiceStub(channel), server, database_url)  # type: ignore[no-untyped-call]
    finally:
        await server.stop(grace=2.0)


async def _listen_only_while_watched(
    stub: pb_grpc.GameServiceStub, server: RunningServer, database_url: str
) -> None:
    server.notifier.linger_seconds = 0.2
    game = await create_scripted(stub)
    # Commands notify, but a server that nobody watches holds no LISTEN connection to hear them.
    await _play_first_card(stub, game.game_id, game.seat(1))
    assert not server.notifier.listening
    assert await _listen_connections(database_url) == 0

    created = game.reply.version
    reader = Reader(stub.WatchGame(pb.WatchGameRequest(game_id=game.game_id, after_version=created)))
    await until(lambda: server.notifier.listening and server.notifier.open_streams == 1, "the stream")
    assert await _listen_connections(database_url) == 1
    drawn: pb.CommandReply = await stub.Draw(
        pb.DrawRequest(header=header(game.game_id)), metadata=game.seat(2)
    )
    events = await reader.has(drawn.version - created)
    assert [e.version for e in events] == list(range(created + 1, drawn.version + 1))
    await reader.close()

    await until(lambda: not server.notifier.listening, "the notifier to stop listening after the last stream")
    assert await _listen_connections(database_url) == 0


@contextlib.asynccontextmanager
async def limited_server(
    database_url: str,
    login_url: str,
    *,
    total: int,
    per_client: int,
    spectators: int,
    per_seat: int = 3,
    require_key: bool = False,
) -> AsyncIterator[tuple[RunningServer, str]]:
    """A server like the ``server`` fixture's, with stream limits of its own (the spectators' share: half
    of ``total``), needing a client key to create games if ``require_key``; and its address."""
    await apply_migrations(database_url)
    quotas = Quotas(streams=per_client, spectators_per_game=spectators, streams_per_seat=per_seat)
    running = await start_server(
        ServeConfig(
            listen="127.0.0.1:0",
            database_url=login_url,
            admin_token=ADMIN_TOKEN,
            projector=False,
            max_streams=total,
            access=Access(require_key=require_key, quotas=quotas),
        )
    )
    try:
        yield running, f"127.0.0.1:{running.port}"
    finally:
        await running.stop(grace=2.0)


async def _created(stub: pb_grpc.GameServiceStub, metadata: Metadata | None, players: int = 3) -> Game:
    """A game created by whoever ``metadata`` names (``None``: a tokenless caller)."""
    request = pb.CreateGameRequest(
        command_id=new_id(), variant=pb.CLASSIC, players=[f"p{i}" for i in range(players)]
    )
    reply: pb.CreateGameReply = await stub.CreateGame(request, metadata=metadata)
    return Game(reply.game_id, [s.token for s in reply.seats], reply)


async def _accepted(stub: pb_grpc.GameServiceStub, game_id: str, metadata: Metadata | None) -> Any:
    """A stream from the start, once the server has sent its first event (so it was let in)."""
    call = stub.WatchGame(pb.WatchGameRequest(game_id=game_id), metadata=metadata)
    first = await asyncio.wait_for(call.read(), 10)
    assert isinstance(first, pb.Event) and first.type == "GameCreated"
    return call


async def _refused(stub: pb_grpc.GameServiceStub, game_id: str, metadata: Metadata | None) -> dict[str, str]:
    """The stream is refused with RESOURCE_EXHAUSTED, reason STREAM_LIMIT, a QuotaFailure naming the same
    scope as the ErrorInfo and a RetryInfo; the ErrorInfo's metadata."""
    call = stub.WatchGame(pb.WatchGameRequest(game_id=game_id), metadata=metadata)
    error = await fails_with(call.read(), grpc.StatusCode.RESOURCE_EXHAUSTED, reason="STREAM_LIMIT")
    metadata_of = dict(error_info(error).metadata)
    status = rpc_status.from_call(error)
    assert status is not None
    failure, retry = error_details_pb2.QuotaFailure(), error_details_pb2.RetryInfo()
    unpacked = [detail.Unpack(message) for detail in status.details for message in (failure, retry)]
    assert unpacked.count(True) == 2, status.details  # one of each (the ErrorInfo is neither)
    assert [v.subject for v in failure.violations] == [metadata_of["scope"]]
    assert retry.retry_delay.seconds > 0
    return metadata_of


async def _eventually_accepted(stub: pb_grpc.GameServiceStub, game_id: str, metadata: Metadata | None) -> Any:
    """A stream let in once the server has noticed that one was closed (it frees the slot as it does)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return await _accepted(stub, game_id, metadata)
        except grpc.aio.AioRpcError as error:
            if error.code() is not grpc.StatusCode.RESOURCE_EXHAUSTED or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def test_stream_budgets_per_seat_client_game_spectators_and_in_all(
    database_url: str, service_login: ServiceLogin
) -> None:
    login = await service_login.url(database_url)
    async with (
        limited_server(database_url, login, total=8, per_client=3, spectators=2, per_seat=2) as (
            running,
            address,
        ),
        grpc.aio.insecure_channel(address) as one,
        grpc.aio.insecure_channel(address) as other,
    ):
        stub = pb_grpc.GameServiceStub(one)  # type: ignore[no-untyped-call]
        second = pb_grpc.GameServiceStub(other)  # type: ignore[no-untyped-call]
        game = await create_scripted(stub)  # the adjudicator's: its seats count against client "admin"
        gid = game.game_id

        # Each seat has a budget of its own, whoever holds its token...
        seats = [await _accepted(stub, gid, game.seat(0)) for _ in range(2)]
        assert await _refused(second, gid, game.seat(0)) == {"limit": "2", "scope": f"game:{gid}:seat:0"}
        # ...and a keyed client answers for its games' seats: more tokens buy it no more streams.
        seats.append(await _accepted(stub, gid, game.seat(1)))
        assert await _refused(stub, gid, game.seat(2)) == {"limit": "3", "scope": "client:admin"}

        # Tokenless spectators: their game's cap, whatever their connection, then the spectators' share
        # (half the server's 8).
        spectators = [await _accepted(stub, gid, None), await _accepted(second, gid, None)]
        assert await _refused(second, gid, None) == {"limit": "2", "scope": f"game:{gid}"}
        anonymous = await create_game(second)
        spectators += [await _accepted(second, anonymous.game_id, None) for _ in range(2)]
        third = await create_game(second)
        assert await _refused(second, third.game_id, None) == {"limit": "4", "scope": "spectators"}

        # The server's last place is a seat's (no spectator could take it); then the server is full.
        seats.append(await _accepted(second, anonymous.game_id, anonymous.seat(0)))
        assert running.notifier.open_streams == 8
        assert await _refused(second, third.game_id, third.seat(0)) == {"limit": "8", "scope": "server"}

        # Closing a stream frees its place, for each of its budgets and in all.
        seats[0].cancel()
        seats[0] = await _eventually_accepted(stub, gid, game.seat(0))
        spectators[0].cancel()
        spectators[0] = await _eventually_accepted(second, third.game_id, None)
        assert running.notifier.open_streams == 8
        seats.pop().cancel()
        await until(lambda: running.notifier.open_streams == 7, "the cancelled stream to close")
        assert await _refused(stub, third.game_id, None) == {"limit": "4", "scope": "spectators"}
        assert await _refused(stub, gid, game.seat(2)) == {"limit": "3", "scope": "client:admin"}

        # A stream that ends by itself frees its place too: a finished game's ends after its last event.
        await play_script(stub, game)
        for call in [*seats, *spectators]:
            call.cancel()
        await until(lambda: running.notifier.open_streams == 0, "every stream to close")
        ended = [e async for e in stub.WatchGame(pb.WatchGameRequest(game_id=gid), metadata=ADMIN)]
        assert ended[-1].type == "GameEnded"
        await until(lambda: running.notifier.open_streams == 0, "the finished game's stream to end")


@pytest.mark.parametrize("keyed", [False, True], ids=["keyless-server", "keyed-server"])
async def test_a_tokenless_spectator_flood_refuses_no_one_elses_seat(
    database_url: str, service_login: ServiceLogin, keyed: bool
) -> None:
    """One tokenless client watches game after game until every cap refuses it: its games' caps, then
    the spectators' share. Another game's spectators get their streams meanwhile, and a new game's seats
    all of theirs, on a server where anyone creates games and on one that needs a client key."""
    key = await add(database_url, "tablefriends")
    creator = auth(key) if keyed else None  # a keyless server's games are the anonymous client's
    login = await service_login.url(database_url)
    server = limited_server(
        database_url, login, total=24, per_client=8, spectators=3, per_seat=2, require_key=keyed
    )
    async with (
        server as (running, address),
        grpc.aio.insecure_channel(address) as flood_channel,
        grpc.aio.insecure_channel(address) as table_channel,
    ):
        flood = pb_grpc.GameServiceStub(flood_channel)  # type: ignore[no-untyped-call]
        table = pb_grpc.GameServiceStub(table_channel)  # type: ignore[no-untyped-call]
        games = [await _created(table, creator) for _ in range(5)]
        held = []
        # Three games' spectators up to each game's cap: more than any one client's quota (8) holds.
        for game in games[:3]:
            held += [await _accepted(flood, game.game_id, None) for _ in range(3)]
            refused = await _refused(flood, game.game_id, None)
            assert refused == {"limit": "3", "scope": f"game:{game.game_id}"}
        # Another game's spectators still get their streams, tokenless or with a client key.
        others = [await _accepted(table, games[3].game_id, None)]
        others.append(await _accepted(table, games[3].game_id, auth(key)))
        # The flood goes on, on a fresh game, until the spectators' share (half of 24) refuses it.
        held.append(await _accepted(flood, games[4].game_id, None))
        assert await _refused(flood, games[4].game_id, None) == {"limit": "12", "scope": "spectators"}
        assert await _refused(table, games[3].game_id, auth(key)) == {"limit": "12", "scope": "spectators"}
        assert running.notifier.open_streams == 12

        # A new game's seats all get their streams, each up to its own budget, whatever another seat
        # holds; on a keyed server they count against the game's client too (1 spectator + 6 seats: 7).
        new = await _created(table, creator)
        seats = []
        for seat in range(3):
            seats += [await _accepted(table, new.game_id, new.seat(seat)) for _ in range(2)]
            refused = await _refused(table, new.game_id, new.seat(seat))
            assert refused == {"limit": "2", "scope": f"game:{new.game_id}:seat:{seat}"}
        # And the flooded games' own seats too.
        seats.append(await _accepted(table, games[0].game_id, games[0].seat(0)))
        assert running.notifier.open_streams == 19
        for call in [*held, *others, *seats]:
            call.cancel()
        await until(lambda: running.notifier.open_streams == 0, "every stream to close")


async def test_budgets_are_counted_by_key_so_no_game_id_passes_for_another_scope() -> None:
    """The spectators of a game whose id reads like another game's seat (``g:seat:0``) take nothing from
    that seat; and a seat's budget holds only its own seat's streams."""
    quotas = Quotas(spectators_per_game=5, streams_per_seat=1)
    notifier = Notifier(MemoryStore(), max_streams=10, quotas=quotas)
    with contextlib.ExitStack() as held:
        held.enter_context(notifier.watcher("g:seat:0", SPECTATOR, client=ANONYMOUS))
        held.enter_context(notifier.watcher("g", Caller(seat=0), client=ANONYMOUS))
        held.enter_context(notifier.watcher("g", Caller(seat=1), client=ANONYMOUS))
        with (
            pytest.raises(ResourceExhausted) as refused,
            notifier.watcher("g", Caller(seat=0), client=ANONYMOUS),
        ):
            pass
        assert dict(refused.value.metadata) == {"limit": "1", "scope": "game:g:seat:0"}
        assert notifier.open_streams == 3
    assert notifier.open_streams == 0


def test_spectators_can_never_hold_the_whole_server() -> None:
    for share in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="spectator_share"):
            Quotas(spectator_share=share)
    assert Notifier(MemoryStore(), max_streams=1000).spectator_limit == 500


async def _long_game(
    stub: pb_grpc.GameServiceStub, store: EventStore, entries: int, size: int
) -> tuple[str, int]:
    """A game in progress whose stream holds ``entries`` dispute filings of ``size`` characters after its
    creation (appended straight to the store in one command: the API would take a command each, and
    bounds a claim to 2,000 characters)."""
    game = await create_scripted(stub)
    claim = "x" * size
    filed = [
        NewEvent(*encode(DisputeFiled(new_id(), i % 3, "uno-catch", 1, None, claim))) for i in range(entries)
    ]
    result = await store.append(
        game.game_id,
        game.reply.version,
        filed,
        command_id=new_id(),
        request_hash=bytes(32),
        metadata={"actor": "test", "command": "FileDispute"},
    )
    return game.game_id, result.last_version


async def test_catching_up_reads_in_pages(
    stub: pb_grpc.GameServiceStub, server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.notifier.page_size = 7
    game = await create_scripted(stub)
    replies = await play_script(stub, game)
    last = replies[-1].version
    reads = CountedReads(server.store, monkeypatch)
    events = [e async for e in stub.WatchGame(pb.WatchGameRequest(game_id=game.game_id))]
    assert [e.version for e in events] == list(range(1, last + 1))
    # Pages of 7 until one comes back short (an empty one when the last page was full); the load of the
    # game before the stream reads without a limit.
    assert [limit for limit in reads.limits if limit is not None] == [7] * (last // 7 + 1)


async def test_a_slow_client_holds_back_the_reads_of_its_stream(
    stub: pb_grpc.GameServiceStub, server: RunningServer, store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.notifier.page_size = 10
    game_id, last = await _long_game(stub, store, 1000, 16_000)  # 16 MB: more than sockets and gRPC buffer
    pages = last // 10 + 1
    reads = CountedReads(server.store, monkeypatch)
    call = stub.WatchGame(pb.WatchGameRequest(game_id=game_id))
    first = await call.read()
    assert isinstance(first, pb.Event) and first.version == 1

    # The client reads no further: the server fills what the connection buffers, then waits for it.
    def pages_read() -> int:
        return len([limit for limit in reads.limits if limit == 10])

    held, deadline = -1, time.monotonic() + 30
    while held != pages_read() and time.monotonic() < deadline:
        held = pages_read()
        await asyncio.sleep(1.0)
    assert held < pages, f"the server read all {pages} pages for a client that read one event"

    seen = [first]
    while len(seen) < last:
        event = await asyncio.wait_for(call.read(), 10)
        assert isinstance(event, pb.Event)
        seen.append(event)
    assert [e.version for e in seen] == list(range(1, last + 1))
    assert pages_read() == pages
    call.cancel()
