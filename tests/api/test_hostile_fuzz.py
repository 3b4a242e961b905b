"""Hostile clients over a real channel: every RPC of both services, each request built by hypothesis from
its message descriptor (:class:`bench.hostile.HostileClient`: edge and random values in every field, valid
ids of real games, no token, garbage tokens, malformed ``authorization`` headers, seat tokens of any game,
the admin token), against games in every state. Whatever is sent:

- the answer is never UNKNOWN or INTERNAL (every refusal has its own code; INTERNAL is a bug) nor
  DEADLINE_EXCEEDED on a 20 s deadline;
- a refused call appends nothing (the ledger tables hold as many rows after it as before);
- the server still serves afterwards (health, every game).

ImportRecord gets records mutated as ``tests/test_record_fuzz.py`` mutates them: refused without a trace,
or stored, exported byte for byte and verified. This is the quick version for CI; ``bench/hostile.py``
runs the same client for minutes and prints its figures.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.hostile import BUGS, DEEPEST_STRUCT, RPCS, Call, HostileClient, Rpc
from service.api.gen.uno.audit.v1 import audit_pb2 as apb
from service.api.gen.uno.audit.v1 import audit_pb2_grpc as apb_grpc
from service.api.gen.uno.audit.v1 import game_pb2 as pb
from service.api.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc
from tests.test_record_fuzz import SOURCES, record_texts

from .support import ADMIN, ADMIN_TOKEN, count_rows, fails_with, new_id

pytestmark = pytest.mark.timeout(300)

#: Requests per RPC of the fuzz in CI: fewer for those that take long by design (a read-model wait of up
#: to 2 s, a stream read for 0.2 s, a verification or an export); about 25 s on a loaded 2-core machine.
REQUESTS_PER_RPC = 24
SLOW_RPCS = {"GetScores": 8, "GetHand": 8, "VerifyGame": 8, "WatchGame": 8, "ExportGame": 8}
QUICK_RECORDS = 60
CODE = grpc.StatusCode


def _quick(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


def _on(loop: asyncio.AbstractEventLoop) -> Callable[[Coroutine[Any, Any, Any]], Any]:
    """Run a coroutine on ``loop`` (where the server and the channel live) from hypothesis' thread."""
    return lambda work: asyncio.run_coroutine_threadsafe(work, loop).result()


async def test_every_rpc_answers_hostile_requests_with_its_own_codes(
    channel: grpc.aio.Channel, database_url: str
) -> None:
    client = await HostileClient.start(channel, database_url, ADMIN_TOKEN)
    run = _on(asyncio.get_running_loop())
    codes: Counter[CODE] = Counter()

    def fuzz(rpc: Rpc) -> None:
        @_quick(SLOW_RPCS.get(rpc.name, REQUESTS_PER_RPC))
        @given(client.calls(rpc))
        def hostile(call: Call) -> None:
            outcome = run(client.send(call))
            codes[outcome.code] += 1
            assert not outcome.bug, outcome.describe()
            assert not outcome.refused_append, outcome.describe()

        hostile()

    try:
        for rpc in RPCS:
            await asyncio.to_thread(fuzz, rpc)
        await client.serving()
    finally:
        await client.close()
    # The fuzz is worth something only if it got past validation: commands accepted and refused by the
    # rules, besides the malformed and the unauthenticated ones.
    for code in (CODE.OK, CODE.FAILED_PRECONDITION, CODE.INVALID_ARGUMENT, CODE.UNAUTHENTICATED):
        assert codes[code] > 0, codes


async def test_import_record_refuses_or_keeps_any_mutated_record(
    channel: grpc.aio.Channel, database_url: str
) -> None:
    audit = apb_grpc.AuditServiceStub(channel)  # type: ignore[no-untyped-call]
    run = _on(asyncio.get_running_loop())
    codes: Counter[CODE] = Counter()

    async def imported(text: str) -> None:
        before = await count_rows(database_url)
        request = apb.ImportRecordRequest(command_id=new_id(), record=text)
        try:
            reply = await audit.ImportRecord(request, metadata=ADMIN, timeout=20)
        except grpc.aio.AioRpcError as error:
            codes[error.code()] += 1
            assert error.code() not in BUGS, f"{error.code().name}: {error.details()}\n{text[:3000]!r}"
            assert await count_rows(database_url) == before, f"a refused import wrote: {text[:3000]!r}"
            return
        codes[CODE.OK] += 1
        exported = await audit.ExportGame(apb.ExportGameRequest(game_id=reply.game_id), metadata=ADMIN)
        assert exported.record == text
        verified = await audit.VerifyGame(
            apb.VerifyGameRequest(game_id=reply.game_id, check_projections=False), metadata=ADMIN
        )
        assert verified.chain_valid

    @_quick(QUICK_RECORDS)
    @given(st.one_of(st.sampled_from(SOURCES), record_texts()))
    def hostile(text: str) -> None:
        run(imported(text))

    await asyncio.to_thread(hostile)
    assert codes[CODE.OK] > 0 and codes[CODE.INVALID_ARGUMENT] > 0, codes


# --- what the fuzz found, pinned -------------------------------------------------------------------------


async def test_a_record_number_too_long_to_read_is_invalid_argument(
    channel: grpc.aio.Channel, database_url: str
) -> None:
    """Found by the record fuzz: a whole number of more than 4,300 digits made ``int()`` raise a bare
    ValueError inside the JSON decoder, which ImportRecord answered INTERNAL."""
    audit = apb_grpc.AuditServiceStub(channel)  # type: ignore[no-untyped-call]
    record = (
        '{"record": "uno-game-record/1", "variant": "classic", "players": ["a", "b"], "options": {}}\n'
        '{"round": ' + "1" * 4301 + ', "dealer": "a"}\n'
    )
    before = await count_rows(database_url)
    error = await fails_with(
        audit.ImportRecord(apb.ImportRecordRequest(command_id=new_id(), record=record), metadata=ADMIN),
        CODE.INVALID_ARGUMENT,
        field="record",
    )
    assert "line 2: invalid JSON: a number of more than 4300 digits" in (error.details() or "")
    assert await count_rows(database_url) == before


def _nested_options(depth: int) -> pb.CreateGameRequest:
    """Options whose value is a list in a list ... ``depth`` deep, built in place (protobuf copies no
    message nested past 100 levels)."""
    request = pb.CreateGameRequest(command_id=new_id(), variant=pb.CLASSIC, players=["a", "b"])
    value = request.options.fields["target_score"]
    for _ in range(depth):
        value = value.list_value.values.add()
    value.string_value = "x"
    return request


async def test_options_nested_deep_are_invalid_argument(stub: pb_grpc.GameServiceStub) -> None:
    await fails_with(stub.CreateGame(_nested_options(DEEPEST_STRUCT)), CODE.INVALID_ARGUMENT, field="options")


async def test_a_request_protobuf_cannot_parse_is_invalid_argument(channel: grpc.aio.Channel) -> None:
    """Found by the fuzz: options nested past protobuf's 100 levels failed to parse before any servicer
    ran, and gRPC answered UNKNOWN ("Unexpected DecodeError"). Bytes that are no message at all, sent to
    a unary RPC and to the stream, went the same way."""
    await fails_with(
        pb_grpc.GameServiceStub(channel).CreateGame(_nested_options(60)),  # type: ignore[no-untyped-call]
        CODE.INVALID_ARGUMENT,
        field="request",
    )

    def garbage(_: object) -> bytes:
        return b"\xff\xff\xff\xff"

    for path in ("/uno.audit.v1.GameService/GetGame", "/uno.audit.v1.AuditService/ListDisputes"):
        await fails_with(
            channel.unary_unary(path, request_serializer=garbage)(b"", timeout=20),
            CODE.INVALID_ARGUMENT,
            field="request",
        )
    stream: grpc.aio.UnaryStreamMultiCallable[Any, Any] = channel.unary_stream(
        "/uno.audit.v1.GameService/WatchGame", request_serializer=garbage
    )
    await fails_with(_drained(stream(b"", timeout=20)), CODE.INVALID_ARGUMENT, field="request")


async def _drained(stream: Any) -> None:
    async for _ in stream:
        pass
