"""Scenarios for the deck and setup rules (digest §1–§2)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import given as for_all
from hypothesis import settings
from hypothesis import strategies as st

from service.rules import (
    DECKS,
    Choose,
    Colour,
    CreateGame,
    Play,
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
    CardFlipped,
    CardPlayed,
    CardsTaken,
    ColourChosen,
    DealerDrawn,
    DirectionReversed,
    FlipReturned,
    GameCreated,
    LauncherPressed,
    Prompted,
    RoundStarted,
)
from tests.tiers import examples

from .support import (
    created,
    given,
    hand,
    names,
    one,
    rederived_position,
    rederived_shuffle,
    scenario,
    stacked_deck,
    then_events,
    then_violation,
    toks,
    when,
    won_round,
)

ANN, BOB, CY, DEE = 0, 1, 2, 3

# --- deck.composition ----------------------------------------------------------------------------------


def _per_colour(faces: dict[str, int]) -> Counter[str]:
    return Counter({colour + face: n for colour in "RYGB" for face, n in faces.items()})


_NUMBERS_1_9 = {str(n): 2 for n in range(1, 10)}
_CLASSIC_FACES = {"0": 1, **_NUMBERS_1_9, "S": 2, "R": 2, "+2": 2}
CLASSIC = _per_colour(_CLASSIC_FACES) + Counter({"W": 4, "W+4": 4})
SONIC = CLASSIC + Counter({"WVL": 4})
MARIO_KART = _per_colour(_CLASSIC_FACES) + Counter({"W+4": 4, "WIB": 8})
ATTACK = _per_colour({**_NUMBERS_1_9, "R": 1, "H2": 2, "S": 2, "DA": 2}) + Counter(
    {"W": 4, "WAA": 4, "WC": 3, "WH4": 1}
)
ATTACK_2010 = _per_colour({**_NUMBERS_1_9, "H2": 2, "S": 2, "R": 2, "DA": 1, "TH": 1}) + Counter(
    {"W": 4, "WAH": 2, "WHF": 2}
)


@scenario("deck.composition")
@pytest.mark.parametrize(
    ("name", "expected", "size"),
    [
        ("classic", CLASSIC, 108),
        ("sonic", SONIC, 112),
        ("mario-kart", MARIO_KART, 112),
        ("attack", ATTACK, 112),
        ("attack-2010", ATTACK_2010, 112),
    ],
)
def test_every_deck_has_the_digest_composition(name: str, expected: Counter[str], size: int) -> None:
    deck = DECKS[name]
    assert len(deck) == size
    assert sum(expected.values()) == size
    assert Counter(c.token for c in deck) == expected


@scenario("deck.composition")
@pytest.mark.parametrize(
    ("variant", "options", "expected"),
    [
        (Variant.CLASSIC, {}, CLASSIC),
        (Variant.SONIC, {}, SONIC),
        (Variant.MARIO_KART, {}, MARIO_KART),
        (Variant.ATTACK, {}, ATTACK),
        (Variant.ATTACK, {"attack_edition": "2010"}, ATTACK_2010),
    ],
)
def test_a_game_is_dealt_from_its_rule_sets_deck(
    variant: Variant, options: dict[str, str], expected: Counter[str]
) -> None:
    state = fold([created(variant, 2, options=options)])
    assert Counter(c.token for c in state.deck) == expected


@scenario("deck.composition")
def test_a_given_deck_with_a_card_of_another_rule_set_is_rejected() -> None:
    state = fold([created(Variant.CLASSIC, 2)])
    deck = list(DECKS["classic"])
    deck[deck.index(one("W"))] = one("WVL")
    then_violation(state, StartRound(deck=tuple(deck)), Rule.DECK_COMPOSITION, "WVL", "108")


@scenario("deck.composition")
def test_a_given_deck_missing_a_card_is_rejected() -> None:
    state = fold([created(Variant.MARIO_KART, 2)])
    then_violation(state, StartRound(deck=DECKS["mario-kart"][:-1]), Rule.DECK_COMPOSITION, "112", "missing")


@scenario("deck.composition")
def test_mario_kart_has_no_plain_wild() -> None:
    state = fold([created(Variant.MARIO_KART, 2)])
    deck = list(DECKS["mario-kart"])
    deck[deck.index(one("WIB"))] = one("W")
    then_violation(state, StartRound(deck=tuple(deck)), Rule.DECK_COMPOSITION, "W")


@scenario("deck.composition")
def test_dealt_hands_holding_more_copies_than_the_deck_has_are_rejected() -> None:
    state = fold([created(Variant.CLASSIC, 2)])
    hands = (toks("R0 R0 R1 R2 R3 R4 R5"), toks("G1 G2 G3 G4 G5 G6 G7"))  # classic has one R0
    then_violation(
        state, StartRound(hands=hands, supply=Supply(flips=toks("B5"))), Rule.DECK_COMPOSITION, "R0"
    )


# --- setup.players -------------------------------------------------------------------------------------


@scenario("setup.players")
@pytest.mark.parametrize("count", [0, 1, 11])
def test_fewer_than_two_or_more_than_ten_players_are_rejected(count: int) -> None:
    players = tuple(f"p{i}" for i in range(count))
    outcome = create(CreateGame(Variant.CLASSIC, players, make_options(Variant.CLASSIC), None, 0))
    assert isinstance(outcome, Violation)
    assert outcome.rule is Rule.SETUP_PLAYERS
    assert f"{count} players" in outcome.message


@scenario("setup.players")
@pytest.mark.parametrize("count", [2, 10])
def test_two_to_ten_players_sit_in_the_order_given(count: int) -> None:
    players = tuple(f"p{i}" for i in range(count))
    outcome = create(CreateGame(Variant.SONIC, players, make_options(Variant.SONIC), None, None))
    assert isinstance(outcome, GameCreated)
    assert outcome.players == players


@scenario("setup.players")
@pytest.mark.parametrize("players", [("ann", "bob", "ann"), ("ann", ""), ("ann", "  ")])
def test_duplicate_or_empty_player_names_are_rejected(players: tuple[str, ...]) -> None:
    outcome = create(CreateGame(Variant.CLASSIC, players, make_options(Variant.CLASSIC), None, 0))
    assert isinstance(outcome, Violation)
    assert outcome.rule is Rule.SETUP_PLAYERS


@scenario("setup.players")
@for_all(
    name=st.text(min_size=0, max_size=80).filter(
        lambda name: not (0 < len(name) <= 64 and name.isprintable() and name.strip())
    )
)
@settings(max_examples=examples(200), deadline=None)
def test_a_player_name_is_one_to_64_printable_characters(name: str) -> None:
    # Names are shown, stored and keyed on (read models): control characters, line breaks and
    # unbounded lengths are refused at creation, whatever else they hold.
    outcome = create(CreateGame(Variant.CLASSIC, ("ann", name), make_options(Variant.CLASSIC), None, 0))
    assert isinstance(outcome, Violation)
    assert outcome.rule is Rule.SETUP_PLAYERS


@scenario("setup.players")
@pytest.mark.parametrize("name", ["b" * 64, "Zoë 🃏", "ann smith", "宁"])
def test_printable_names_up_to_64_characters_are_taken(name: str) -> None:
    outcome = create(CreateGame(Variant.CLASSIC, ("ann", name), make_options(Variant.CLASSIC), None, 0))
    assert isinstance(outcome, GameCreated)


# --- setup.dealer --------------------------------------------------------------------------------------


@scenario("setup.dealer")
def test_a_dealer_given_at_creation_deals_the_first_round() -> None:
    log = given(Variant.CLASSIC, 3, {}, "R5", dealer=CY)
    assert isinstance(log[1], RoundStarted)
    assert log[1].dealer == CY
    assert fold(log).dealer == CY


@scenario("setup.dealer")
def test_a_dealer_seat_that_does_not_exist_is_rejected() -> None:
    outcome = create(CreateGame(Variant.SONIC, names(3), make_options(Variant.SONIC), None, 3))
    assert isinstance(outcome, Violation)
    assert outcome.rule is Rule.SETUP_DEALER
    assert "3" in outcome.message


@scenario("setup.dealer")
@pytest.mark.parametrize("variant", [Variant.SONIC, Variant.ATTACK])
def test_sonic_and_attack_default_to_a_given_dealer_seat_zero(variant: Variant) -> None:
    assert created(variant, 3, dealer=None).dealer == ANN


@scenario("setup.dealer")
@pytest.mark.parametrize("variant", [Variant.CLASSIC, Variant.MARIO_KART])
def test_classic_and_mario_kart_draw_for_dealer_so_a_table_game_must_state_it(variant: Variant) -> None:
    start = created(variant, 3, dealer=None)
    assert start.dealer is None
    state = fold([start])
    then_violation(state, StartRound(deck=state.deck), Rule.SETUP_DEALER)
    events = when(state, StartRound(dealer=BOB, deck=state.deck))
    assert events[0] == RoundStarted(1, BOB, state.deck, None)


DEALER_SEED = b"dealer-9"


@scenario("setup.dealer", "fair.commit")
def test_dealer_drawn_from_the_seed_highest_number_deals_and_ties_draw_again() -> None:
    order = rederived_shuffle(DEALER_SEED, "round:1:dealer-draw", DECKS["classic"])
    # ann B+2 (counts 0), bob Y6, cy G9, dee R9: cy and dee tie on 9 and draw again: cy Y3, dee R+2 (0).
    assert [c.token for c in order[:6]] == ["B+2", "Y6", "G9", "R9", "Y3", "R+2"]
    state = fold([created(Variant.CLASSIC, 4, dealer=None, seed=DEALER_SEED)])
    events = when(state, StartRound())
    draws = ((ANN, one("B+2")), (BOB, one("Y6")), (CY, one("G9")), (DEE, one("R9")), (CY, one("Y3")))
    assert events[0] == DealerDrawn(1, (*draws, (DEE, one("R+2"))), CY)
    # The cards go back: the round is dealt from the whole deck, shuffled under its own label.
    deal = rederived_shuffle(DEALER_SEED, "round:1:deal", DECKS["classic"])
    assert events[1] == RoundStarted(1, CY, deal, None)
    assert (
        deal[28].token == "Y2"
    )  # the first card turned after 4 × 7 dealt: a number, dee (left of cy) starts
    assert events[2:] == (CardFlipped(one("Y2")), Prompted(DEE, Awaiting.PLAY))
    # Deterministic: the same seed draws the same dealer again.
    assert when(fold([created(Variant.CLASSIC, 4, dealer=None, seed=DEALER_SEED)]), StartRound()) == events


@scenario("setup.dealer")
def test_a_stated_dealer_must_match_the_drawn_one() -> None:
    state = fold([created(Variant.CLASSIC, 4, dealer=None, seed=DEALER_SEED)])
    then_violation(state, StartRound(dealer=ANN), Rule.SETUP_DEALER, "cy", "ann")


@scenario("setup.dealer", "setup.first-player")
def test_the_deal_passes_left_in_later_rounds() -> None:
    log = won_round(Variant.CLASSIC, "R1 R2 R3 R4 R6 R7 R8")  # ann dealt round 1
    state = fold(log)
    then_violation(state, StartRound(dealer=ANN, deck=state.deck), Rule.SETUP_DEALER, "bob", "ann")
    deck = stacked_deck(state.deck, {}, "Y5", players=2, dealer=BOB)
    events = when(state, StartRound(deck=deck))
    assert events == (RoundStarted(2, BOB, deck, None), CardFlipped(one("Y5")), Prompted(ANN, Awaiting.PLAY))


# --- setup.deal ----------------------------------------------------------------------------------------


@scenario("setup.deal")
def test_seven_cards_each_dealt_one_at_a_time_starting_left_of_the_dealer() -> None:
    # The canonical classic deck reversed, top first:
    # W+4 ×4, W ×4, B+2 B+2 BR BR BS BS B9 B9 B8 B8 B7 B7 B6 B6 …
    deck = tuple(reversed(DECKS["classic"]))
    state = fold([created(Variant.CLASSIC, 3, dealer=CY)])
    events = when(state, StartRound(deck=deck))
    assert events == (RoundStarted(1, CY, deck, None), CardFlipped(one("B6")), Prompted(ANN, Awaiting.PLAY))
    after = fold([created(Variant.CLASSIC, 3, dealer=CY), *events])
    assert hand(after, ANN) == ["W+4", "W+4", "W", "B+2", "BS", "B9", "B7"]  # deck[0], deck[3], …
    assert hand(after, BOB) == ["W+4", "W", "W", "BR", "BS", "B8", "B7"]  # deck[1], deck[4], …
    assert hand(after, CY) == ["W+4", "W", "B+2", "BR", "B9", "B8", "B6"]  # the dealer last
    assert after.pile == deck[22:]
    assert after.discard == (one("B6"),)


@scenario("setup.deal")
def test_a_table_game_may_give_the_dealt_hands_and_the_flipped_card_instead() -> None:
    state = fold([created(Variant.CLASSIC, 2)])
    hands = (toks("R1 R2 R3 R4 R5 R6 R7"), toks("G1 G2 G3 G4 G5 G6 G7"))
    events = when(state, StartRound(hands=hands, supply=Supply(flips=toks("B5"))))
    assert events == (RoundStarted(1, ANN, None, hands), CardFlipped(one("B5")), Prompted(BOB, Awaiting.PLAY))
    after = fold([created(Variant.CLASSIC, 2), *events])
    assert after.hands == hands
    assert len(after.pile) == 108 - 14 - 1
    assert not after.pile_ordered


@scenario("setup.deal")
def test_both_a_deck_and_hands_are_rejected() -> None:
    state = fold([created(Variant.CLASSIC, 2)])
    hands = (toks("R1 R2 R3 R4 R5 R6 R7"), toks("G1 G2 G3 G4 G5 G6 G7"))
    then_violation(state, StartRound(deck=state.deck, hands=hands), Rule.SETUP_DEAL)


@scenario("setup.deal")
def test_a_hand_of_other_than_seven_cards_is_rejected() -> None:
    state = fold([created(Variant.CLASSIC, 2)])
    hands = (toks("R1 R2 R3 R4 R5 R6"), toks("G1 G2 G3 G4 G5 G6 G7"))
    then_violation(state, StartRound(hands=hands), Rule.SETUP_DEAL, "ann", "6 cards")


@scenario("setup.deal")
def test_a_hand_for_every_player_is_needed() -> None:
    state = fold([created(Variant.CLASSIC, 3)])
    hands = (toks("R1 R2 R3 R4 R5 R6 R7"), toks("G1 G2 G3 G4 G5 G6 G7"))
    then_violation(state, StartRound(hands=hands), Rule.SETUP_DEAL, "2 hands", "3 players")


@scenario("setup.deal")
def test_a_game_without_a_seed_needs_a_deck_or_hands() -> None:
    then_violation(fold([created(Variant.SONIC, 2)]), StartRound(), Rule.SETUP_DEAL)


# --- setup.first-card: classic -------------------------------------------------------------------------


def _dealt(log: Sequence[object]) -> list[object]:
    """The events after ``RoundStarted``."""
    return list(log[2:])


@scenario("setup.first-card", "setup.first-player")
def test_classic_number_first_card_the_player_left_of_the_dealer_starts() -> None:
    log = given(Variant.CLASSIC, 3, {}, "R5", dealer=ANN)
    assert _dealt(log) == [CardFlipped(one("R5")), Prompted(BOB, Awaiting.PLAY)]
    assert fold(log).colour is Colour.RED


@scenario("setup.first-player")
@pytest.mark.parametrize(("players", "dealer", "first"), [(3, 2, 0), (4, 1, 2), (10, 9, 0), (2, 1, 0)])
def test_the_first_player_sits_left_of_the_dealer(players: int, dealer: int, first: int) -> None:
    log = given(Variant.SONIC, players, {}, "G7", dealer=dealer)
    assert log[-1] == Prompted(first, Awaiting.PLAY)


@scenario("setup.first-card")
@pytest.mark.parametrize("variant", [Variant.CLASSIC, Variant.MARIO_KART])
def test_wild_draw_four_first_card_is_reshuffled_into_the_deck_and_another_flipped(variant: Variant) -> None:
    seed = b"first-wd4-2"
    log = given(variant, 2, {}, "W+4", "R5 G7", seed=seed)
    start = fold(log[:2])
    assert start.pile[:3] == toks("W+4 R5 G7")
    reshuffled = rederived_shuffle(seed, "round:1:return:0", (*start.pile[1:], one("W+4")))
    assert reshuffled[0].number is not None  # this seed flips a number next; the round starts normally
    assert _dealt(log) == [
        CardFlipped(one("W+4")),
        FlipReturned(one("W+4"), reshuffled),
        CardFlipped(reshuffled[0]),
        Prompted(BOB, Awaiting.PLAY),
    ]
    assert fold(log).discard == (reshuffled[0],)


@scenario("setup.first-card")
def test_wild_draw_four_first_card_of_a_table_game_goes_back_and_another_is_flipped() -> None:
    log = given(Variant.CLASSIC, 2, {}, "W+4", "R5 G7")
    flipped, returned, again = log[2], log[3], log[4]
    assert flipped == CardFlipped(one("W+4"))
    assert isinstance(returned, FlipReturned)
    assert returned.card is one("W+4")
    assert Counter(returned.pile) == Counter(fold(log[:3]).pile) + Counter([one("W+4")])
    # With no seed to shuffle with, the card goes to the bottom (docs/RECORD.md, unseeded records).
    assert returned.pile[-1] is one("W+4")
    assert again == CardFlipped(one("R5"))
    assert fold(log).top is one("R5")


@scenario("setup.first-card", "action.wild")
def test_classic_wild_first_card_the_first_player_chooses_the_colour() -> None:
    log = given(Variant.CLASSIC, 3, {}, "W", dealer=ANN)
    assert _dealt(log) == [CardFlipped(one("W")), Prompted(BOB, Awaiting.COLOUR, pointer=BOB, new_turn=False)]
    then_violation(log, Choose(ANN, colour=Colour.GREEN), Rule.TURN_ORDER, "bob")
    then_violation(log, Play(BOB, fold(log).hands[BOB][0]), Rule.TURN_ORDER, "colour")
    then_violation(log, Choose(BOB), Rule.ACTION_WILD)
    then_events(
        log, Choose(BOB, colour=Colour.GREEN), [ColourChosen(BOB, Colour.GREEN), Prompted(BOB, Awaiting.PLAY)]
    )


@scenario("setup.first-card")
def test_classic_draw_two_first_card_the_first_player_draws_two_and_loses_the_turn() -> None:
    log = given(Variant.CLASSIC, 3, {}, "B+2", "Y1 Y2 Y3", dealer=ANN)
    assert _dealt(log) == [
        CardFlipped(one("B+2")),
        CardsTaken(BOB, toks("Y1 Y2"), Rule.ACTION_DRAW_TWO),
        Prompted(CY, Awaiting.PLAY),
    ]


@scenario("setup.first-card")
def test_classic_skip_first_card_the_first_player_loses_the_turn() -> None:
    log = given(Variant.CLASSIC, 3, {}, "GS", dealer=ANN)
    assert _dealt(log) == [CardFlipped(one("GS")), Prompted(CY, Awaiting.PLAY)]


@scenario("setup.first-card")
def test_classic_reverse_first_card_the_dealer_starts_and_play_goes_right() -> None:
    log = given(Variant.CLASSIC, 3, {ANN: "Y1 R2 R3 R4 R6 R7 R8"}, "YR", dealer=ANN)
    assert _dealt(log) == [CardFlipped(one("YR")), DirectionReversed(), Prompted(ANN, Awaiting.PLAY)]
    # Right of ann (seat 0) is cy (seat 2).
    then_events(log, Play(ANN, one("Y1")), [CardPlayed(ANN, one("Y1")), Prompted(CY, Awaiting.PLAY)])


# --- setup.first-card: sonic ---------------------------------------------------------------------------


@scenario("setup.first-card")
def test_sonic_non_number_first_cards_stay_with_no_effect_until_a_number_shows() -> None:
    log = given(Variant.SONIC, 3, {}, "GS W+4 YR B+2 WVL W R5", "Y1 Y2", dealer=ANN)
    assert _dealt(log) == [
        *(CardFlipped(c) for c in toks("GS W+4 YR B+2 WVL W R5")),
        Prompted(BOB, Awaiting.PLAY),
    ]
    state = fold(log)
    assert state.discard == toks("GS W+4 YR B+2 WVL W R5")
    assert state.colour is Colour.RED
    assert state.direction == 1
    assert all(len(h) == 7 for h in state.hands)


# --- setup.first-card: Mario Kart ----------------------------------------------------------------------


@scenario("setup.first-card")
def test_mario_kart_item_box_first_card_the_dealer_chooses_the_colour_and_no_item_happens() -> None:
    log = given(Variant.MARIO_KART, 3, {}, "WIB", "R1 Y2", dealer=ANN)
    assert _dealt(log) == [
        CardFlipped(one("WIB")),
        Prompted(ANN, Awaiting.COLOUR, pointer=BOB, new_turn=False),
    ]
    then_violation(log, Choose(BOB, colour=Colour.YELLOW), Rule.TURN_ORDER, "ann")
    then_events(
        log,
        Choose(ANN, colour=Colour.YELLOW),
        [ColourChosen(ANN, Colour.YELLOW), Prompted(BOB, Awaiting.PLAY)],
    )


@scenario("setup.first-card")
@pytest.mark.parametrize(
    ("first", "after"),
    [
        # Yellow is the Banana's colour, blue Lightning's, red the Mushroom's: none of them activates.
        ("Y+2", [CardsTaken(BOB, toks("G1 G2"), Rule.ACTION_DRAW_TWO), Prompted(CY, Awaiting.PLAY)]),
        ("BS", [Prompted(CY, Awaiting.PLAY)]),
        ("RR", [DirectionReversed(), Prompted(ANN, Awaiting.PLAY)]),
        ("G4", [Prompted(BOB, Awaiting.PLAY)]),
    ],
)
def test_mario_kart_action_first_cards_act_as_classic_and_their_items_never_activate(
    first: str, after: list[object]
) -> None:
    log = given(Variant.MARIO_KART, 3, {}, first, "G1 G2 G3", dealer=ANN)
    assert _dealt(log) == [CardFlipped(one(first)), *after]


# --- setup.first-card: UNO Attack ----------------------------------------------------------------------


@scenario("setup.first-card", "attack.launcher")
def test_attack_hit_two_first_card_the_first_player_presses_twice_and_loses_the_turn() -> None:
    log = given(Variant.ATTACK, 3, {}, "RH2", "Y1 Y2 Y3", dealer=ANN, supply=Supply(presses=(1, 2)))
    assert _dealt(log) == [
        CardFlipped(one("RH2")),
        LauncherPressed(BOB, toks("Y1"), Rule.ATTACK_HIT_TWO),
        LauncherPressed(BOB, toks("Y2 Y3"), Rule.ATTACK_HIT_TWO),
        Prompted(CY, Awaiting.PLAY),
    ]


@scenario("setup.first-card")
@pytest.mark.parametrize(
    ("first", "after"),
    [
        ("YS", [Prompted(CY, Awaiting.PLAY)]),
        ("YR", [DirectionReversed(), Prompted(ANN, Awaiting.PLAY)]),
        ("W", [Prompted(BOB, Awaiting.COLOUR, pointer=BOB, new_turn=False)]),
        ("GDA", [Prompted(BOB, Awaiting.PLAY)]),
        ("Y9", [Prompted(BOB, Awaiting.PLAY)]),
    ],
)
def test_attack_skip_reverse_wild_and_discard_all_first_cards(first: str, after: list[object]) -> None:
    log = given(Variant.ATTACK, 3, {}, first, dealer=ANN)
    assert _dealt(log) == [CardFlipped(one(first)), *after]


@scenario("setup.first-card")
@pytest.mark.parametrize(
    ("first", "edition"),
    [
        ("WAA", "original"),
        ("WC", "original"),
        ("WH4", "original"),
        ("RTH", "2010"),
        ("WAH", "2010"),
        ("WHF", "2010"),
    ],
)
def test_attack_other_wilds_and_trade_hands_first_cards_go_back_into_the_launcher(
    first: str, edition: str
) -> None:
    seed = b"attack-return"
    log = given(Variant.ATTACK, 2, {}, first, "Y4 G6", options={"attack_edition": edition}, seed=seed)
    rest = fold(log[:3]).pile  # the launcher once the first card is turned: Y4 G6 …
    assert rest[:2] == toks("Y4 G6")
    at = rederived_position(seed, "round:1:return:0", len(rest))
    assert at > 0  # with this seed the card does not go back on top
    returned = (*rest[:at], one(first), *rest[at:])
    assert _dealt(log) == [
        CardFlipped(one(first)),
        FlipReturned(one(first), returned),
        CardFlipped(one("Y4")),
        Prompted(BOB, Awaiting.PLAY),
    ]
