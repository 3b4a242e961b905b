"""Export → verify → valid: simulated games written as records replay to the same result.

For every rule set at 2 and 5 players, bots play a few complete games (``service.play.simulate``); each
is exported (``record_from_game``), written and read back, and verified: valid, with the simulated
game's rounds, scores, winner and final table. Then the same records are tampered with (a deck's card,
a launcher count, a listed card) and the verifier must find the change at its line (``fair.commit``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from typing import Any

import pytest

from service.play.simulate import SimulatedGame, play_game
from service.records.export import record_from_game, record_from_steps
from service.records.record import Action, ActionKind, GameRecord, RoundBlock, read_record, write_record
from service.records.verify import verify_record
from service.rules.commands import Catch, Challenge
from service.rules.events import GameCreated, RoundStarted, Wd4Challenged
from service.rules.options import Variant
from service.rules.state import deal

GAMES = [(variant, players, seed) for variant in Variant for players in (2, 5) for seed in (0, 1, 2)]
IDS = [f"{variant.value}-{players}p-seed{seed}" for variant, players, seed in GAMES]


@functools.cache
def game(variant: Variant, players: int, seed: int) -> SimulatedGame:
    return play_game(variant, players, seed)


def roundtrip(record: GameRecord) -> dict[str, Any]:
    """Write ``record``, read it back, verify it: the JSON report."""
    text = write_record(record)
    return verify_record(read_record(text)).to_json()


def table_record(simulated: SimulatedGame) -> GameRecord:
    """``simulated`` as a table without a seed would record it: each round's dealt ``hands`` and
    ``first`` cards instead of its deck, and every card taken from the pile listed on its line."""
    created = simulated.events[0]
    assert isinstance(created, GameCreated)
    created = dataclasses.replace(created, seed=None, seed_sha256=None)
    steps = []
    for command, events in simulated.steps:
        dealt = []
        for event in events:
            if isinstance(event, RoundStarted) and event.deck is not None:
                hands, _ = deal(event.deck, len(created.players), event.dealer)
                event = RoundStarted(event.round, event.dealer, None, hands)
            dealt.append(event)
        steps.append((command, tuple(dealt)))
    return record_from_steps(created, steps)


def assert_same_result(report: dict[str, Any], simulated: SimulatedGame) -> None:
    state = simulated.state
    players = state.players
    assert report["valid"], report["violations"][:3]
    assert report["stopped_at"] is None
    assert report["rounds"] == [
        {"round": result.round, "winner": players[result.winner], "points": result.points}
        for result in state.results
    ]
    assert report["scores"] == dict(zip(players, state.scores, strict=True))
    assert state.winner is not None
    assert report["winner"] == players[state.winner]
    final = report["final"]
    assert {name: Counter(hand) for name, hand in final["hands"].items()} == {
        name: Counter(card.token for card in hand) for name, hand in zip(players, state.hands, strict=True)
    }
    assert final["top"] == state.discard[-1].token
    assert final["turn"] is None  # the game is over


@pytest.mark.parametrize(("variant", "players", "seed"), GAMES, ids=IDS)
def test_an_exported_game_verifies_as_valid_with_the_same_result(
    variant: Variant, players: int, seed: int
) -> None:
    simulated = game(variant, players, seed)
    record = record_from_game(simulated)
    report = roundtrip(record)

    assert_same_result(report, simulated)
    # One ruling per catch and per challenge, each as the game judged it, and the table agreed.
    judged = [
        (command, next((e for e in events if isinstance(e, Wd4Challenged)), None))
        for command, events in simulated.steps
        if isinstance(command, Catch | Challenge)
    ]
    assert [(r["kind"], r["verdict"], r["applied_ok"]) for r in report["rulings"]] == [
        ("uno-catch", "penalty", True)
        if isinstance(command, Catch)
        else ("wd4-challenge", "upheld" if challenged and challenged.upheld else "failed", True)
        for command, challenged in judged
    ]


@pytest.mark.parametrize(("variant", "players", "seed"), GAMES, ids=IDS)
def test_a_table_record_without_seed_or_deck_verifies_as_valid(
    variant: Variant, players: int, seed: int
) -> None:
    simulated = game(variant, players, seed)
    record = table_record(simulated)
    assert record.header.seed is None
    assert all(block.start.deck is None and block.start.hands for block in record.rounds)

    assert_same_result(roundtrip(record), simulated)


def with_listed_cards(simulated: SimulatedGame) -> GameRecord:
    """The exported record (rounds dealt from decks) with every line also listing the cards it took
    from the pile and the item boxes' flips, copied from the table record of the same game."""
    dealt, listed = record_from_game(simulated), table_record(simulated)
    rounds = []
    for block, table in zip(dealt.rounds, listed.rounds, strict=True):
        start = dataclasses.replace(block.start, cards=table.start.cards)
        actions = tuple(
            dataclasses.replace(action, cards=copy.cards, flip=copy.flip)
            for action, copy in zip(block.actions, table.actions, strict=True)
        )
        rounds.append(RoundBlock(start, actions))
    return GameRecord(dealt.header, tuple(rounds))


#: The rule sets that take cards from a draw pile (UNO Attack fires them: its presses are counts).
DRAWING = [variant for variant in Variant if variant is not Variant.ATTACK]


@pytest.mark.parametrize("variant", DRAWING)
def test_a_deck_dealt_record_may_list_its_cards(variant: Variant) -> None:
    simulated = game(variant, 5, 0)
    record = with_listed_cards(simulated)
    assert any(action.cards for block in record.rounds for action in block.actions)

    assert_same_result(roundtrip(record), simulated)


@pytest.mark.parametrize("variant", DRAWING)
def test_a_listed_card_that_is_not_the_decks_is_reported_at_its_line(variant: Variant) -> None:
    record = with_listed_cards(game(variant, 5, 0))
    block_index, action_index, action = next(
        (b, a, action)
        for b, block in enumerate(record.rounds)
        for a, action in enumerate(block.actions)
        if action.cards
    )
    name, taken = next(iter(action.cards.items()))
    other = next(card for card in record.rounds[block_index].start.deck or () if card != taken[0])
    tampered_cards = {**action.cards, name: (other, *taken[1:])}
    record = replace_action(
        record, block_index, action_index, dataclasses.replace(action, cards=tampered_cards)
    )
    line = line_of(record, block_index, action_index)

    report = roundtrip(record)

    assert [(v["line"], v["rule"]) for v in report["violations"]] == [(line, "fair.commit")]
    assert report["violations"][0]["message"].startswith(f"the record lists {name} taking ")


def line_of(record: GameRecord, block_index: int, action_index: int | None = None) -> int:
    """The line of a round line (``action_index`` ``None``) or an action in the canonical text."""
    line = 1
    for b, block in enumerate(record.rounds):
        line += 1
        if b == block_index:
            return line if action_index is None else line + 1 + action_index
        line += len(block.actions)
    raise IndexError(block_index)


def replace_action(record: GameRecord, block_index: int, action_index: int, action: Action) -> GameRecord:
    rounds = list(record.rounds)
    block = rounds[block_index]
    actions = list(block.actions)
    actions[action_index] = action
    rounds[block_index] = RoundBlock(block.start, tuple(actions))
    return GameRecord(record.header, tuple(rounds))


# --- Tampering with a seeded record ------------------------------------------------------------------------


def several_rounds(variant: Variant, players: int) -> GameRecord:
    """The record of the first of the usual games of ``variant`` that took more than one round."""
    records = (record_from_game(game(variant, players, seed)) for seed in range(10))
    return next(record for record in records if len(record.rounds) > 1)


@pytest.mark.parametrize(("variant", "players"), [(Variant.CLASSIC, 5), (Variant.ATTACK, 2)])
@pytest.mark.parametrize("round_index", [0, -1])
def test_a_deck_that_is_not_the_seeds_shuffle_is_a_fair_commit_violation(
    variant: Variant, players: int, round_index: int
) -> None:
    record = several_rounds(variant, players)  # round_index -1 is a later round
    block_index = round_index % len(record.rounds)
    block = record.rounds[block_index]
    assert block.start.deck is not None
    deck = list(block.start.deck)
    # Swap the two bottom cards that differ: the deck stays complete, the shuffle is not the seed's.
    i = next(i for i in range(len(deck) - 2, -1, -1) if deck[i] != deck[-1])
    deck[i], deck[-1] = deck[-1], deck[i]
    rounds = list(record.rounds)
    rounds[block_index] = RoundBlock(dataclasses.replace(block.start, deck=tuple(deck)), block.actions)
    tampered = GameRecord(record.header, tuple(rounds))
    line = line_of(tampered, block_index)

    report = roundtrip(tampered)

    assert not report["valid"]
    assert report["violations"][0] == {
        "line": line,
        "rule": "fair.commit",
        "message": f"round {block_index + 1}'s deck is not the seed's shuffle",
    }


@pytest.mark.parametrize("players", [2, 5])
def test_a_launcher_count_that_is_not_the_seeds_is_a_fair_commit_violation(players: int) -> None:
    record = record_from_game(game(Variant.ATTACK, players, 0))
    block_index, action_index, action = next(
        (b, a, action)
        for b, block in enumerate(record.rounds)
        for a, action in enumerate(block.actions)
        if action.kind is ActionKind.PRESS
    )
    [count] = action.fired
    assert isinstance(count, int)
    tampered = replace_action(
        record, block_index, action_index, dataclasses.replace(action, fired=(count + 1,))
    )
    line = line_of(tampered, block_index, action_index)

    report = roundtrip(tampered)

    # The seed decides the press: the replay goes on as the game went, with this one finding.
    assert report["violations"] == [
        {
            "line": line,
            "rule": "fair.commit",
            "message": f"the record says the launcher fired [{count + 1}], the replay fired [{count}]",
        }
    ]


def test_an_imposed_launcher_count_that_is_not_the_seeds_is_a_fair_commit_violation() -> None:
    record = record_from_game(game(Variant.ATTACK, 5, 0))
    block_index, action_index, action = next(
        (b, a, action)
        for b, block in enumerate(record.rounds)
        for a, action in enumerate(block.actions)
        if action.kind is not ActionKind.PRESS and action.fired
    )
    first, *rest = action.fired
    assert isinstance(first, int)
    fired = [first + 1, *rest]
    tampered = replace_action(
        record, block_index, action_index, dataclasses.replace(action, fired=tuple(fired))
    )

    report = roundtrip(tampered)

    assert [(v["line"], v["rule"]) for v in report["violations"]] == [
        (line_of(tampered, block_index, action_index), "fair.commit")
    ]


@pytest.mark.parametrize("players", [2, 5])
def test_presses_may_leave_their_count_to_the_revealed_seed(players: int) -> None:
    simulated = game(Variant.ATTACK, players, 1)
    record = record_from_game(simulated)
    assert record.header.seed is not None
    rounds = tuple(
        RoundBlock(
            block.start,
            tuple(
                dataclasses.replace(action, fired=()) if action.kind is ActionKind.PRESS else action
                for action in block.actions
            ),
        )
        for block in record.rounds
    )
    stripped = GameRecord(record.header, rounds)
    text = write_record(stripped)
    assert '"press": true}' in text

    assert_same_result(verify_record(read_record(text)).to_json(), simulated)
