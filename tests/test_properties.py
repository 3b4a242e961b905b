"""Property tests (hypothesis) for the rules' invariants over bot-played games of every rule set."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.play.simulate import play_game
from service.rules import (
    DECKS,
    Accept,
    Awaiting,
    Challenge,
    Choose,
    Colour,
    Command,
    Draw,
    Pass,
    Play,
    Press,
    Variant,
    Violation,
    conservation_error,
    decide,
    evolve,
    fold,
    make_options,
)
from service.rules.fair import launcher_count, shuffled
from tests.tiers import examples

variants = st.sampled_from(list(Variant))
players = st.integers(min_value=2, max_value=10)
seeds = st.integers(min_value=0, max_value=2**32)
GAME_SETTINGS = settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@GAME_SETTINGS
@given(variants, players, seeds)
def test_cards_are_conserved_after_every_event(variant: Variant, count: int, seed: int) -> None:
    game = play_game(variant, count, seed, checks=False)
    state = fold(game.events[:1])
    for event in game.events[1:]:
        state = evolve(state, event)
        assert conservation_error(state) is None, event
        if state.round:
            held = len(state.pile) + len(state.discard) + sum(len(h) for h in state.hands)
            assert held == len(state.deck)


@GAME_SETTINGS
@given(variants, players, seeds)
def test_folding_the_log_gives_the_deciders_state(variant: Variant, count: int, seed: int) -> None:
    game = play_game(variant, count, seed, checks=False)
    assert fold(game.events) == game.state
    # ... and every prefix of the log that ends a command folds to the state the decider returned then.
    state = fold(game.events[:1])
    for command, events in game.steps:
        outcome = decide(state, command)
        assert outcome == events
        for event in events:
            state = evolve(state, event)
    assert state == game.state


@GAME_SETTINGS
@given(variants, players, seeds)
def test_the_same_seed_plays_the_same_game(variant: Variant, count: int, seed: int) -> None:
    first = play_game(variant, count, seed, checks=False)
    second = play_game(variant, count, seed, checks=False)
    assert first.events == second.events


@GAME_SETTINGS
@given(variants, players, seeds)
def test_every_simulated_game_terminates_with_a_winner_at_the_target(
    variant: Variant, count: int, seed: int
) -> None:
    game = play_game(variant, count, seed, checks=False)
    state = game.state
    assert state.awaiting is Awaiting.GAME_OVER
    assert state.winner is not None
    options = make_options(variant)
    if options.single_round:
        assert len(state.results) == 1
    else:
        assert state.scores[state.winner] >= options.target_score
        assert all(
            score < options.target_score for seat, score in enumerate(state.scores) if seat != state.winner
        )
    assert sum(state.scores) == sum(result.points for result in state.results)
    for result in state.results:
        assert result.hands[result.winner] == ()


def _turn_commands(state_hand: tuple[object, ...], seat: int, target: int) -> list[Command]:
    commands: list[Command] = [Draw(seat), Pass(seat), Press(seat), Accept(seat), Challenge(seat)]
    commands += [Choose(seat, colour=Colour.RED), Choose(seat, target=target)]
    for card in state_hand:
        commands.append(Play(seat, card, Colour.BLUE if card.is_wild else None))  # type: ignore[attr-defined]
    return commands


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(variants, players, seeds, st.floats(min_value=0.0, max_value=1.0), st.data())
def test_no_turn_command_by_a_player_not_on_turn_is_accepted(
    variant: Variant, count: int, seed: int, where: float, data: st.DataObject
) -> None:
    game = play_game(variant, count, seed, checks=False)
    step = int(where * (len(game.steps) - 1))
    state = fold(game.events[:1])
    for _, events in game.steps[:step]:
        for event in events:
            state = evolve(state, event)
    others = [seat for seat in range(count) if seat != state.turn]
    seat = data.draw(st.sampled_from(others))
    target = next(s for s in range(count) if s != seat)
    for command in _turn_commands(state.hands[seat], seat, target):
        assert isinstance(decide(state, command), Violation), (state.awaiting, command)


@settings(max_examples=examples(200), deadline=None)
@given(st.binary(min_size=1, max_size=64), st.text(max_size=20), st.sampled_from(sorted(DECKS)))
def test_a_seeded_shuffle_is_a_permutation_and_reproducible(seed: bytes, label: str, deck: str) -> None:
    cards = DECKS[deck]
    once = shuffled(seed, label, cards)
    assert Counter(once) == Counter(cards)
    assert shuffled(seed, label, cards) == once


@settings(max_examples=examples(200), deadline=None)
@given(st.binary(min_size=1, max_size=32), st.lists(st.integers(0, 50), min_size=1, max_size=10))
def test_a_launcher_press_fires_only_counts_with_weight(seed: bytes, weights: list[int]) -> None:
    if sum(weights) == 0:
        weights = [*weights[:-1], 1]
    count = launcher_count(seed, "press", weights)
    assert 0 <= count < len(weights)
    assert weights[count] > 0
