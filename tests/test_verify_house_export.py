"""Export → verify → valid for games played with the house rules (digest §9), any combination of them.

Every game the service or the bots play, under any house rules its rule set supports, must export to a
record that the verifier finds valid and that replays to the game's own final table and scores
(``docs/RECORD.md``). The games come from two players:

* :mod:`tests.house_table`, a table that plays every legal move at random — jump-ins, stacks (a Wild Draw
  Four on a Draw Two included), 7 swaps and 0 rotations, draws to a match, forced plays, challenges of a
  stacked Wild Draw Four — so every line form the house rules add is written and read back;
* ``service.play.simulate.play_game``, the service's bots, with the same options (they play the house
  rules as a player out to win would: stack, jump in, swap with the smallest hand).

Each game is exported in the three record modes (seed, deck, hands), written, read back and verified;
and read back from the rows the store would hold (``service.audit.log``, which writes the record from the
events: a ``JumpedIn`` and its ``CardPlayed`` one play line, a draw to a match one draw line, a
``StackAccepted`` an accept line) and verified as a stored game. The sweep counts the house-rule moves
it met and requires that it met every one, so that it cannot pass on games where nothing happened.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.audit.log import GameLog
from service.audit.render import render_adjudication
from service.audit.stored_game import adjudicate, verify_game
from service.domain.entries import DisputeKind
from service.play.simulate import SimulatedGame, play_game
from service.records.export import RecordMode, record_from_game
from service.records.record import ActionKind, read_record, write_record
from service.records.report import Unit
from service.records.verify import verify_record
from service.rules.cards import Face
from service.rules.commands import Accept, Challenge, Draw, Play
from service.rules.events import (
    CardDrawn,
    HandsRotated,
    HandsTraded,
    JumpedIn,
    PileReshuffled,
    StackAccepted,
    Wd4Challenged,
)
from service.rules.options import UNSUPPORTED, Variant, make_options
from tests.audit.test_log_properties import rows_of
from tests.house_table import play_house_game
from tests.tiers import examples

GAMES_PER_RULE_SET = 100

#: The house-rule moves met, per rule set (see :func:`moves`).
SEEN: dict[Variant, Counter[str]] = {variant: Counter() for variant in Variant}


def house_options(variant: Variant) -> st.SearchStrategy[dict[str, Any]]:
    """Every house rule ``variant`` supports, each on or off at random (``stacking`` in any of its
    modes), with a target score small enough to keep most games short."""
    rules: dict[str, st.SearchStrategy[Any]] = {
        "stacking": st.sampled_from(["off", "draw-two", "draw-four", "any"]),
        "jump_in": st.booleans(),
        "seven_o": st.booleans(),
        "draw_to_match": st.booleans(),
        "force_play": st.booleans(),
        "wd4_any_time": st.booleans(),
    }
    supported = {name: value for name, value in rules.items() if name not in UNSUPPORTED[variant]}
    return st.fixed_dictionaries(
        {**supported, "target_score": st.sampled_from([50, 200]), "two_player_reverse_skips": st.booleans()}
    )


def moves(game: SimulatedGame) -> Counter[str]:
    """The house-rule moves in ``game``, by kind."""
    seen: Counter[str] = Counter()
    for command, events in game.steps:
        for event in events:
            if isinstance(event, JumpedIn):
                seen["jump-in"] += 1
            elif isinstance(event, StackAccepted) and event.total > 2:
                seen["stack accepted"] += 1
            elif isinstance(event, HandsRotated):
                seen["rotation"] += 1
            elif isinstance(event, HandsTraded):
                seen["swap"] += 1
            elif isinstance(event, Wd4Challenged) and game.state.options.stacking.value != "off":
                seen["challenge under stacking"] += 1
        if isinstance(command, Draw) and sum(isinstance(e, CardDrawn) for e in events) > 1:
            seen["draw to match"] += 1
            if any(isinstance(e, PileReshuffled) for e in events):
                seen["reshuffle inside a draw to match"] += 1
    return seen


def summary(report: dict[str, Any]) -> dict[str, Any]:
    """What every way of writing one game must agree on."""
    final = report["final"]
    return {
        "valid": report["valid"],
        "violations": report["violations"],
        "rounds": report["rounds"],
        "scores": report["scores"],
        "winner": report["winner"],
        "hands": {name: Counter(hand) for name, hand in final["hands"].items()},
        "top": final["top"],
        "rulings": [
            (r["line"], r["kind"], r["verdict"], r["rule"], r["applied_ok"]) for r in report["rulings"]
        ],
    }


def check_game(game: SimulatedGame) -> None:
    """Every record of ``game`` verifies valid, to the game's own final table and scores."""
    state = game.state
    players = state.players
    reports = {}
    for mode in RecordMode:
        record = record_from_game(game, mode)
        text = write_record(record)
        reports[mode] = summary(verify_record(read_record(text)).to_json())
    seeded = reports[RecordMode.SEED]
    assert seeded["valid"], seeded["violations"][:3]
    assert seeded["scores"] == dict(zip(players, state.scores, strict=True))
    assert seeded["rounds"] == [
        {"round": r.round, "winner": players[r.winner], "points": r.points} for r in state.results
    ]
    assert seeded["hands"] == {
        name: Counter(card.token for card in hand) for name, hand in zip(players, state.hands, strict=True)
    }
    assert seeded["top"] == state.discard[-1].token
    for mode in (RecordMode.DECK, RecordMode.HANDS):
        assert reports[mode] == seeded, f"{mode.value} mode differs from seed mode"

    # The service's export: the record written from the stored events is the one written from the
    # commands (a jump-in's two events one play line, several drawn cards one draw line, a stacked
    # penalty taken one accept line), and the stored game verifies valid with the same outcome.
    rows = rows_of(game)
    log = GameLog("g", rows, state.seed)
    assert log.record(reveal=True).record == record_from_game(game, RecordMode.SEED)
    stored = verify_game(log)
    assert stored.valid, stored.to_json()
    assert stored.rules is not None
    assert stored.rules.outcome.scores == dict(zip(players, state.scores, strict=True))


@pytest.mark.parametrize("variant", list(Variant), ids=lambda v: v.value)
def test_every_house_rule_game_exports_to_a_valid_record_of_the_same_game(variant: Variant) -> None:
    SEEN[variant].clear()

    @settings(
        max_examples=examples(GAMES_PER_RULE_SET),
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
        database=None,
    )
    @given(players=st.integers(2, 10), seed=st.integers(0, 2**32), options=house_options(variant))
    def sweep(players: int, seed: int, options: dict[str, Any]) -> None:
        game = play_house_game(variant, players, seed, make_options(variant, options))
        check_game(game)
        SEEN[variant].update(moves(game))
        SEEN[variant]["games"] += 1

    sweep()
    seen = SEEN[variant]
    wanted = {"jump-in", "stack accepted", "swap", "games"}
    if variant is not Variant.ATTACK:  # no draw pile to draw from until a match, no W+4, no 0
        wanted |= {
            "draw to match",
            "reshuffle inside a draw to match",
            "challenge under stacking",
            "rotation",
        }
    assert wanted <= set(seen), (wanted - set(seen), seen)


@pytest.mark.parametrize("variant", list(Variant), ids=lambda v: v.value)
def test_the_bots_house_rule_games_export_to_valid_records(variant: Variant) -> None:
    """The same property over the service's own bots (``play_game``, which play the house rules since
    79c9abe). A game the bots stop as stalled (a forced cycle they cannot leave) has no end to verify and
    its seed is never revealed: it is left out, and most games must not be."""
    SEEN[variant]["bot games"] = SEEN[variant]["stalled"] = 0

    @settings(
        max_examples=examples(GAMES_PER_RULE_SET // 2, fast=20),  # fewer miss a move the check wants
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
        database=None,
    )
    @given(players=st.integers(2, 10), seed=st.integers(0, 2**32), options=house_options(variant))
    def sweep(players: int, seed: int, options: dict[str, Any]) -> None:
        game = play_game(variant, players, seed, options=make_options(variant, options), checks=False)
        if game.stalled:
            SEEN[variant]["stalled"] += 1
            return
        check_game(game)
        SEEN[variant]["bot games"] += 1
        SEEN[variant].update(f"bots: {move}" for move in moves(game))

    sweep()
    seen = SEEN[variant]
    assert seen["bot games"] >= 4 * seen["stalled"], seen
    assert {"bots: jump-in", "bots: stack accepted", "bots: swap"} <= set(seen), seen


def test_a_jump_in_is_written_as_one_play_line_with_jump_in_true() -> None:
    """The export's line for a jump-in, checked on a game that has one: the play line says ``jump_in``
    and is the line of the jumper, who was not the player on turn."""
    for seed in range(50):
        game = play_house_game(Variant.CLASSIC, 4, seed, make_options(Variant.CLASSIC, {"jump_in": True}))
        record = record_from_game(game, RecordMode.SEED)
        jumps = [a for block in record.rounds for a in block.actions if a.jump_in]
        if jumps:
            break
    else:
        pytest.fail("no jump-in in 50 games")
    assert all(a.kind is ActionKind.PLAY for a in jumps)
    text = write_record(record)
    assert '"jump_in": true' in text
    assert read_record(text) == record


@pytest.mark.parametrize(
    ("variant", "answer"),
    [(Variant.SONIC, Accept), (Variant.SONIC, Challenge), (Variant.ATTACK, Accept)],
    ids=["sonic-accept", "sonic-challenge", "attack-accept"],
)
def test_a_reshuffle_inside_a_stacked_answer_is_given_on_its_line(variant: Variant, answer: type) -> None:
    """The pile runs out in the middle of a stacked penalty taken (or of a challenge's cards): a deck-mode
    record gives the new pile on the accept's (the challenge's) own line, and the game still verifies."""
    for seed in range(200):
        options = make_options(variant, {"stacking": "any", "target_score": 200})
        game = play_house_game(variant, 2 + seed % 9, seed, options)
        at = next(
            (
                i
                for i, (command, events) in enumerate(game.steps)
                if isinstance(command, answer)
                and any(isinstance(e, StackAccepted | Wd4Challenged) for e in events)
                and any(isinstance(e, PileReshuffled) for e in events)
            ),
            None,
        )
        if at is not None:
            break
    else:
        pytest.fail(f"no {answer.__name__} with a reshuffle inside it in 200 games")
    record = record_from_game(game, RecordMode.DECK)
    line = at + 2  # the header is line 1, then one line per command
    (action,) = [a for block in record.rounds for a in block.actions if a.line == line]
    assert action.kind is {Accept: ActionKind.ACCEPT, Challenge: ActionKind.CHALLENGE}[answer]
    assert action.reshuffles, "the new pile is on the answer's own line"
    check_game(game)


def test_an_adjudicated_stacked_challenge_of_a_stored_game_gives_the_stack_in_its_evidence() -> None:
    """A stored game's challenge of a stacked Wild Draw Four, adjudicated (``AdjudicateChallenge``,
    ``uno-audit adjudicate``): the ruling's evidence has the pending total, worked out here from the rule
    (every +2 counts 2 and every W+4 4, from the first card of the stack to the challenged one), and the
    text shows it."""
    for seed in range(300):
        game = play_house_game(Variant.CLASSIC, 4, seed, make_options(Variant.CLASSIC, {"stacking": "any"}))
        challenges = [
            i
            for i, (command, events) in enumerate(game.steps)
            if any(isinstance(e, Wd4Challenged) for e in events)
            and isinstance(game.steps[i - 1][0], Play)
            and isinstance(game.steps[i - 2][0], Play)
            and game.steps[i - 2][0].card.face in (Face.DRAW_TWO, Face.WILD_DRAW_FOUR)
        ]
        if challenges:
            break
    else:
        pytest.fail("no challenge of a stacked Wild Draw Four in 300 games")
    at = challenges[0]
    stack: list[Play] = []
    for command, _ in reversed(game.steps[:at]):
        if not (isinstance(command, Play) and command.card.face in (Face.DRAW_TWO, Face.WILD_DRAW_FOUR)):
            break
        stack.insert(0, command)
    total = sum(2 if play.card.face is Face.DRAW_TWO else 4 for play in stack)
    judged = next(e for e in game.steps[at][1] if isinstance(e, Wd4Challenged))
    names = game.state.players
    position = 2 + sum(len(events) for _, events in game.steps[:at])  # GameCreated is position 1
    log = GameLog("g", rows_of(game), game.state.seed)

    found = adjudicate(log, DisputeKind.WD4_CHALLENGE, position)

    evidence = found.ruling.to_json(Unit.POSITION)["evidence"]
    assert isinstance(evidence, dict)
    assert evidence["pending"] == total > 4
    assert evidence["stacked_by"] == [names[play.player] for play in stack]
    upheld = bool(judged.matching)
    assert evidence["penalised"] == names[judged.offender if upheld else judged.player]
    assert evidence["penalty"] == (total if upheld else total + 2)
    text = render_adjudication(found)
    assert f"    pending: {total}\n" in text
    assert f"    stacked by: {' '.join(names[play.player] for play in stack)}\n" in text
