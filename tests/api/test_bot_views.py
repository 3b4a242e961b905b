"""The bots follow the replies instead of reading a view before every move: the view a seat decides on,
made from the latest reply and the hand the bots folded from the events, is the very view GetGame would
give that seat — under every rule set, and under the house rules that move cards between hands."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from service.client.bots import BotTable, LoadSummary, RetryPolicy
from service.rules.options import Variant
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import deal_from
from .test_house_bot_games import every_house_rule

pytestmark = pytest.mark.timeout(180)


class CheckedTable(BotTable):
    """Bots whose every view to decide on is checked against the seat's view read with GetGame (directly
    on the stub: not counted as the bots' read, and not followed)."""

    def __init__(self, stub: pb_grpc.GameServiceStub, seed: int, options: dict[str, Any]) -> None:
        super().__init__(stub, random.Random(seed), LoadSummary(), RetryPolicy(), options=options)
        self.decided = 0

    async def view_for(self, seat: int) -> pb.GameView:
        view = await super().view_for(seat)
        request = pb.GetGameRequest(game_id=self.game_id)
        truth: pb.GameView = await self.stub.GetGame(
            request, metadata=(("authorization", f"Bearer {self.tokens[seat]}"),)
        )
        assert view == truth, (seat, view, truth)
        self.decided += 1
        return view


GAMES: list[tuple[Variant, int, dict[str, Any]]] = [(variant, 3, {}) for variant in Variant] + [
    (variant, 4, every_house_rule(variant)) for variant in (Variant.CLASSIC, Variant.ATTACK)
]


async def test_the_view_a_seat_decides_on_is_the_one_the_server_gives_it(
    stub: pb_grpc.GameServiceStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    deal_from(monkeypatch, 6)  # the same rounds each run
    tables = [CheckedTable(stub, 5, options) for _, _, options in GAMES]
    await asyncio.gather(
        *(table.play(variant, players, 1) for table, (variant, players, _) in zip(tables, GAMES, strict=True))
    )
    for table, (variant, _, options) in zip(tables, GAMES, strict=True):
        summary, name = table.summary, (variant.value, bool(options))
        assert table.latest.awaiting == "game-over", name
        assert summary.rejected == 0, name
        # Most views were made from the replies, not read: a read is the exception.
        assert table.decided > 0 and summary.view_reads <= 0.2 * table.decided, (name, table.decided, summary)
        assert summary.view_reads <= 0.25 * summary.commands, (name, summary)
