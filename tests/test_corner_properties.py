"""Properties of the settled corners, swept over whole bot games of every rule set.

Bots (``service.play.simulate``) play complete games with 2 to 10 players; every accepted command is
checked against the digest's statement of the rule, written here from the events alone:

* ``attack.follow-up``: where the turn goes after a follow-up card (the pointed player, the seat after
  it, or after a follow-up Reverse the seat after the follow-up's player in the new direction), and
  never back to the follow-up's player;
* "all others" effects (All Hit, Victory Lap, Lightning, a customizable that makes all others press):
  every other player in turn order, starting with the next player in the current direction;
* ``uno.catch``: a player's UNO window opens when a play leaves them one card without a call (their own
  play, counting a trade, or another's Trade Hands) and closes at the first turn action of another
  player — never at their own further actions (an extra turn, a follow-up, the pass that ends it).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.play.bots import Habits
from service.play.simulate import SimulatedGame, play_game
from service.rules.cards import Face
from service.rules.commands import Play
from service.rules.events import (
    Awaiting,
    CardDrawn,
    CardPlayed,
    CardsTaken,
    Event,
    HandsTraded,
    LauncherPressed,
    Passed,
    Prompted,
    UnoCalled,
    UnoCaught,
    Wd4Accepted,
    Wd4Challenged,
)
from service.rules.legality import wd4_matching
from service.rules.options import CustomAction, Variant, make_options
from service.rules.state import State, evolve, new_state
from service.rules.violations import Rule

SWEEP = settings(
    max_examples=150,  # 3 s in all: the fast tier runs them whole
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
#: Table talk that leaves windows open longer: players forget to call and are slow to catch.
FORGETFUL = Habits(forget_uno=0.6, late_call=0.1, catch=0.15)

#: What the sweeps met, so that each can require that it exercised its class.
MET: Counter[str] = Counter()


def steps_with_states(game: SimulatedGame) -> list[tuple[State, Any, tuple[Event, ...], State]]:
    """Every accepted command with the state before it and after it."""
    first = game.events[0]
    state = new_state(first)  # type: ignore[arg-type]
    out = []
    for command, events in game.steps:
        after = state
        for event in events:
            after = evolve(after, event)
        out.append((state, command, events, after))
        state = after
    return out


def attack_options() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "target_score": st.sampled_from([1, 200]),
            "attack_edition": st.sampled_from(["original", "2010"]),
            "custom_action": st.sampled_from([action.value for action in CustomAction]),
            "attack_follow_up": st.just(True),
        }
    )


# --- attack.follow-up --------------------------------------------------------------------------------

#: Follow-up faces whose effect skips the pointed player (or makes them press and lose the turn).
_PAST_THE_POINTED = {Face.SKIP, Face.HIT_TWO, Face.WILD_HIT_FOUR, Face.WILD_HIT_FIRE}


def expected_after_follow_up(before: State, play: CardPlayed, after: State) -> int:
    """Where the digest sends the turn after the follow-up ``play`` (made in ``before``)."""
    player, pointer = play.player, before.pointer
    assert pointer is not None
    custom = before.options.custom_action if play.card.face is Face.WILD_CUSTOMIZABLE else None
    if play.card.face is Face.REVERSE or custom is CustomAction.REVERSE:
        seat = after.next_seat(player)  # the new direction
    elif play.card.face in _PAST_THE_POINTED or custom is CustomAction.SKIP:
        seat = after.next_seat(pointer)
    else:
        seat = pointer
    return after.next_seat(seat) if seat == player else seat


@SWEEP
@given(players=st.integers(3, 10), seed=st.integers(0, 2**32), options=attack_options())
def sweep_follow_ups(players: int, seed: int, options: dict[str, Any]) -> None:
    chosen = make_options(Variant.ATTACK, options)
    game = play_game(Variant.ATTACK, players, seed, options=chosen, checks=False, habits=FORGETFUL)
    for before, command, events, after in steps_with_states(game):
        if not (isinstance(command, Play) and before.awaiting is Awaiting.FOLLOW_UP):
            continue
        play = next(e for e in events if isinstance(e, CardPlayed))
        prompts = [e for e in events if isinstance(e, Prompted)]
        if not prompts or not after.hands[play.player]:  # went out: no turn to hand on
            continue
        MET["follow-up"] += 1
        assert prompts[-1].awaiting is Awaiting.PLAY  # a follow-up never earns another
        assert prompts[-1].player == expected_after_follow_up(before, play, after)
        assert prompts[-1].player != play.player


def test_a_follow_up_hands_the_turn_on_as_the_digest_says() -> None:
    MET["follow-up"] = 0
    sweep_follow_ups()
    assert MET["follow-up"] >= 100, MET  # the sweep met the class


# --- "all others" in turn order ------------------------------------------------------------------------


def all_others_order(before: State, play: CardPlayed) -> list[int]:
    """The digest's order: every other player, starting with the next player in the current direction
    (the pointed player for a follow-up)."""
    first = before.pointer if before.awaiting is Awaiting.FOLLOW_UP else before.next_seat(play.player)
    assert first is not None
    seats = [before.next_seat(first, k) for k in range(before.size)]
    return [seat for seat in seats if seat != play.player]


def hit_seats(play: CardPlayed, events: tuple[Event, ...], cause: Rule) -> list[int]:
    """The seats that took cards or pressed because of ``cause``, in order, once each."""
    seats: list[int] = []
    for event in events:
        if not isinstance(event, CardsTaken | LauncherPressed) or event.cause is not cause:
            continue
        if not seats or seats[-1] != event.player:
            seats.append(event.player)
    return seats


_ALL_OTHERS = {
    Face.WILD_ALL_HIT: Rule.ATTACK_ALL_HIT,
    Face.WILD_VICTORY_LAP: Rule.SONIC_VICTORY_LAP,
    Face.WILD_ITEM_BOX: Rule.MK_ITEM_LIGHTNING,
    Face.WILD_CUSTOMIZABLE: Rule.ATTACK_CUSTOMIZABLE,
}


@SWEEP
@given(
    variant=st.sampled_from([Variant.ATTACK, Variant.SONIC, Variant.MARIO_KART]),
    players=st.integers(3, 10),
    seed=st.integers(0, 2**32),
)
def sweep_all_others(variant: Variant, players: int, seed: int) -> None:
    options: dict[str, Any] = {"target_score": 200}
    if variant is Variant.ATTACK:
        options |= {"attack_edition": "2010" if seed % 2 else "original", "custom_action": "all-press"}
    game = play_game(variant, players, seed, options=make_options(variant, options), checks=False)
    for before, command, events, _ in steps_with_states(game):
        if not isinstance(command, Play) or command.card.face not in _ALL_OTHERS:
            continue
        play = next(e for e in events if isinstance(e, CardPlayed))
        seats = hit_seats(play, events, _ALL_OTHERS[command.card.face])
        if not seats:  # an item box that flipped another item
            continue
        MET["all-others"] += 1
        expected = all_others_order(before, play)
        if command.card.face in (Face.WILD_ALL_HIT, Face.WILD_CUSTOMIZABLE):
            assert seats == expected  # every press is an event, even one that fires nothing
        else:
            assert seats == [seat for seat in expected if seat in seats]  # an empty pile gives nothing


# --- uno.catch windows ----------------------------------------------------------------------------------

_TURN_ACTIONS = (CardPlayed, CardDrawn, Passed, Wd4Accepted, Wd4Challenged)


def turn_actor(event: Event) -> int | None:
    """The player whose turn action ``event`` is, or ``None`` for anything else."""
    if isinstance(event, _TURN_ACTIONS):
        return event.player
    if isinstance(event, LauncherPressed) and event.cause is Rule.ATTACK_LAUNCHER:
        return event.player
    return None


def takes_cards(event: CardDrawn | CardsTaken | LauncherPressed) -> bool:
    """Whether ``event`` put a card in its player's hand (a press may fire nothing)."""
    return isinstance(event, CardDrawn) or bool(event.cards)


def expected_windows(before: State, events: tuple[Event, ...], after: State) -> tuple[int, ...]:
    """The open windows after ``events``, from the digest alone (``uno.call``, ``uno.catch``)."""
    open_: list[int] = list(before.exposed)
    for event in events:
        actor = turn_actor(event)
        if actor is not None:
            open_ = [seat for seat in open_ if seat == actor]  # another's turn action closes a window
        if isinstance(event, CardPlayed):
            open_ = [seat for seat in open_ if seat != event.player]
            traded = event.target if any(isinstance(e, HandsTraded) for e in events) else None
            left = len(before.hands[traded]) if traded is not None else len(before.hands[event.player]) - 1
            left -= len(event.discarded) if traded is None else 0
            if left == 1 and not event.uno:
                open_.append(event.player)
        elif isinstance(event, HandsTraded):
            open_ = [seat for seat in open_ if seat != event.other]
            if len(after.hands[event.other]) == 1:
                open_.append(event.other)
        elif isinstance(event, UnoCalled):
            open_ = [seat for seat in open_ if seat != event.player]
        elif isinstance(event, UnoCaught):
            open_ = [seat for seat in open_ if seat != event.target]
        elif isinstance(event, CardDrawn | CardsTaken | LauncherPressed) and takes_cards(event):
            open_ = [seat for seat in open_ if seat != event.player]  # more than one card again
    return tuple(open_) if after.in_round() else ()


@SWEEP
@given(variant=st.sampled_from(list(Variant)), players=st.integers(2, 10), seed=st.integers(0, 2**32))
def sweep_windows(variant: Variant, players: int, seed: int) -> None:
    options: dict[str, Any] = {"target_score": 100}
    if variant is Variant.ATTACK:
        options |= {"attack_edition": "2010" if seed % 2 else "original", "custom_action": "trade-hands"}
    chosen = make_options(variant, options)
    game = play_game(variant, players, seed, options=chosen, checks=False, habits=FORGETFUL)
    for before, _, events, after in steps_with_states(game):
        assert after.exposed == expected_windows(before, events, after)
        for seat in after.exposed:
            assert len(after.hands[seat]) == 1
        if any(seat in before.exposed and turn_actor(e) == seat for seat in after.exposed for e in events):
            MET["own-action"] += 1
        if any(isinstance(e, HandsTraded) and e.other in after.exposed for e in events):
            MET["traded-to-one"] += 1


def test_uno_windows_close_only_at_another_players_turn_action() -> None:
    MET["own-action"] = MET["traded-to-one"] = 0
    sweep_windows()
    # The sweep met the corners: a window that outlived its player's own turn action, and one opened
    # by another player's trade.
    assert MET["own-action"] > 0 and MET["traded-to-one"] > 0, MET


def test_all_others_effects_go_in_turn_order_from_the_next_player() -> None:
    MET["all-others"] = 0
    sweep_all_others()
    assert MET["all-others"] >= 50, MET


# --- one predicate per rule: the sensible bot's Wild Draw Four ------------------------------------------


@SWEEP
@given(variant=st.sampled_from(list(Variant)), players=st.integers(2, 6), seed=st.integers(0, 2**32))
def sweep_sensible_wild_draw_fours(variant: Variant, players: int, seed: int) -> None:
    options = make_options(variant, {"target_score": 100, "wd4_wilds_block": seed % 2 == 0})
    game = play_game(variant, players, seed, options=options, checks=False, sensible=[True] * players)
    for before, command, _, _ in steps_with_states(game):
        if isinstance(command, Play) and command.card.face is Face.WILD_DRAW_FOUR:
            MET["sensible-wd4"] += 1
            hand = before.hands[command.player]
            # wd4.legal as the rules say it, with the game's wd4_wilds_block (a wild in hand blocks it).
            assert not wd4_matching(hand, before.colour, options.wd4_wilds_block), (hand, before.colour)


def test_a_sensible_bot_plays_a_wild_draw_four_only_when_the_rules_allow_it() -> None:
    MET["sensible-wd4"] = 0
    sweep_sensible_wild_draw_fours()
    assert MET["sensible-wd4"] >= 50, MET
