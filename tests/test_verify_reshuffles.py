"""Reshuffles in records: inside an action, on its own line, and too early (``draw.reshuffle``).

A round dealt from a deck, without a seed, can only be followed past an empty pile if the record says
how the table reshuffled: on the line of the action that ran the pile out (``"reshuffle": [...]``), or on
a line of its own just before, once the pile is empty. Earlier is a ``draw.reshuffle`` violation. These
tests take real bot games (``service.play.simulate``), export them in deck mode and change the
reshuffles they carry; ``tests/test_record_modes.py`` sweeps the valid records.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from typing import Any

import pytest

from service.play.simulate import SimulatedGame, play_game
from service.records.export import RecordMode, record_from_game
from service.records.record import Action, ActionKind, GameRecord, RoundBlock, read_record, write_record
from service.records.verify import verify_record
from service.rules.cards import Face
from service.rules.commands import Accept, Catch, Challenge, Draw, Play, Press, StartRound
from service.rules.events import CardsTaken, LauncherPressed, PileReshuffled
from service.rules.options import Variant, make_options
from service.rules.state import State, evolve, new_state


def report_of(record: GameRecord) -> dict[str, Any]:
    return verify_record(read_record(write_record(record))).to_json()


def in_action_reshuffles(game: SimulatedGame) -> Iterator[tuple[int, Any, tuple[Any, ...]]]:
    """(step index, command, events) of every command whose pile ran out in the middle of it."""
    for index, (command, events) in enumerate(game.steps):
        if isinstance(command, StartRound | Draw | Press):
            continue
        if any(isinstance(e, PileReshuffled) for e in events):
            yield index, command, events


@functools.cache
def game_with(kind: str) -> tuple[SimulatedGame, int]:
    """A bot game in which the pile runs out in the middle of ``kind``, and the step it happens at:
    ``draw-two`` (a +2's victim takes one card, the pile is reshuffled, and takes the other), ``accept``,
    ``challenge``, ``catch``, ``press`` (an imposed UNO Attack press)."""
    variant = Variant.ATTACK if kind == "press" else Variant.CLASSIC
    for seed in range(500):
        game = play_game(variant, 10, seed, options=make_options(variant, {"target_score": 50}), checks=False)
        for index, command, events in in_action_reshuffles(game):
            if kind == "draw-two" and isinstance(command, Play) and command.card.face is Face.DRAW_TWO:
                taken = [e for e in events if isinstance(e, CardsTaken | PileReshuffled)]
                if [type(e) for e in taken] == [CardsTaken, PileReshuffled, CardsTaken]:
                    return game, index
            wanted = {"accept": Accept, "challenge": Challenge, "catch": Catch}.get(kind)
            if wanted is not None and isinstance(command, wanted):
                return game, index
            if kind == "press" and any(
                isinstance(e, LauncherPressed) and e.cause.value != "attack.launcher" for e in events
            ):
                return game, index
    raise AssertionError(f"no bot game ran the pile out inside a {kind}")


def line_of(record: GameRecord, step: int) -> int:
    """The record line of the game's step (line 1 is the header, then one line per command)."""
    return step + 2


def edit(record: GameRecord, line: int, change: Any) -> GameRecord:
    """``record`` with the item on ``line`` replaced by ``change(item)``."""
    rounds = []
    for block in record.rounds:
        start = change(block.start) if block.start.line == line else block.start
        actions = tuple(change(a) if a.line == line else a for a in block.actions)
        rounds.append(RoundBlock(start, actions))
    return GameRecord(record.header, tuple(rounds))


def state_before(game: SimulatedGame, step: int) -> State:
    state = new_state(game.events[0])  # type: ignore[arg-type]
    for _, events in game.steps[:step]:
        for event in events:
            state = evolve(state, event)
    return state


KINDS = ["draw-two", "accept", "challenge", "catch", "press"]


def deck_record(kind: str) -> tuple[GameRecord, int, Action]:
    """The deck-mode record of :func:`game_with`'s game, the line the pile ran out in, and its action."""
    game, step = game_with(kind)
    record = record_from_game(game, RecordMode.DECK)
    line = line_of(record, step)
    [action] = [a for b in record.rounds for a in b.actions if a.line == line]
    return record, line, action


@pytest.mark.parametrize("kind", KINDS)
def test_a_deck_record_gives_the_reshuffle_on_the_line_of_the_action_that_ran_the_pile_out(kind: str) -> None:
    record, _, action = deck_record(kind)
    assert action.reshuffles, "the export puts the reshuffle on the action's line"
    assert record.header.seed is None

    report = report_of(record)
    game, _ = game_with(kind)

    assert report["valid"], report["violations"][:3]
    assert report["scores"] == dict(zip(game.state.players, game.state.scores, strict=True))


@pytest.mark.parametrize("kind", KINDS)
def test_without_the_reshuffle_a_deck_record_cannot_be_followed_past_the_empty_pile(kind: str) -> None:
    record, line, _ = deck_record(kind)
    report = report_of(edit(record, line, lambda a: dataclasses.replace(a, reshuffles=())))

    assert report["stopped_at"] == line
    assert report["violations"][-1]["rule"] == "fair.commit"
    assert "order is unknown" in report["violations"][-1]["message"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_reshuffle_given_before_the_pile_ran_out_breaks_draw_reshuffle(kind: str) -> None:
    record, line, action = deck_record(kind)
    earlier = line - 1
    # The same pile, written one line too early (on an action that still had cards to take, or none).
    moved = edit(record, line, lambda a: dataclasses.replace(a, reshuffles=()))
    [before] = [a for b in record.rounds for a in b.actions if a.line == earlier]
    assert before.kind not in (ActionKind.PASS, ActionKind.CALL_UNO)  # lines that take no modifier
    moved = edit(moved, earlier, lambda a: dataclasses.replace(a, reshuffles=action.reshuffles))
    report = report_of(moved)

    first = report["violations"][0]
    assert (first["line"], first["rule"]) == (earlier, "draw.reshuffle")
    assert "did not run out" in first["message"]


def test_a_reshuffle_line_while_the_pile_still_holds_cards_breaks_draw_reshuffle() -> None:
    game, step = game_with("draw-two")
    record = record_from_game(game, RecordMode.DECK)
    # Three commands before the +2 the pile still held cards; the table reshuffles them all the same.
    at = step - 3
    state = state_before(game, at)
    assert state.pile
    pile = (*state.pile, *state.discard[:-1])
    line = line_of(record, at)
    reshuffle = Action(line=line, by=None, kind=ActionKind.RESHUFFLE, pile=pile)
    rounds = []
    for block in record.rounds:
        actions: list[Action] = []
        for a in block.actions:
            if a.line == line:
                actions.append(reshuffle)
            actions.append(a)
        rounds.append(RoundBlock(block.start, tuple(actions)))
    report = report_of(GameRecord(record.header, tuple(rounds)))

    first = report["violations"][0]
    assert (first["line"], first["rule"]) == (line, "draw.reshuffle")
    assert f"still holds {len(state.pile)} card" in first["message"]


def test_a_seeded_record_may_repeat_the_seeds_reshuffle_but_not_change_it() -> None:
    game, step = game_with("draw-two")
    seeded = record_from_game(game, RecordMode.SEED)
    deck = record_from_game(game, RecordMode.DECK)
    line = line_of(seeded, step)
    [given] = [a.reshuffles for b in deck.rounds for a in b.actions if a.line == line]
    same = edit(seeded, line, lambda a: dataclasses.replace(a, reshuffles=given))
    assert report_of(same)["valid"]

    pile = given[0]
    swapped = (pile[1], pile[0], *pile[2:]) if pile[0] != pile[1] else (*pile[1:], pile[0])
    report = report_of(edit(seeded, line, lambda a: dataclasses.replace(a, reshuffles=(swapped,))))
    found = {"line": line, "rule": "fair.commit", "message": "reshuffle 1 on the line is not the seed's"}
    assert found in report["violations"]
