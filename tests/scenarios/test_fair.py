"""Scenarios for fair dealing: the seed's commitment, its reveal, and everything derived from it (§8)."""

from __future__ import annotations

import hashlib

from service.rules import (
    DECKS,
    CreateGame,
    Draw,
    Press,
    Rule,
    StartRound,
    Supply,
    Variant,
    Violation,
    create,
    fold,
    make_options,
)
from service.rules.events import (
    Awaiting,
    CardDrawn,
    GameCreated,
    GameEnded,
    LauncherPressed,
    Prompted,
    RoundStarted,
)

from .support import (
    created,
    given,
    names,
    one,
    rederived_press,
    rederived_shuffle,
    run,
    scenario,
    then_events,
    toks,
    when,
    won_round,
)

ANN, BOB, CY = 0, 1, 2

LOSER = "R1 R2 R3 R4 R6 R7 R8"


@scenario("fair.commit")
def test_a_seeded_game_records_the_sha256_of_its_seed_when_created() -> None:
    start = create(CreateGame(Variant.CLASSIC, names(3), make_options(Variant.CLASSIC), b"abc", None))
    assert isinstance(start, GameCreated)
    assert start.seed_sha256 == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert start.seed_sha256 == hashlib.sha256(b"abc").hexdigest()
    assert start.seed == b"abc"


@scenario("fair.commit")
def test_an_empty_seed_is_rejected() -> None:
    outcome = create(CreateGame(Variant.CLASSIC, names(3), make_options(Variant.CLASSIC), b"", None))
    assert isinstance(outcome, Violation)
    assert outcome.rule is Rule.FAIR_COMMIT


@scenario("fair.commit")
def test_a_table_game_has_no_seed_and_records_its_deck_instead() -> None:
    start = created(Variant.CLASSIC, 2)
    assert start.seed is None
    assert start.seed_sha256 is None
    log = given(Variant.CLASSIC, 2, {BOB: "R1 R2 R3 R4 R6 R7 R8"}, "R5")
    assert isinstance(log[1], RoundStarted)
    assert log[1].deck is not None
    assert log[1].deck[14] is one("R5")  # the first card, right after 2 × 7 dealt


@scenario("fair.commit")
def test_the_same_seed_deals_the_same_cards_and_anyone_can_re_derive_them() -> None:
    def deal(seed: bytes) -> RoundStarted:
        events = when(fold([created(Variant.SONIC, 3, seed=seed)]), StartRound())
        assert isinstance(events[0], RoundStarted)
        return events[0]

    first, again, other = deal(b"table-7"), deal(b"table-7"), deal(b"table-8")
    assert first == again
    assert first.deck == rederived_shuffle(b"table-7", "round:1:deal", DECKS["sonic"])
    assert other.deck != first.deck


@scenario("fair.commit", "setup.dealer")
def test_every_round_is_dealt_under_its_own_label() -> None:
    log = won_round(Variant.CLASSIC, LOSER, seed=b"table-7")
    events = when(log, StartRound())
    assert events[0] == RoundStarted(
        2, BOB, rederived_shuffle(b"table-7", "round:2:deal", DECKS["classic"]), None
    )


@scenario("fair.commit", "score.match")
def test_the_seed_is_revealed_when_the_game_ends() -> None:
    log = won_round(Variant.SONIC, LOSER, seed=b"abc")
    assert log[0] == created(Variant.SONIC, 2, options={"dealer_selection": "given"}, seed=b"abc")
    assert log[-1] == GameEnded(BOB, (0, 31), b"abc")
    assert won_round(Variant.SONIC, LOSER)[-1] == GameEnded(BOB, (0, 31), None)


LAUNCHER_SEED = b"launcher-7"


@scenario("fair.commit", "attack.launcher")
def test_seeded_launcher_presses_are_derived_from_the_seed_not_reported() -> None:
    weights = (1, 1, 1)
    assert rederived_press(LAUNCHER_SEED, "round:1:press:0", weights) == 2
    assert rederived_press(LAUNCHER_SEED, "round:1:press:1", weights) == 1
    log = given(
        Variant.ATTACK,
        3,
        {},
        "R5",
        "Y1 Y2 Y3 Y4",
        dealer=ANN,
        options={"launcher_weights": list(weights)},
        seed=LAUNCHER_SEED,
    )
    then_events(
        log,
        Press(BOB, Supply(presses=(0,))),  # a seeded game ignores what a table would report
        [LauncherPressed(BOB, toks("Y1 Y2"), Rule.ATTACK_LAUNCHER), Prompted(CY, Awaiting.PLAY)],
    )
    log = run(log, Press(BOB))
    then_events(
        log, Press(CY), [LauncherPressed(CY, toks("Y3"), Rule.ATTACK_LAUNCHER), Prompted(ANN, Awaiting.PLAY)]
    )


@scenario("fair.commit", "draw.one")
def test_a_game_with_a_known_deck_order_ignores_reported_draws() -> None:
    log = given(Variant.CLASSIC, 3, {}, "R5", "G6 R3", dealer=ANN)
    then_events(
        log,
        Draw(BOB, Supply(draws={BOB: toks("B9")})),
        [CardDrawn(BOB, one("G6")), Prompted(CY, Awaiting.PLAY)],
    )
