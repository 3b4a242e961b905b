"""Complete bot games of every rule set over a real channel: nothing refused, games end, the log folds to
what the server reports."""

from __future__ import annotations

import asyncio

import pytest

from service.api.messages import VARIANTS
from service.client.bots import run_bots
from service.rules.options import Variant
from service.store import EventStore
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import ADMIN, assert_chain, assert_view_matches, folded

pytestmark = pytest.mark.timeout(90)


async def test_bots_finish_games_of_every_rule_set_and_the_log_folds_to_the_view(
    address: str, stub: pb_grpc.GameServiceStub, store: EventStore
) -> None:
    # The four rule sets at once (one game each, to one point): the wall time is the longest game's.
    variants = list(Variant)
    summaries = await asyncio.gather(
        *(
            run_bots(address, games=1, variant=v, players=3, concurrency=1, seed=7, target_score=1)
            for v in variants
        )
    )
    for variant, summary in zip(variants, summaries, strict=True):
        assert summary.rejected == 0, variant
        assert summary.games == 1, variant
        assert summary.rounds >= 1, variant
        assert summary.commands > 0, variant
        # A healthy server: no call needed a second attempt, no reply was lost.
        assert (summary.retries, summary.duplicates, summary.abandoned) == (0, 0, 0), variant
        # The bots follow the replies: a seat reads its view with GetGame only when cards it may not see
        # came into its hand (a deal, a penalty), not before every move (0.86 reads per command once).
        # Each seat's read of each deal is allowed besides: a one-point game may be 20 commands long.
        bound = 0.15 if variant is Variant.CLASSIC else 0.25
        deals = 3 * summary.rounds
        assert 0 < summary.view_reads <= deals + bound * summary.commands, (variant, summary.to_json())

    listed: pb.ListGamesReply = await stub.ListGames(pb.ListGamesRequest())
    assert sorted(g.variant for g in listed.games) == sorted(VARIANTS[v] for v in variants)
    for game in listed.games:
        view: pb.GameView = await stub.GetGame(pb.GetGameRequest(game_id=game.game_id), metadata=ADMIN)
        name = pb.Variant.Name(game.variant)
        assert view.awaiting == "game-over", name
        assert 0 <= view.winner < 3, name
        assert view.scores[view.winner] >= 1, name
        assert view.version == game.version, name

        state, events = await folded(store, game.game_id)
        assert_chain(events)
        assert events[-1].type == "GameEnded", name
        assert_view_matches(view, state, len(events))
        assert state.winner == view.winner
        assert list(state.scores) == list(view.scores) == events[-1].payload["scores"], name
        # The seed is revealed at the end and matches the pledge made in the first event.
        assert events[-1].payload["seed"] == (await store.seed(game.game_id) or b"").hex(), name
        assert events[0].payload["seed_sha256"] == view.seed_sha256, name
