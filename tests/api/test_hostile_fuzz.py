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
import random
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.hostile import BUGS, DEEPEST_STRUCT, RPCS, Call, HostileClient, Rpc
from service.api.messages import VARIANTS
from service.client.bots import BotTable, LoadSummary, RetryPolicy
from service.rules.cards import DECKS, Card, Colour
from service.rules.legality import playable_cards
from service.rules.options import HOUSE_RULES, OptionError, Variant, make_options
from tests.test_record_fuzz import SOURCES, record_texts
from tests.tiers import examples
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc as apb_grpc
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import ADMIN, ADMIN_TOKEN, auth, count_rows, deal_from, error_info, fails_with, new_id

pytestmark = pytest.mark.timeout(300)

#: Requests per RPC of the fuzz in CI: fewer for those that take long by design (a read-model wait of up
#: to 2 s, a stream read for 0.2 s, a verification or an export); about 25 s on a loaded 2-core machine.
REQUESTS_PER_RPC = 24
SLOW_RPCS = {"GetScores": 8, "GetHand": 8, "VerifyGame": 8, "WatchGame": 8, "ExportGame": 8}
QUICK_RECORDS = 60
CODE = grpc.StatusCode


def _quick(count: int) -> settings:
    return settings(
        max_examples=examples(count),
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


# --- the house rules: CreateGame's options and PlayRequest.jump_in ---------------------------------------

HOUSE_VALUES = st.one_of(
    st.sampled_from([True, False, "off", "draw-two", "draw-four", "any", "ANY", "", None, 0, 1, 1.5, [], {}]),
    st.text(max_size=40),
    st.sampled_from(["y" * 70_000]),
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
        max_leaves=6,
    ),
)


def _plain(options: Any) -> dict[str, Any]:
    """A Struct's values as JSON reads them, whole numbers as ints (as the service reads its options)."""

    def plain(value: Any) -> Any:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, list):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    return {k: plain(v) for k, v in json_format.MessageToDict(options).items()}


#: A caller of the house-rule play fuzz: the seat the game waits for, whichever it is then.
TURN: tuple[Any, int | None] = (("authorization", "turn"), None)
HOUSE_KEYS = st.sampled_from([*HOUSE_RULES, "target_score", "dealer_selection", "jump-in", "stack", "sevenO"])


async def test_create_game_answers_hostile_house_rule_options_with_setup_options(
    stub: pb_grpc.GameServiceStub, database_url: str
) -> None:
    """Options made of the house rules' names (and near misses) with any values, for every rule set: a
    game is created with exactly the house rules the rules accept (the view's house_rules says which), or
    the refusal is INVALID_ARGUMENT naming ``options.<name>`` with reason setup.options (``options``,
    reason INVALID_ARGUMENT, for the bounds on the Struct itself), and nothing is appended."""
    run = _on(asyncio.get_running_loop())
    codes: Counter[str] = Counter()

    async def create(variant: Variant, given: dict[str, Any]) -> None:
        request = pb.CreateGameRequest(
            command_id=new_id(), variant=VARIANTS[variant], players=["ann", "bob", "cy"]
        )
        request.options.update(given)
        before = await count_rows(database_url)
        try:
            reply = await stub.CreateGame(request, timeout=20)
        except grpc.aio.AioRpcError as error:
            assert error.code() is CODE.INVALID_ARGUMENT, f"{error.code().name}: {error.details()!r:.300}"
            info = error_info(error)
            field = info.metadata["field"]
            if field == "options":
                assert info.reason == "INVALID_ARGUMENT", error.details()
            else:
                assert info.reason == "setup.options", error.details()
            if field != "options":  # the option named is one the rules refuse, even on its own
                name = field.removeprefix("options.")
                with pytest.raises(OptionError) as refused:
                    make_options(variant, {name: _plain(request.options)[name]})
                assert refused.value.option == name
            assert await count_rows(database_url) == before, f"a refusal wrote: {given!r:.300}"
            codes[info.reason] += 1
            return
        expected = make_options(variant, _plain(request.options)).house_rules()
        assert json_format.MessageToDict(reply.view.house_rules) == expected
        codes["OK"] += 1

    @_quick(REQUESTS_PER_RPC * 4)
    @given(st.sampled_from(list(Variant)), st.dictionaries(HOUSE_KEYS, HOUSE_VALUES, max_size=5))
    def hostile(variant: Variant, given: dict[str, Any]) -> None:
        run(create(variant, given))

    await asyncio.to_thread(hostile)
    assert codes["OK"] > 0 and codes["setup.options"] > 0, codes


async def test_jump_ins_and_plays_from_anyone_in_a_house_rule_game_are_judged_or_refused(
    stub: pb_grpc.GameServiceStub, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A classic game with every house rule, played part way by the bots, takes hostile plays (any card,
    jump_in or not, any target, colour and UNO call, from any seat, the admin or nobody): never a status
    that means a bug, a refusal appends nothing, an accepted play appends exactly its events."""
    deal_from(monkeypatch, 6)  # the same deal each run: the fast tier's few plays must meet an accepted one
    options = {"stacking": "any", "jump_in": True, "seven_o": True, "draw_to_match": True}
    options |= {"force_play": True, "wd4_any_time": True}
    bots = BotTable(stub, random.Random(5), LoadSummary(), RetryPolicy(), options=options)
    await bots.create(Variant.CLASSIC, 4, None)
    await stub.StartRound(pb.StartRoundRequest(header=bots.header()), metadata=auth(bots.tokens[0]))
    run = _on(asyncio.get_running_loop())
    codes: Counter[CODE] = Counter()
    tokens = sorted({c.token for c in DECKS["classic"]})
    # Who sends it: a seat (by its token), the admin for a seat (or no seat), nobody, a stranger, or
    # (TURN) the seat the game waits for.
    callers: list[tuple[Any, int | None]] = [(auth(bots.tokens[s]), None) for s in range(4)]
    callers += [(ADMIN, s) for s in (0, 3, 4, -1)] + [(None, None), (auth("garbage"), None), TURN]

    async def play(request: pb.PlayRequest, caller: tuple[Any, int | None]) -> None:
        admin: pb.GameView = await stub.GetGame(pb.GetGameRequest(game_id=bots.game_id), metadata=ADMIN)
        careful = caller is TURN and request.card.startswith("#")
        if caller is TURN:
            caller = (auth(bots.tokens[admin.turn]), None)
        metadata, as_seat = caller
        if as_seat is not None:
            request.header.as_seat = as_seat
        if request.card.startswith("#"):  # the n-th card the acting seat may play, else holds
            seat = (
                as_seat
                if as_seat is not None
                else next((s for s in range(4) if auth(bots.tokens[s]) == metadata), 0)
            )
            hand = [Card.parse(c) for c in admin.hands[seat if 0 <= seat < 4 else 0].cards]
            if admin.top and admin.awaiting == "play":
                colour = Colour(admin.colour) if admin.colour else None
                hand = playable_cards(hand, Card.parse(admin.top), colour) or hand
            card = hand[int(request.card[1:]) % len(hand)] if hand else Card.parse("R1")
            request.card = card.token
            if careful:  # a play as the rules want it, so that plays are accepted too
                request.colour = "G" if card.is_wild else ""
                request.uno = request.jump_in = False
                request.ClearField("target")
                if card.number == 7 and len(hand) > 1:
                    request.target = (admin.turn + 1) % 4
        before = await count_rows(database_url)
        try:
            reply = await stub.Play(request, metadata=metadata, timeout=20)
        except grpc.aio.AioRpcError as error:
            codes[error.code()] += 1
            assert error.code() not in BUGS, f"{error.code().name}: {error.details()!r:.300}"
            assert await count_rows(database_url) == before, f"a refusal wrote: {request}"
            return
        codes[CODE.OK] += 1
        assert [e.version for e in reply.events] == list(
            range(reply.version - len(reply.events) + 1, reply.version + 1)
        )
        if request.jump_in:
            assert [e.type for e in reply.events][:1] == ["JumpedIn"]

    requests = st.builds(
        lambda card, jump, target, colour, uno: pb.PlayRequest(
            header=bots.header(), card=card, jump_in=jump, colour=colour, uno=uno, **target
        ),
        st.one_of(st.sampled_from([*tokens, "", "R" * 17]), st.integers(0, 30).map(lambda i: f"#{i}")),
        st.booleans(),
        st.sampled_from([{}, {"target": 0}, {"target": 1}, {"target": 3}, {"target": 4}, {"target": -1}]),
        st.sampled_from(["", "R", "G", "x"]),
        st.booleans(),
    )

    async def move_on() -> None:
        """The seat on turn acts as the bots would: hostile plays then meet other positions."""
        view = await bots.view_of(0)
        if view.awaiting == "round-start":
            await bots.send("StartRound", 0, pb.StartRoundRequest(header=bots.header()))
        elif view.awaiting != "game-over":
            await bots.act(await bots.view_of(view.turn), view.turn, Variant.CLASSIC, 4)

    tries = 0

    @_quick(REQUESTS_PER_RPC * 6)
    @given(requests, st.sampled_from(callers))
    def hostile(request: pb.PlayRequest, caller: tuple[Any, int | None]) -> None:
        nonlocal tries
        tries += 1
        if tries % 4 == 0:
            run(move_on())
        run(play(request, caller))

    await asyncio.to_thread(hostile)
    assert codes[CODE.OK] > 0, codes
    assert codes[CODE.FAILED_PRECONDITION] > 0 and codes[CODE.INVALID_ARGUMENT] > 0, codes
