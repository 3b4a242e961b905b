"""A round dealt from a fixed deck (the admin's, to rebuild a table game) verifies VALID, and the report says
which round was fixed and by whom; a round whose log claims the seed dealt it is still checked against the
seed's shuffle, so a rigged deal cannot pass for a fixed one. Bot games of every rule set (hypothesis),
records, and stored games on PostgreSQL.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.app.auditor import Auditor
from service.audit.log import GameLog
from service.audit.render import render
from service.audit.stored_game import verify_game
from service.play.simulate import SimulatedGame, play_game
from service.records.export import RecordMode, record_from_game
from service.records.record import GameRecord, RecordError, read_record, write_record
from service.records.verify import verify_record
from service.rules.cards import DECKS, Card
from service.rules.commands import StartRound
from service.rules.decide import decide
from service.rules.events import RoundStarted
from service.rules.options import Options, Variant, deck_name, make_options
from service.rules.state import fold
from service.rules.violations import Rule, Violation
from service.store import EventStore
from tests.audit.test_log_properties import rows_of
from tests.projections.projection_support import store_game
from tests.tiers import examples

#: Short matches of more than one round (Sonic plays one round unless told otherwise).
OPTIONS = {"target_score": 150, "single_round": False}
#: The message of a round whose deck claims to be the seed's shuffle and is not.
NOT_THE_SEEDS = "round 1's deck is not the seed's shuffle"


def options_of(variant: Variant, edition: str = "original") -> Options:
    """Short matches of ``variant`` (UNO Attack: of its ``edition``, whose deck is another)."""
    return make_options(
        variant, {**OPTIONS, **({"attack_edition": edition} if variant is Variant.ATTACK else {})}
    )


def legal_deck(variant: Variant, edition: str = "original") -> tuple[Card, ...]:
    """The rule set's deck in its canonical order."""
    return DECKS[deck_name(variant, options_of(variant, edition))]


def start_lines(game: SimulatedGame) -> dict[int, int]:
    """Round number → the record line (2 + the command's index) of the command that dealt it."""
    starts = [i for i, (command, _) in enumerate(game.steps) if isinstance(command, StartRound)]
    return {number: index + 2 for number, index in enumerate(starts, start=1)}


def start_positions(game: SimulatedGame) -> dict[int, int]:
    """Round number → the log position of the first event of the command that dealt it (as
    :func:`rows_of` stores the game: its creation, then each command's events)."""
    position, found = 1, dict[int, int]()
    for command, events in game.steps:
        if isinstance(command, StartRound):
            found[len(found) + 1] = position + 1
        position += len(events)
    return found


def seed_of(game: SimulatedGame) -> bytes:
    seed = game.state.seed
    assert seed is not None
    return seed


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(list(Variant)),
    st.integers(min_value=2, max_value=6),
    st.integers(min_value=0, max_value=2**32),
    st.integers(min_value=1, max_value=2),
    st.sampled_from(["original", "2010"]),
    st.data(),
)
def test_a_bot_game_from_a_fixed_deck_verifies_and_reports_that_round_alone(
    variant: Variant, players: int, seed: int, fixed_round: int, edition: str, data: st.DataObject
) -> None:
    deck = data.draw(st.permutations(legal_deck(variant, edition)), label="fixed deck")
    options = options_of(variant, edition)
    game = play_game(variant, players, seed, options=options, fixed_decks={fixed_round: deck})
    played = game.state.round >= fixed_round  # the match may end before the fixed round is dealt
    fixed = [(fixed_round, "admin")] if played else []
    started = [e for e in game.events if isinstance(e, RoundStarted)]
    assert [(e.round, e.fixed_by) for e in started if e.fixed_by] == fixed
    if played:
        assert started[fixed_round - 1].deck == tuple(deck)

    # The record the service exports (the seed revealed), written and read back.
    record = read_record(write_record(record_from_game(game)))
    assert [block.start.fixed_by for block in record.rounds] == [
        "admin" if block.start.round == fixed_round else None for block in record.rounds
    ]
    report = verify_record(record)
    assert report.valid, report.violations[:3]
    assert [(f.round, f.by) for f in report.fixed_decks] == fixed
    assert [f.at for f in report.fixed_decks] == ([start_lines(game)[fixed_round]] if played else [])

    # The stored game, read back from its log and replayed with the seed.
    stored = verify_game(GameLog("g", rows_of(game), seed_of(game)), show_seed=True)
    assert stored.valid, stored.first_problem()
    assert stored.seed is not None and stored.seed.mismatches == ()
    assert stored.rules is not None
    assert [(f.round, f.by) for f in stored.rules.fixed_decks] == fixed
    at = [start_positions(game)[fixed_round]] if played else []
    assert [f.at for f in stored.rules.fixed_decks] == at
    said = json.loads(json.dumps(stored.to_json())).get("fixed_decks", [])
    assert [(d["round"], d["by"]) for d in said] == fixed

    # A record that gives the decks without the seed claims no seed's shuffle: nothing was fixed there.
    for mode in (RecordMode.DECK, RecordMode.HANDS):
        other = verify_record(read_record(write_record(record_from_game(game, mode))))
        assert other.valid and other.fixed_decks == (), mode


def fixed_game(variant: Variant = Variant.CLASSIC, seed: int = 7) -> SimulatedGame:
    """A three-player bot game of ``variant`` whose first round is dealt from a fixed deck."""
    deck = list(legal_deck(variant))
    deck.reverse()  # an order no seed deals
    return play_game(variant, 3, seed, options=options_of(variant), fixed_decks={1: deck})


def replaced(game: SimulatedGame, change: Any) -> SimulatedGame:
    """``game`` with its first ``RoundStarted`` changed by ``change`` (a log the dealer rigged)."""
    steps = list(game.steps)
    for index, (command, events) in enumerate(steps):
        found = [at for at, event in enumerate(events) if isinstance(event, RoundStarted)]
        if found:
            at = found[0]
            event = events[at]
            assert isinstance(event, RoundStarted)
            steps[index] = (command, (*events[:at], change(event), *events[at + 1 :]))
            return dataclasses.replace(game, steps=steps)
    raise AssertionError("no round was dealt")


async def stored_report(store: EventStore, game: SimulatedGame) -> Any:
    game_id = str(uuid.uuid4())
    await store_game(store, game_id, game)
    return await Auditor(store).verify(game_id, check_projections=False)


async def test_a_stored_game_from_a_fixed_deck_verifies_valid(store: EventStore) -> None:
    game = fixed_game(Variant.ATTACK)
    report = await stored_report(store, game)

    assert report.valid, report.first_problem()
    assert report.seed is not None and report.seed.mismatches == ()
    assert report.rules is not None
    at = start_positions(game)[1]
    assert [(f.at, f.round, f.by) for f in report.rules.fixed_decks] == [(at, 1, "admin")]
    said = report.to_json()["fixed_decks"]
    assert said == [
        {
            "position": at,
            "round": 1,
            "by": "admin",
            "message": "round 1 was dealt from a fixed deck by admin, not from the seed's shuffle",
        }
    ]


async def test_a_rigged_deal_that_claims_the_seed_is_a_dealing_mismatch(store: EventStore) -> None:
    # The same deal, but its RoundStarted says nothing of a fixed deck: it claims the seed's shuffle.
    game = replaced(fixed_game(), lambda e: dataclasses.replace(e, fixed_by=None))
    report = await stored_report(store, game)

    assert report.chain.valid and not report.valid
    assert report.seed is not None and report.rules is not None
    at = start_positions(game)[1]
    assert [(m.position, m.message) for m in report.seed.mismatches] == [(at, NOT_THE_SEEDS)]
    assert report.rules.fixed_decks == ()
    assert "fixed_decks" not in report.to_json()
    assert f"DEALING MISMATCH: {NOT_THE_SEEDS}" in render(report)


async def test_a_seed_dealt_round_with_an_edited_deck_is_a_dealing_mismatch(store: EventStore) -> None:
    honest = play_game(Variant.CLASSIC, 3, 11, options=options_of(Variant.CLASSIC))

    def swap_the_bottom(event: RoundStarted) -> RoundStarted:
        assert event.deck is not None
        deck = list(event.deck)
        at = next(i for i in range(len(deck) - 2, 0, -1) if deck[i] != deck[-1])
        deck[at], deck[-1] = deck[-1], deck[at]
        return dataclasses.replace(event, deck=tuple(deck))

    report = await stored_report(store, replaced(honest, swap_the_bottom))

    assert report.chain.valid and not report.valid
    assert report.seed is not None and report.rules is not None
    found = [(m.position, m.message) for m in report.seed.mismatches]
    assert (start_positions(honest)[1], NOT_THE_SEEDS) in found
    assert report.rules.fixed_decks == ()


def test_a_fixed_deck_is_still_the_rule_sets_deck() -> None:
    # A fixed deal is exempt from the seed's shuffle only: a deck the rule set does not have is refused.
    game = fixed_game()
    record = record_from_game(game)
    start = record.rounds[0].start
    assert start.deck is not None
    wrong = (*start.deck[:-1], Card.parse("WVL"))  # a Sonic card, in a classic deck
    blocks = (dataclasses.replace(record.rounds[0], start=dataclasses.replace(start, deck=wrong)),)
    report = verify_record(dataclasses.replace(record, rounds=blocks + record.rounds[1:]))

    assert not report.valid
    assert report.violations[0].rule is Rule.DECK_COMPOSITION and report.violations[0].at == start.line
    assert [(f.at, f.round) for f in report.fixed_decks] == [(start.line, 1)]


def test_the_engine_records_who_fixed_the_deck_and_refuses_a_fixed_deal_without_one() -> None:
    game = fixed_game()
    state = fold(game.events[:1])
    deck = tuple(reversed(legal_deck(Variant.CLASSIC)))

    dealt = decide(state, StartRound(deck=deck, fixed_by="admin"))
    assert not isinstance(dealt, Violation)
    assert [(e.deck, e.fixed_by) for e in dealt if isinstance(e, RoundStarted)] == [(deck, "admin")]
    refused = decide(state, StartRound(fixed_by="admin"))
    assert isinstance(refused, Violation) and refused.rule is Rule.FAIR_COMMIT


def record_text(game: SimulatedGame) -> list[dict[str, Any]]:
    return [json.loads(line) for line in write_record(record_from_game(game)).splitlines()]


def text_of(lines: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(line) + "\n" for line in lines)


def test_a_round_line_says_who_fixed_its_deck_and_reads_back() -> None:
    lines = record_text(fixed_game())
    assert list(lines[1])[:4] == ["round", "dealer", "fixed_by", "deck"]
    assert lines[1]["fixed_by"] == "admin"
    assert read_record(text_of(lines)).rounds[0].start.fixed_by == "admin"


def without_seed(header: dict[str, Any], start: dict[str, Any]) -> None:
    del header["seed"], header["seed_sha256"]


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (without_seed, "the header commits to no seed"),
        (lambda header, start: start.update(fixed_by=7), "'fixed_by' must be a name"),
        (lambda header, start: start.update(fixed_by=""), "'fixed_by' must be a name"),
    ],
    ids=["no seed", "not a name", "empty"],
)
def test_a_fixed_deal_the_record_cannot_have_is_a_read_error(edit: Any, says: str) -> None:
    lines = record_text(fixed_game())
    edit(lines[0], lines[1])
    with pytest.raises(RecordError, match=says) as refused:
        read_record(text_of(lines))
    assert refused.value.line == 2


def test_a_fixed_deal_without_its_deck_is_a_read_error() -> None:
    record: GameRecord = record_from_game(fixed_game(), RecordMode.HANDS)
    lines = [json.loads(line) for line in write_record(record).splitlines()]
    lines[0].update(seed_sha256="0" * 64)
    lines[1]["fixed_by"] = "admin"
    with pytest.raises(RecordError, match="needs the round's 'deck'"):
        read_record(text_of(lines))
