"""The client package against a real server: a whole game played, watched and its receipts checked; a lost
reply retried with the same command id and answered from the ledger; forged receipts refused."""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio

from service.checkpoints import Signer
from service.checkpoints.checkpoint import game_checkpoint
from tests.api.shared_server import shared_address, shared_server  # noqa: F401
from tests.api.support import ADMIN_TOKEN
from uno_audit_client import (
    Client,
    CreationLost,
    Receipt,
    ReceiptBook,
    ReceiptError,
    RetryPolicy,
    Verifier,
    open_receipt,
)
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb

from .naive import play_to_the_end

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300)]

#: How many messages the first WatchGame stream through :class:`LosingProxy` carries before it is cut off.
CUT_AFTER = 3
FAST = RetryPolicy(retry_for=30, backoff_cap=0.2, first_backoff=0.01, call_timeout=20)


@dataclass
class LosingProxy(grpc.GenericRpcHandler):
    """Forwards every unary call to ``upstream`` byte for byte, but loses the reply of the first call of
    ``method`` (the server carried it out; the client gets UNAVAILABLE). ``seen`` lists (method, request)."""

    upstream: grpc.aio.Channel
    method: str
    seen: list[tuple[str, bytes]] = field(default_factory=list)

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[Any, Any]:
        method = details.method.rsplit("/", 1)[-1]
        forward: Any = self.upstream.unary_unary(details.method)

        async def handle(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
            first = all(name != method for name, _ in self.seen)
            self.seen.append((method, request))
            metadata = [(k, v) for k, v in context.invocation_metadata() or () if k == "authorization"]
            try:
                reply: bytes = await forward(request, metadata=metadata)
            except grpc.aio.AioRpcError as error:
                await context.abort(
                    error.code(), error.details() or "", tuple(error.trailing_metadata() or ())
                )
            if method == self.method and first:
                await context.abort(grpc.StatusCode.UNAVAILABLE, "the server answered; the reply is lost")
            return reply

        async def stream(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[bytes]:
            """WatchGame: the first stream is cut off (UNAVAILABLE) after CUT_AFTER messages."""
            first = all(name != method for name, _ in self.seen)
            self.seen.append((method, request))
            sent = 0
            relay: Any = self.upstream.unary_stream(details.method)
            async for message in relay(request):
                if method == self.method and first and sent == CUT_AFTER:
                    await context.abort(grpc.StatusCode.UNAVAILABLE, "the stream is cut off")
                sent += 1
                yield message

        if method == "WatchGame":
            return grpc.unary_stream_rpc_method_handler(stream)
        return grpc.unary_unary_rpc_method_handler(handle)


@pytest_asyncio.fixture(loop_scope="module")
async def losing(address: str) -> AsyncIterator[Any]:
    """``await losing(method)`` → (proxy, its address): a proxy to the server that loses ``method``'s first
    reply."""
    opened: list[tuple[grpc.aio.Server, grpc.aio.Channel]] = []

    async def start(method: str) -> tuple[LosingProxy, str]:
        upstream = grpc.aio.insecure_channel(address)
        proxy = LosingProxy(upstream, method)
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((proxy,))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        opened.append((server, upstream))
        return proxy, f"127.0.0.1:{port}"

    yield start
    for server, upstream in opened:
        await server.stop(None)
        await upstream.close()


async def test_the_client_plays_a_whole_game_watched_live_keeping_every_receipt_checked(address: str) -> None:
    async with Client.connect(address) as client, Client.connect(address, token=ADMIN_TOKEN) as arbiter:
        game = await client.create_game(["ann", "bob", "cy"], target_score=1)
        watched: list[pb.Event] = []

        async def watch() -> None:
            async for event in game.watch():  # as a spectator, live, until GameEnded
                watched.append(event)

        watching = asyncio.create_task(watch())
        played = await play_to_the_end(game)
        await asyncio.wait_for(watching, 60)
        final = played.final
        assert final is not None and final.awaiting == "game-over" and final.winner >= 0
        assert game.version == final.version

        # The stream held every version once, in order, ending with the game's end.
        assert [event.version for event in watched] == list(range(1, final.version + 1))
        assert watched[-1].type == "GameEnded"
        # A spectator is shown no hidden card.
        drawn = [event for event in watched if event.type == "CardDrawn"]
        assert all(event.payload.fields["card"].WhichOneof("kind") == "null_value" for event in drawn)

        # One receipt per reply (the creation's too), each checked when it came, against the published keys.
        kept = client.receipts.of(game.game_id)
        assert len(kept) == sum(played.commands.values()) + 1
        assert [r.seat for r in kept[:2]] == [None, 0]
        assert kept[-1].version == final.version
        assert [client.receipts.check(r).version for r in kept] == [r.version for r in kept]
        keys = await client.trusted_keys()
        assert keys and all(k.name == keys[0].name for k in keys)
        # The service agrees: every receipt matches the stored history (CheckReceipts, the arbiter's).
        verdict = await arbiter.check_receipts(game.game_id, [r.receipt for r in kept])
        assert verdict.valid and {check.verdict for check in verdict.checks} == {"matches"}
        # A receipts file as `uno-audit verify --receipts` reads it.
        assert client.receipts.jsonl(game.game_id).count("\n") == len(kept)


async def test_a_lost_reply_is_resent_with_its_command_id_and_answered_from_the_ledger(
    address: str, losing: Any
) -> None:
    proxy, through = await losing("StartRound")
    retried: list[grpc.StatusCode] = []
    async with Client.connect(through, retry=FAST) as client:
        client.on_retry = lambda attempt, error: retried.append(error.code())
        game = await client.create_game(["ann", "bob"], target_score=1)
        reply = await game.seat(0).start_round()

    # The first reply was lost after the server dealt; the same request again was answered as a duplicate.
    assert retried == [grpc.StatusCode.UNAVAILABLE] and client.retries == 1
    assert reply.duplicate
    sent = [
        pb.StartRoundRequest.FromString(request) for method, request in proxy.seen if method == "StartRound"
    ]
    assert len(sent) == 2 and sent[0].header.command_id == sent[1].header.command_id
    async with Client.connect(address) as direct:
        view = await direct.get_game(game.game_id)
    assert view.version == reply.version and view.round == 1  # dealt once
    assert len(client.receipts.of(game.game_id)) == 2


async def test_a_command_sent_twice_with_one_command_id_is_carried_out_once(address: str) -> None:
    async with Client.connect(address) as client:
        game = await client.create_game(["ann", "bob"])
        first = await game.seat(0).start_round(command_id="deal-1")
        again = await game.seat(0).start_round(command_id="deal-1")
        view = await game.view()
    assert (first.duplicate, again.duplicate) == (False, True)
    assert again.version == first.version == view.version
    assert again.receipt == first.receipt  # the first reply exactly, its receipt too
    # Both kept: a duplicate's receipt restates the first, so the two agree.
    assert [r.version for r in client.receipts.of(game.game_id)][-2:] == [first.version] * 2


async def test_a_watch_cut_off_resumes_after_the_last_event_received(address: str, losing: Any) -> None:
    proxy, through = await losing("WatchGame")
    async with Client.connect(address) as client:
        game = await client.create_game(["ann", "bob"])
        await game.seat(0).start_round()
        await client.create_game(["cy", "di"])  # another game's events are not in the stream
        version = (await game.view()).version
    assert version > CUT_AFTER + 1
    async with Client.connect(through, retry=FAST) as watcher:
        watched: list[int] = []
        async for event in watcher.watch(game.game_id):  # live: stops where the game is now
            watched.append(int(event.version))
            if event.version == version:
                break
    assert watched == list(range(1, version + 1))  # nothing lost, nothing twice
    assert watcher.retries == 1
    resumed = [
        pb.WatchGameRequest.FromString(request) for method, request in proxy.seen if method == "WatchGame"
    ]
    assert [request.after_version for request in resumed] == [0, CUT_AFTER]


def _forge_head(note: str) -> str:
    """``note`` with its checkpoint's head replaced, the signature left as it was."""
    origin, size, head, rest = note.split("\n", 3)
    other = base64.b64encode(bytes(b ^ 0xFF for b in base64.b64decode(head))).decode()
    return "\n".join((origin, size, other, rest))


async def test_forged_receipts_are_refused_by_the_client_and_the_service(address: str) -> None:
    async with Client.connect(address) as client:
        game = await client.create_game(["ann", "bob"])
        reply = await game.seat(0).start_round()
        keys = await client.trusted_keys()
        other = await client.create_game(["cy", "di"])
    genuine = Receipt(game.game_id, 0, int(reply.version), reply.receipt)
    book = ReceiptBook(keys)
    assert book.check(genuine).version == reply.version

    forged = _forge_head(reply.receipt)
    with pytest.raises(ReceiptError, match=r"invalid signature .*forged"):
        book.check(Receipt(game.game_id, 0, genuine.version, forged))
    impostor = Signer.generate(keys[0].name)  # the service's name, another key
    checkpoint = game_checkpoint(keys[0].name, game.game_id, genuine.version, bytes(32))
    with pytest.raises(ReceiptError, match="no signature by a trusted key"):
        book.check(Receipt(game.game_id, 0, genuine.version, checkpoint.sign(impostor)))
    with pytest.raises(ReceiptError, match="not of"):  # a genuine receipt, of another game
        book.check(Receipt(other.game_id, 0, genuine.version, genuine.receipt))
    with pytest.raises(ReceiptError, match="its reply of version"):
        book.check(Receipt(game.game_id, 0, genuine.version + 1, genuine.receipt))
    with pytest.raises(ReceiptError, match="signed note"):
        book.check(Receipt(game.game_id, 0, genuine.version, "not a note"))
    assert len(book) == 0  # checking keeps nothing

    # The service's arbiter refuses the forgery too, and the genuine receipt matches.
    async with Client.connect(address, token=ADMIN_TOKEN) as arbiter:
        verdict = await arbiter.check_receipts(game.game_id, [genuine.receipt, forged])
    assert not verdict.valid
    assert [check.verdict for check in verdict.checks] == ["matches", "refused"]

    # A client pinned to another service's key refuses the first reply's receipt.
    async with Client.connect(address, keys=[Verifier.parse(impostor.verifier.encode())]) as pinned:
        with pytest.raises(ReceiptError, match="no signature by a trusted key"):
            await pinned.create_game(["ann", "bob"])
        assert len(pinned.receipts) == 0


async def test_receipts_signed_by_the_services_code_open_and_a_fork_is_caught() -> None:
    signer = Signer.generate("uno-audit.example")
    keys = [Verifier.parse(signer.verifier.encode())]
    for _ in range(64):  # published keys as the service writes them, a "+" inside the base64 among them
        made = Signer.generate("uno-audit.example").verifier
        assert Verifier.parse(made.encode()) == Verifier(made.name, made.key_id, made.public_key)
    assert keys[0].key_id == signer.key_id
    one = game_checkpoint(signer.name, "g1", 3, bytes(range(32))).sign(signer)
    two = game_checkpoint(signer.name, "g1", 3, bytes(32)).sign(signer)
    stated = open_receipt(one, keys, game_id="g1")
    assert (stated.service, stated.version, stated.head) == ("uno-audit.example", 3, bytes(range(32)))
    with pytest.raises(ReceiptError, match="not of"):
        open_receipt(one, keys, game_id="g1", service="another.example")

    # A signature by a key not trusted here (a witness) neither proves nor refutes.
    witness = Signer.generate("witness.example")
    cosigned = (
        one
        + f"— witness.example {base64.b64encode(witness.key_id.to_bytes(4, 'big') + bytes(64)).decode()}\n"
    )
    assert open_receipt(cosigned, keys, game_id="g1") == stated

    book = ReceiptBook(keys)
    book.keep(Receipt("g1", 0, 3, one))
    book.keep(Receipt("g1", 1, 3, one))  # the same history, restated: fine
    with pytest.raises(ReceiptError, match="two histories"):
        book.keep(Receipt("g1", 1, 3, two))
    assert len(book) == 2
    unchecked = ReceiptBook()
    with pytest.raises(ReceiptError, match="no trusted key"):
        unchecked.keep(Receipt("g1", 0, 3, one))
    assert unchecked.keep(Receipt("g1", 0, 3, two), check=False) is None and len(unchecked) == 1


async def test_a_creation_whose_reply_is_lost_names_the_game_it_made(address: str, losing: Any) -> None:
    _, through = await losing("CreateGame")
    async with Client.connect(through, retry=FAST) as client:
        with pytest.raises(CreationLost) as lost:
            await client.create_game(["ann", "bob"], command_id="made-once")
        assert client.retries == 1
    async with Client.connect(address, token=ADMIN_TOKEN) as arbiter:
        view = await arbiter.get_game(lost.value.game_id)  # made, its tokens gone with the lost reply
    assert (list(view.players), view.version) == (["ann", "bob"], 1)


async def test_the_readmes_example_runs(address: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = (Path(__file__).resolve().parents[2] / "clients" / "python" / "README.md").read_text(
        encoding="utf-8"
    )
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    assert len(blocks) == 1
    guide = (Path(__file__).resolve().parents[2] / "docs" / "clients.md").read_text(encoding="utf-8")
    assert f"```python\n{blocks[0]}```" in guide, "docs/clients.md shows another client example"
    example: dict[str, Any] = {"__name__": "example"}
    exec(compile(blocks[0], "clients/python/README.md", "exec"), example)
    await example["main"](address)
    game_line, receipts_line = capsys.readouterr().out.splitlines()[-2:]
    _, version, *types = game_line.split(maxsplit=2)
    assert int(version) > 2 and ("CardDrawn" in types[0] or "ColourChosen" in types[0]), game_line
    assert receipts_line.startswith("3 receipts checked with ")
