"""WatchGame: the events and audit entries after a version, in order, then live ones as they are appended;
the stream ends once a finished game's stored stream has been sent (audit entries after GameEnded
included), unless ``follow`` keeps it open for the entries still to come."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from service.api.server import RunningServer
from service.store import EventStore
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import ADMIN, Game, Metadata, create_scripted, header, new_id, payload, play_script
from .watching import Reader, until

pytestmark = pytest.mark.timeout(30)


async def _collect(
    stub: pb_grpc.GameServiceStub, game_id: str, after: int, metadata: Metadata | None = None
) -> list[pb.Event]:
    call = stub.WatchGame(pb.WatchGameRequest(game_id=game_id, after_version=after), metadata=metadata)
    return [event async for event in call]


def _waiting(server: RunningServer, game_id: str) -> int:
    """How many of the server's streams of ``game_id`` have caught up and wait to be woken."""
    return sum(watcher.waiting for watcher in server.notifier.watchers_of(game_id))


def _following(stub: pb_grpc.GameServiceStub, game_id: str, after: int) -> Reader:
    return Reader(stub.WatchGame(pb.WatchGameRequest(game_id=game_id, after_version=after, follow=True)))


async def _file_dispute(channel: grpc.aio.Channel, game: Game) -> apb.Dispute:
    """Seat 0 disputes the first play of the scripted game (an audit entry, appended to the stream)."""
    audit = audit_pb2_grpc.AuditServiceStub(channel)  # type: ignore[no-untyped-call]
    request = apb.FileDisputeRequest(
        game_id=game.game_id,
        command_id=new_id(),
        kind=apb.UNO_CATCH,
        position=game.reply.version + 1,
        target=1,
        claim="seat 1 held one card and did not call",
    )
    filed: apb.Dispute = await audit.FileDispute(request, metadata=game.seat(0))
    return filed


async def _rule(channel: grpc.aio.Channel, game: Game, dispute: apb.Dispute) -> apb.Dispute:
    audit = audit_pb2_grpc.AuditServiceStub(channel)  # type: ignore[no-untyped-call]
    request = apb.RuleOnDisputeRequest(
        game_id=game.game_id, dispute_id=dispute.dispute_id, command_id=new_id()
    )
    ruled: apb.Dispute = await audit.RuleOnDispute(request, metadata=ADMIN)
    return ruled


async def test_watching_resumes_follows_live_and_ends_with_the_game(
    stub: pb_grpc.GameServiceStub, store: EventStore, server: RunningServer
) -> None:
    game = await create_scripted(stub)
    created = game.reply.version
    # Watchers from the start and from the middle of what is stored, started before the game goes on.
    early = [asyncio.create_task(_collect(stub, game.game_id, after)) for after in (0, 2, created)]
    seat = asyncio.create_task(_collect(stub, game.game_id, created - 1, game.seat(1)))
    await until(lambda: _waiting(server, game.game_id) == 4, "four streams caught up and waiting")
    assert not any(task.done() for task in [*early, seat])

    replies = await play_script(stub, game)
    stored = await store.read_stream(game.game_id)
    last = stored[-1]
    assert last.type == "GameEnded" and last.version == replies[-1].version

    for after, task in zip((0, 2, created), early, strict=True):
        events = await asyncio.wait_for(task, 5)  # each ends by itself after GameEnded
        assert [e.version for e in events] == list(range(after + 1, last.version + 1))
        assert [e.type for e in events] == [e.type for e in stored[after:]]
        assert [e.position for e in events] == [e.position for e in stored[after:]]
    seen = await asyncio.wait_for(seat, 5)
    assert [e.version for e in seen] == list(range(created, last.version + 1))

    # After the end: from any version, the rest of the log, and the stream ends.
    for after in (0, 5, last.version - 1):
        events = await asyncio.wait_for(_collect(stub, game.game_id, after, ADMIN), 5)
        assert [e.version for e in events] == list(range(after + 1, last.version + 1))
        assert [(e.type, dict(payload(e))) for e in events][-1][0] == "GameEnded"


async def test_a_watch_past_the_end_of_a_finished_game_ends(stub: pb_grpc.GameServiceStub) -> None:
    game = await create_scripted(stub)
    replies = await play_script(stub, game)
    for after in (replies[-1].version, replies[-1].version + 10):
        assert await asyncio.wait_for(_collect(stub, game.game_id, after), 3) == []


async def test_live_events_arrive_by_notification(
    stub: pb_grpc.GameServiceStub, server: RunningServer
) -> None:
    """A waiting watcher is woken by each command's notification (LISTEN/NOTIFY) and by nothing else: no
    timer, no poll. Counted, not timed."""
    game = await create_scripted(stub)
    call = stub.WatchGame(pb.WatchGameRequest(game_id=game.game_id, after_version=game.reply.version))
    await until(lambda: len(server.notifier.watchers_of(game.game_id)) == 1, "the stream to subscribe")
    (watcher,) = server.notifier.watchers_of(game.game_id)
    script: list[tuple[int, pb.PlayRequest | pb.DrawRequest]]
    script = [(1, pb.PlayRequest(card="R1")), (2, pb.DrawRequest()), (0, pb.DrawRequest())]
    script += [(1, pb.PlayRequest(card="R2")), (2, pb.DrawRequest())]
    for seat, request in script:
        await until(lambda: watcher.waiting, "the stream to catch up and wait")
        woken = watcher.wakes["notification"]
        request.header.CopyFrom(header(game.game_id))
        method = stub.Play if isinstance(request, pb.PlayRequest) else stub.Draw
        reply: pb.CommandReply = await method(request, metadata=game.seat(seat))
        for expected in reply.events:
            event = await call.read()
            assert isinstance(event, pb.Event)
            assert (event.version, event.type) == (expected.version, expected.type)
        assert watcher.wakes["notification"] > woken, "the events came without a notification"
    # Nothing but notifications woke it: one per command, and at most those of the game's setup that
    # were still on their way when the stream subscribed.
    assert set(watcher.wakes) == {"notification"}, watcher.wakes
    assert len(script) <= watcher.wakes["notification"] <= len(script) + 2, watcher.wakes
    call.cancel()


async def test_a_cancelled_watch_frees_the_server(stub: pb_grpc.GameServiceStub) -> None:
    game = await create_scripted(stub)
    calls = [stub.WatchGame(pb.WatchGameRequest(game_id=game.game_id)) for _ in range(10)]
    for call in calls:
        first = await call.read()
        assert isinstance(first, pb.Event) and first.type == "GameCreated"
        call.cancel()
    for call in calls:
        with pytest.raises(asyncio.CancelledError):
            await call.read()
    # The server still answers commands and new watchers.
    replies = await play_script(stub, game)
    events = await asyncio.wait_for(_collect(stub, game.game_id, 0), 5)
    assert events[-1].version == replies[-1].version
    view: pb.GameView = await stub.GetGame(pb.GetGameRequest(game_id=game.game_id))
    assert view.awaiting == "game-over"


async def test_a_finished_game_streams_its_audit_entries_then_ends_unless_followed(
    stub: pb_grpc.GameServiceStub, channel: grpc.aio.Channel, server: RunningServer
) -> None:
    game = await create_scripted(stub)
    end = (await play_script(stub, game))[-1].version
    filed = await _file_dispute(channel, game)
    assert filed.filed_at == end + 1

    # Without follow: everything stored after the version, the entries after GameEnded included; then the
    # stream ends, from anywhere (from the current version or past it: at once, with nothing).
    for after, expected in ((0, range(1, end + 2)), (end - 1, [end, end + 1]), (end, [end + 1])):
        events = await asyncio.wait_for(_collect(stub, game.game_id, after), 10)
        assert [e.version for e in events] == list(expected)
        assert events[-1].type == "DisputeFiled"
    for after in (end + 1, end + 50):
        assert await asyncio.wait_for(_collect(stub, game.game_id, after), 10) == []

    # With follow: the same, then the stream stays open for what the audit trail appends next.
    from_start, from_now = _following(stub, game.game_id, 0), _following(stub, game.game_id, end + 1)
    await from_start.has(end + 1)
    ruled = await _rule(channel, game, filed)
    assert ruled.ruled_at == end + 2
    assert [e.version for e in await from_start.has(end + 2)] == list(range(1, end + 3))
    assert [(e.version, e.type) for e in await from_now.has(1)] == [(end + 2, "DisputeRuled")]
    await until(lambda: _waiting(server, game.game_id) == 2, "both followed streams waiting for more")
    assert not from_start.task.done() and not from_now.task.done(), "a followed stream ended by itself"
    await from_start.close()
    await from_now.close()


async def test_a_game_in_progress_is_followed_to_its_end_and_with_follow_beyond(
    stub: pb_grpc.GameServiceStub, channel: grpc.aio.Channel, server: RunningServer
) -> None:
    game = await create_scripted(stub)
    created = game.reply.version
    plain = asyncio.create_task(_collect(stub, game.game_id, created))
    past = asyncio.create_task(_collect(stub, game.game_id, 1000))  # a version the game never reaches
    followed = _following(stub, game.game_id, created)
    await until(lambda: _waiting(server, game.game_id) == 3, "three streams caught up and waiting")
    end = (await play_script(stub, game))[-1].version

    events = await asyncio.wait_for(plain, 10)
    assert [e.version for e in events] == list(range(created + 1, end + 1))
    assert events[-1].type == "GameEnded"
    assert await asyncio.wait_for(past, 10) == [], "a stream past the end must end with the game"
    await followed.has(end - created)
    filed = await _file_dispute(channel, game)
    seen = await followed.has(end - created + 1)
    assert [(e.version, e.type) for e in seen[-2:]] == [(end, "GameEnded"), (filed.filed_at, "DisputeFiled")]
    assert not followed.task.done()
    await followed.close()
