"""The view's UNO windows: every open one (``exposed_seats``), the first also in ``exposed``."""

from __future__ import annotations

from service.api.messages import game_view
from service.domain.auth import ADMIN, SPECTATOR, Caller
from service.rules import fold
from tests.scenarios.test_corners import both_down_to_one, follow_table


def test_a_view_lists_every_open_uno_window_to_every_caller() -> None:
    state = fold(both_down_to_one())
    for caller in (ADMIN, SPECTATOR, Caller(seat=0), Caller(seat=1)):
        view = game_view("g", state, 1, caller)
        assert list(view.exposed_seats) == [0, 1]
        assert view.exposed == 0
        # Who holds one card is public (hand sizes are); which card is not.
        assert list(view.hand_sizes) == [1, 1]
        seen = {0, 1} if caller.admin else set() if caller.seat is None else {caller.seat}
        assert {hand.seat for hand in view.hands} == seen


def test_a_view_with_no_open_window_says_minus_one() -> None:
    view = game_view("g", fold(follow_table()), 1, SPECTATOR)
    assert (view.exposed, list(view.exposed_seats)) == (-1, [])
