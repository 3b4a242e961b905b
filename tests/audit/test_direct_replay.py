"""A stored game's commands, replayed as they are read back from its events, give the report that writing
them as a record and replaying the record gives (:func:`service.audit.stored_game.verify_game`, and its
``via_record``): for games of every rule set, house rules on or off, with catches and challenges, over,
in progress, without the seed, and edited.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.audit.log import GameLog, LogError, LoggedCommands
from service.audit.stored_game import verify_game
from service.play.simulate import SimulatedGame, play_game
from service.rules.options import UNSUPPORTED, Variant, make_options
from service.store import StoredEvent
from tests.audit.test_log_properties import rows_of
from tests.house_table import EVERY_HOUSE_RULE, play_house_game
from tests.tiers import examples

#: A target score that keeps games short.
SHORT = {"target_score": 50}


def house_rules(variant: Variant) -> dict[str, Any]:
    """Every house rule ``variant`` supports, on, in a short game."""
    rules = {name: value for name, value in EVERY_HOUSE_RULE.items() if name not in UNSUPPORTED[variant]}
    return {**rules, **SHORT}


def report(rows: list[StoredEvent], seed: bytes | None, *, via_record: bool) -> dict[str, Any]:
    """The stored game's report."""
    log = GameLog("g", rows, seed)
    found = verify_game(log, show_seed=True, via_record=via_record)
    return found.to_json()


def assert_same_report(rows: list[StoredEvent], seed: bytes | None) -> dict[str, Any]:
    """Both replays of the stored game report alike; the report."""
    direct = report(rows, seed, via_record=False)
    assert direct == report(rows, seed, via_record=True)
    return direct


def games(variant: Variant, seed: int) -> list[SimulatedGame]:
    """A bot game without house rules, one with all of them, and a game of the house table (every legal
    move at random: catches, challenges, stacks, jump-ins)."""
    rules = make_options(variant, house_rules(variant))
    return [
        play_game(variant, 2 + seed % 4, seed, options=make_options(variant, SHORT)),
        play_game(variant, 3 + seed % 5, seed, options=rules),
        play_house_game(variant, 2 + seed % 6, seed, rules),
    ]


@pytest.mark.parametrize("variant", list(Variant), ids=lambda v: v.value)
def test_a_game_replayed_from_its_commands_reports_as_from_its_record(variant: Variant) -> None:
    rulings = 0
    for seed in range(4):
        for game in games(variant, seed):
            rows = rows_of(game)
            log = GameLog("g", rows, game.state.seed)
            assert isinstance(log.commands(reveal=True), LoggedCommands)
            found = assert_same_report(rows, game.state.seed)
            assert found["valid"], found
            rulings += len(found["rulings"])
            assert_same_report(rows, None)  # the seed kept secret
            for cut in (2, len(rows) // 3, len(rows) // 2):  # in progress
                assert_same_report(rows[:cut], game.state.seed)
    assert rulings  # catches and challenges were judged


@settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
@given(
    variant=st.sampled_from(list(Variant)),
    seed=st.integers(0, 2**32),
    house=st.booleans(),
    edits=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=3),
)
def test_an_edited_game_reports_alike_both_ways(
    variant: Variant, seed: int, house: bool, edits: list[tuple[float, float]]
) -> None:
    """Rows whose type and payload were replaced by another row's (a card changed, an event moved, a
    command that answers nothing): both replays judge, or refuse to read, the log alike."""
    options = make_options(variant, house_rules(variant) if house else SHORT)
    game = play_house_game(variant, 2 + seed % 5, seed, options)
    rows = rows_of(game)
    for where, what in edits:
        at, source = 1 + int(where * (len(rows) - 2)), int(what * (len(rows) - 1))
        rows[at] = dataclasses.replace(rows[at], type=rows[source].type, payload=rows[source].payload)
    assert_same_report(rows, game.state.seed)


def test_a_command_before_the_first_round_is_a_log_that_cannot_be_read_back() -> None:
    """A log edited so that a command comes before the first round's deal, which a record has no line
    for: both ways of reading it back stop there, and the report says where, as for any log that cannot
    be read back (never an error out of the verifier)."""
    game = play_game(Variant.CLASSIC, 3, 7)
    rows = rows_of(game)
    deal = next(i for i, row in enumerate(rows) if row.type == "RoundStarted")
    play = next(i for i, row in enumerate(rows) if row.type == "CardPlayed")
    edited = [rows[0], dataclasses.replace(rows[deal], type=rows[play].type, payload=rows[play].payload)]
    edited += rows[deal + 1 :]
    log = GameLog("g", edited, game.state.seed)
    for read in (log.commands, log.record):
        with pytest.raises(LogError) as refused:
            read(reveal=True)
        assert refused.value.position == edited[1].version
        assert "comes before the first round is dealt" in str(refused.value)
    for via_record in (False, True):
        found = verify_game(log, via_record=via_record)
        assert not found.valid
        assert found.unreadable is not None and found.unreadable.position == edited[1].version
