"""The gRPC bots (``uno-audit bots``) play games with every house rule a rule set takes: nothing refused,
the games end, the house rules' events happen, the log folds to the server's view, and the game verifies
valid (rules, hash chain, seed, and the read models the server's projector keeps)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import pytest
from google.protobuf import json_format

from service.api.messages import VARIANTS
from service.cli.main import main
from service.client.bots import run_bots
from service.rules.options import HOUSE_RULES, UNSUPPORTED, Variant
from service.store import EventStore
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc as apb_grpc
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import ADMIN, assert_chain, assert_view_matches, folded

pytestmark = pytest.mark.timeout(240)

GAMES = 3


def every_house_rule(variant: Variant) -> dict[str, Any]:
    """Every house rule ``variant`` takes, on (stacking: any)."""
    return {
        name: ("any" if name == "stacking" else True)
        for name in HOUSE_RULES
        if name not in UNSUPPORTED[variant]
    }


@pytest.mark.parametrize("variant", [Variant.CLASSIC, Variant.ATTACK], ids=["classic", "attack"])
async def test_bots_finish_and_verify_games_with_every_house_rule(
    variant: Variant, address: str, channel: Any, store: EventStore
) -> None:
    options = every_house_rule(variant)
    summary = await run_bots(
        address,
        games=GAMES,
        variant=variant,
        players=4,
        concurrency=GAMES,
        seed=11,
        target_score=100,
        options=options,
    )
    assert summary.rejected == 0 and summary.games == GAMES, summary
    assert (summary.retries, summary.duplicates, summary.abandoned) == (0, 0, 0)
    # Swaps, rotations and jump-ins move cards between hands the bots follow from the events (every
    # penalty is accepted by its victim, whose own reply shows the cards): GetGame is rarely needed.
    assert summary.view_reads <= 0.1 * summary.commands, summary.to_json()

    stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
    audit = apb_grpc.AuditServiceStub(channel)  # type: ignore[no-untyped-call]
    listed: pb.ListGamesReply = await stub.ListGames(pb.ListGamesRequest())
    assert len(listed.games) == GAMES and {g.variant for g in listed.games} == {VARIANTS[variant]}
    kinds: Counter[str] = Counter()
    for game in listed.games:
        view: pb.GameView = await stub.GetGame(pb.GetGameRequest(game_id=game.game_id), metadata=ADMIN)
        assert view.awaiting == "game-over" and 0 <= view.winner < 4
        assert json_format.MessageToDict(view.house_rules) == options
        state, events = await folded(store, game.game_id)
        assert_chain(events)
        assert_view_matches(view, state, len(events))
        kinds.update(e.type for e in events)
        # The read models reach the game's end, then the verifier checks them with everything else.
        await stub.GetScores(pb.GetScoresRequest(game_id=game.game_id, min_version=view.version))
        verified: apb.VerifyGameReply = await audit.VerifyGame(
            apb.VerifyGameRequest(game_id=game.game_id), metadata=ADMIN
        )
        report = json_format.MessageToDict(verified.report)
        assert verified.valid and verified.rules_valid and verified.chain_valid, json.dumps(report)[:3000]
    # The bots used the house rules, not just games that allowed them.
    assert kinds["JumpedIn"] > 0, kinds
    assert kinds["HandsTraded"] + kinds["HandsRotated"] > 0, kinds
    assert kinds["StackAccepted"] + kinds["Wd4Accepted"] > 0, kinds
    if options.get("wd4_any_time"):
        assert kinds["Wd4Challenged"] == 0, kinds  # a challenge would be refused: the bots never make one


async def test_the_bots_command_creates_its_games_with_the_options_given(
    address: str, channel: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "bots",
        "--server",
        address,
        "--variant",
        "sonic",
        "--players",
        "3",
        "--games",
        "1",
        "--seed",
        "3",
    ]
    args += ["--target-score", "1", "--option", "stacking=draw-two", "--option", "jump_in=true"]
    assert await asyncio.to_thread(main, [*args, "--option", "seven_o=true"]) == 0
    # The summary is the command's last line (the in-process server's log lines come before it).
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (summary["games"], summary["rejected"]) == (1, 0)
    stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
    (game,) = (await stub.ListGames(pb.ListGamesRequest())).games
    view: pb.GameView = await stub.GetGame(pb.GetGameRequest(game_id=game.game_id))
    assert json_format.MessageToDict(view.house_rules) == {
        "stacking": "draw-two",
        "jump_in": True,
        "seven_o": True,
    }

    # A bad option is the command line's error (exit 2, setup.options), and creates nothing.
    attack = [*args[:-4], "--variant", "attack"]
    for bad in ("draw_to_match=true", "stacking=sometimes", "seven_o=1"):
        assert await asyncio.to_thread(main, [*attack, "--option", bad]) == 2, bad
        assert capsys.readouterr().err.startswith("uno-audit bots: setup.options: option ")
    for malformed in ("jump_in", "=1"):  # not NAME=VALUE: argparse's usage error
        with pytest.raises(SystemExit) as exited:
            await asyncio.to_thread(main, [*attack, "--option", malformed])
        assert exited.value.code == 2 and "is not NAME=VALUE" in capsys.readouterr().err
    assert len((await stub.ListGames(pb.ListGamesRequest())).games) == 1
