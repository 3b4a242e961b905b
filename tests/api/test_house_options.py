"""CreateGame with the house rules (docs/RULES.md §9) as options: every house-rule option with garbage
values of every kind, every house rule a rule set does not take, each refused INVALID_ARGUMENT with
``ErrorInfo.reason`` ``setup.options`` and one ``google.rpc.BadRequest`` field violation naming
``options.<name>``, nothing appended; and what is accepted shows in the view's ``house_rules``."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.protobuf import json_format, struct_pb2

from service.api.messages import VARIANTS
from service.rules.options import HOUSE_RULES, UNSUPPORTED, Variant
from service.store import EventStore
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import bad_request, count_rows, error_info, fails_with, folded, new_id

pytestmark = pytest.mark.timeout(120)

INVALID = grpc.StatusCode.INVALID_ARGUMENT
OPTIONS = "setup.options"
BOOLEANS = ("jump_in", "seven_o", "draw_to_match", "force_play", "wd4_any_time")
STACKING = ("off", "draw-two", "draw-four", "any")
HUGE = "x" * 200_000

#: Values no house rule takes: wrong types, near misses, huge strings, nested lists and objects.
GARBAGE: tuple[Any, ...] = (
    None,
    0,
    1,
    -1,
    1.5,
    1e300,
    "",
    "true",
    "false",
    "on",
    "yes",
    "True",
    "draw_two",
    "ANY",
    "any ",
    " any",
    "draw-two\x00",
    HUGE,
    [],
    [True],
    ["any"],
    [[["any"]]],
    {},
    {"value": True},
    {"stacking": "any"},
    {"a": {"b": [1, "any", None]}},  # as deep as options nest (4 levels, counting the options)
)
#: Values the boolean house rules refuse that ``stacking`` takes (and the other way round).
STACKING_FOR_BOOLEANS = STACKING
BOOLEANS_FOR_STACKING = (True, False)


def _create(variant: Variant, options: dict[str, Any]) -> pb.CreateGameRequest:
    request = pb.CreateGameRequest(
        command_id=new_id(), variant=VARIANTS[variant], players=["ann", "bob", "cy"]
    )
    request.options.update(options)
    return request


async def _refused(
    stub: pb_grpc.GameServiceStub,
    database_url: str,
    variant: Variant,
    options: dict[str, Any],
    field: str,
    reason: str = OPTIONS,
) -> None:
    before = await count_rows(database_url)
    try:
        error = await fails_with(
            stub.CreateGame(_create(variant, options)), INVALID, field=field, reason=reason
        )
    except AssertionError as failed:
        raise AssertionError(f"{variant.value} {str(options)[:200]}: {failed}") from None
    # The message names the option and stays short whatever the value's size.
    details = error.details() or ""
    assert details.startswith(f"{field}: "), details
    assert len(details) < 1000, details[:300]
    assert error_info(error).domain == "uno-audit"
    violations = bad_request(error).field_violations
    assert [v.field for v in violations] == [field] and violations[0].description == details
    assert await count_rows(database_url) == before, f"{options} wrote something"


async def test_every_house_rule_refuses_every_garbage_value(
    stub: pb_grpc.GameServiceStub, database_url: str
) -> None:
    for name in HOUSE_RULES:
        wrong = BOOLEANS_FOR_STACKING if name == "stacking" else STACKING_FOR_BOOLEANS
        for value in (*GARBAGE, *wrong):
            await _refused(stub, database_url, Variant.CLASSIC, {name: value}, f"options.{name}")
    assert (await count_rows(database_url))["games"] == 0


async def test_a_bad_house_rule_is_named_beside_good_options(
    stub: pb_grpc.GameServiceStub, database_url: str
) -> None:
    good = {"stacking": "any", "jump_in": True, "seven_o": True, "target_score": 50}
    for name in BOOLEANS:
        await _refused(stub, database_url, Variant.CLASSIC, {**good, name: "maybe"}, f"options.{name}")
    await _refused(stub, database_url, Variant.SONIC, {**good, "stacking": "all"}, "options.stacking")
    # Unknown options near the house rules' names are unknown options, named as such.
    for name in ("jump-in", "sevenO", "stack", "house_stacking", "wd4AnyTime", "Stacking"):
        await _refused(stub, database_url, Variant.CLASSIC, {name: True}, f"options.{name}")
    assert (await count_rows(database_url))["games"] == 0


@pytest.mark.parametrize("variant", list(Variant), ids=[v.value for v in Variant])
async def test_every_house_rule_a_rule_set_does_not_take_is_refused_even_as_off(
    variant: Variant, stub: pb_grpc.GameServiceStub, database_url: str
) -> None:
    unsupported = sorted(UNSUPPORTED[variant])
    if variant is Variant.ATTACK:
        assert unsupported == ["draw_to_match", "force_play", "wd4_any_time"]
    for name in unsupported:
        for value in (True, False):
            await _refused(stub, database_url, variant, {name: value}, f"options.{name}")
            # Beside house rules it does take, too.
            await _refused(
                stub,
                database_url,
                variant,
                {"stacking": "any", "jump_in": True, name: value},
                f"options.{name}",
            )
        # A garbage value for an unsupported rule is refused all the same, naming the same option.
        await _refused(stub, database_url, variant, {name: [[HUGE]]}, f"options.{name}")
    assert (await count_rows(database_url))["games"] == 0


@pytest.mark.parametrize("variant", list(Variant), ids=[v.value for v in Variant])
async def test_the_house_rules_a_rule_set_takes_show_in_the_view(
    variant: Variant, stub: pb_grpc.GameServiceStub, store: EventStore
) -> None:
    taken = [name for name in HOUSE_RULES if name not in UNSUPPORTED[variant]]
    on: dict[str, Any] = {name: ("draw-four" if name == "stacking" else True) for name in taken}
    reply: pb.CreateGameReply = await stub.CreateGame(_create(variant, on))
    assert json_format.MessageToDict(reply.view.house_rules) == on
    assert reply.view.pending_draw == 0
    state, events = await folded(store, reply.game_id)
    assert state.options.house_rules() == on
    assert {k: v for k, v in events[0].payload["options"].items() if k in HOUSE_RULES} == on

    # Every value each takes, alone; a house rule given as off is left out of the view.
    for name in taken:
        for value in STACKING if name == "stacking" else (True, False):
            made: pb.CreateGameReply = await stub.CreateGame(_create(variant, {name: value}))
            shown = json_format.MessageToDict(made.view.house_rules)
            assert shown == ({} if value in ("off", False) else {name: value}), (name, value)

    # A game by the book: an empty Struct, and GetGame agrees with CreateGame's view.
    plain: pb.CreateGameReply = await stub.CreateGame(_create(variant, {}))
    assert plain.view.house_rules == struct_pb2.Struct()
    viewed: pb.GameView = await stub.GetGame(pb.GetGameRequest(game_id=reply.game_id))
    assert json_format.MessageToDict(viewed.house_rules) == on


async def test_the_target_score_shorthand_is_named_as_the_option(
    stub: pb_grpc.GameServiceStub, database_url: str
) -> None:
    request = _create(Variant.CLASSIC, {"jump_in": True})
    request.target_score = 0
    before = await count_rows(database_url)
    await fails_with(stub.CreateGame(request), INVALID, field="options.target_score", reason=OPTIONS)
    assert await count_rows(database_url) == before
