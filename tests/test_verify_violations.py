"""The verifier's violations (``shared/RECORD.md``): reported at their line, then applied as the table did.

Hand-written records: mostly "hands" mode (every card taken from the pile listed on its line), and a few
rounds dealt from a stacked ``deck`` that still list their cards (the format allows it; the verifier
checks the listing against the deck). Line 1 is the header, line 2 the round line, action ``i`` (from 0)
is on line ``3 + i``.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from service.records.record import read_record
from service.records.verify import verify_record
from service.rules.cards import DECKS, card, cards, tokens

Line = dict[str, Any]

ANN = ["R1", "G7", "B5", "Y2", "RS", "W", "W+4"]
BOB = ["R3", "G5", "B1", "Y9", "G2", "B7", "Y6"]
START: Line = {"round": 1, "dealer": "bob", "hands": {"ann": ANN, "bob": BOB}, "first": ["R9"]}


def verify(
    *actions: Line, start: Line = START, variant: str = "classic", players: tuple[str, ...] = ("ann", "bob")
) -> dict[str, Any]:
    """The JSON report on a record of ``start`` and ``actions`` (two players, bob deals, ann starts)."""
    header = {"record": "uno-game-record/1", "variant": variant, "players": list(players), "options": {}}
    text = "".join(json.dumps(line) + "\n" for line in [header, start, *actions])
    return verify_record(read_record(text)).to_json()


def found(report: dict[str, Any]) -> list[tuple[int, str]]:
    return [(v["line"], v["rule"]) for v in report["violations"]]


def test_a_valid_record_has_no_violations() -> None:
    report = verify({"by": "ann", "play": "R1"}, {"by": "bob", "play": "R3"})

    assert report["valid"] is True
    assert report["violations"] == []
    assert report["rulings"] == []
    assert report["stopped_at"] is None
    assert report["final"]["turn"] == "ann"


# --- Reported, then applied as the table did ----------------------------------------------------------


def test_an_off_colour_play_is_reported_and_later_lines_still_check() -> None:
    report = verify(
        {"by": "ann", "play": "G7"},
        {"by": "bob", "play": "G5"},
        {"by": "ann", "play": "B5"},
        {"by": "bob", "play": "B1"},
    )

    assert report["violations"] == [
        {"line": 3, "rule": "play.match", "message": "G7 does not match R9 (active colour R)"}
    ]
    assert report["valid"] is False
    assert report["stopped_at"] is None
    assert Counter(report["final"]["hands"]["ann"]) == Counter(["R1", "Y2", "RS", "W", "W+4"])
    assert (report["final"]["turn"], report["final"]["top"], report["final"]["colour"]) == ("ann", "B1", "B")


def test_a_play_out_of_turn_is_reported_and_applied() -> None:
    report = verify({"by": "bob", "play": "R3"}, {"by": "ann", "play": "R1"}, {"by": "bob", "play": "B1"})

    assert report["violations"] == [
        {"line": 3, "rule": "turn.order", "message": "it is ann's turn, not bob's"}
    ]
    # As the table did: bob's R3 went down, the turn passed from bob to ann, and so on.
    assert len(report["final"]["hands"]["bob"]) == 5
    assert (report["final"]["turn"], report["final"]["top"]) == ("ann", "B1")


def test_several_violations_are_all_reported() -> None:
    report = verify(
        {"by": "ann", "play": "G7"},  # off colour
        {"by": "ann", "play": "G5"},  # not ann's turn, and she does not hold it either: see below
    )

    # ann does not hold G5: the record cannot be followed past line 4.
    assert found(report) == [(3, "play.match"), (4, "turn.order"), (4, "play.in-hand")]
    assert report["stopped_at"] == 4


def test_a_wild_draw_four_victim_who_plays_instead_of_answering() -> None:
    start = {**START, "hands": {"ann": ANN, "bob": BOB}}
    report = verify({"by": "ann", "play": "W+4", "colour": "G"}, {"by": "bob", "play": "G5"}, start=start)

    assert report["violations"] == [
        {
            "line": 4,
            "rule": "action.wild-draw-four",
            "message": "bob must first accept or challenge the Wild Draw Four",
        }
    ]
    assert report["final"]["turn"] == "ann"


def test_playing_another_card_after_drawing() -> None:
    report = verify(
        {"by": "ann", "draw": True, "cards": ["R5"]},
        {"by": "ann", "play": "R1"},
        {"by": "bob", "play": "R3"},
    )

    assert report["violations"] == [
        {"line": 4, "rule": "draw.one", "message": "after drawing, only the drawn R5 may be played, not R1"}
    ]
    assert "R5" in report["final"]["hands"]["ann"]
    assert report["final"]["turn"] == "ann"


def test_a_pass_after_an_unplayable_draw_is_the_end_of_that_turn() -> None:
    report = verify(
        {"by": "ann", "draw": True, "cards": ["G3"]},
        {"by": "ann", "pass": True},
        {"by": "bob", "play": "R3"},
    )

    assert report["valid"], report["violations"]
    assert "G3" in report["final"]["hands"]["ann"]
    assert (report["final"]["turn"], report["final"]["top"]) == ("ann", "R3")


def test_a_pass_without_a_draw_is_a_violation() -> None:
    report = verify({"by": "ann", "pass": True}, {"by": "bob", "play": "R3"})

    assert found(report) == [(3, "draw.pass")]
    assert report["final"]["turn"] == "ann"


def test_an_uno_call_while_holding_several_cards_is_a_violation() -> None:
    report = verify({"by": "ann", "call": "uno"}, {"by": "ann", "play": "R1"})

    assert report["violations"] == [{"line": 3, "rule": "uno.call", "message": "ann holds 7 cards, not one"}]
    assert report["final"]["turn"] == "bob"


def test_a_wild_without_a_colour_is_a_violation() -> None:
    report = verify({"by": "ann", "play": "W"})

    assert report["violations"] == [
        {"line": 3, "rule": "play.wild-colour", "message": "W needs a chosen colour (R, Y, G or B)"}
    ]


def test_a_challenge_in_uno_attack_is_a_violation() -> None:
    start = {
        "round": 1,
        "dealer": "bob",
        "hands": {"ann": ["R1", "G7", "B5", "Y2", "RS", "W", "WH4"], "bob": BOB},
        "first": ["R9"],
    }
    report = verify(
        {"by": "ann", "play": "WH4", "colour": "G", "fired": [[], ["B2"], [], []]},
        {"by": "bob", "challenge": True},
        start=start,
        variant="attack",
    )

    assert found(report) == [(4, "wd4.challenge")]
    [ruling] = report["rulings"]
    assert (ruling["kind"], ruling["verdict"], ruling["rule"]) == ("wd4-challenge", "failed", "wd4.challenge")
    assert report["final"]["turn"] == "ann"  # bob pressed 4 times and lost the turn


# --- The record cannot be followed: report at that line and stop ---------------------------------------


def test_a_card_the_player_does_not_hold_stops_the_replay() -> None:
    report = verify(
        {"by": "ann", "play": "R1"},
        {"by": "bob", "play": "R7"},  # bob holds no R7
        {"by": "ann", "play": "G7"},  # would be play.match: never reached
    )

    assert report["valid"] is False
    assert report["stopped_at"] == 4
    # One finding for the one fault (not a play.in-hand violation and then an "impossible" one).
    [violation] = report["violations"]
    assert (violation["line"], violation["rule"]) == (4, "play.in-hand")
    assert "bob does not hold R7" in violation["message"]
    assert "cannot be followed" in violation["message"]
    # The table as it was before the line that could not be followed.
    assert (report["final"]["turn"], report["final"]["top"]) == ("bob", "R1")
    assert len(report["final"]["hands"]["bob"]) == 7


def test_a_draw_without_its_card_in_a_round_without_a_deck_stops_the_replay() -> None:
    report = verify({"by": "ann", "draw": True}, {"by": "ann", "pass": True})

    assert found(report) == [(3, "fair.commit")]
    assert "not listed" in report["violations"][0]["message"]
    assert report["stopped_at"] == 3


def test_a_card_that_is_not_in_the_pile_stops_the_replay() -> None:
    # Every W+4 is accounted for: ann holds one, so a fifth cannot be drawn.
    start = {**START, "hands": {"ann": ["W+4", "W+4", "W+4", "W+4", "R1", "G7", "B5"], "bob": BOB}}
    report = verify({"by": "ann", "draw": True, "cards": ["W+4"]}, start=start)

    assert found(report) == [(3, "deck.composition")]
    assert report["stopped_at"] == 3


def test_dealt_hands_with_cards_the_deck_does_not_have_stop_the_replay() -> None:
    start = {**START, "hands": {"ann": ["W+4"] * 5 + ["R1", "G7"], "bob": BOB}}
    report = verify({"by": "ann", "play": "R1"}, start=start)

    assert report["violations"] == [
        {
            "line": 2,
            "rule": "deck.composition",
            "message": "the record cannot be followed: "
            "the dealt hands hold cards the deck does not have: W+4",
        }
    ]
    assert report["stopped_at"] == 2
    assert report["final"]["turn"] is None


def test_a_deck_too_short_to_deal_stops_the_replay() -> None:
    report = verify(
        {"by": "ann", "play": "R1"}, start={"round": 1, "dealer": "bob", "deck": ["R1", "G2", "W"]}
    )

    [violation] = report["violations"]
    assert (violation["line"], violation["rule"]) == (2, "deck.composition")
    assert violation["message"].endswith("a deck of 3 cards cannot deal 2 hands and a first card")
    assert report["stopped_at"] == 2


def test_a_deck_of_other_cards_is_reported_and_followed() -> None:
    # A table that played with a Wild Draw Four in place of a lost R0: the deal still works.
    deck = stacked("classic", START["hands"], ["R9"])
    deck[deck.index("R0")] = "W+4"
    report = verify({"by": "ann", "play": "R1"}, start={"round": 1, "dealer": "bob", "deck": deck})

    assert found(report) == [(2, "deck.composition")]
    assert "not in the deck: W+4" in report["violations"][0]["message"]
    assert report["stopped_at"] is None
    assert (report["final"]["turn"], report["final"]["top"]) == ("bob", "R1")


def test_a_short_hand_is_reported_at_the_round_line() -> None:
    start = {**START, "hands": {"ann": ANN[:6], "bob": BOB}}
    report = verify({"by": "ann", "play": "R1"}, start=start)

    assert report["violations"] == [
        {"line": 2, "rule": "setup.deal", "message": "ann was dealt 6 cards, not 7"}
    ]
    assert report["final"]["turn"] == "bob"


# --- Listed cards are checked against what the replay took --------------------------------------------


def test_cards_listed_that_no_one_took_are_reported() -> None:
    report = verify({"by": "ann", "draw": True, "cards": ["R5", "R6"]}, {"by": "ann", "play": "R5"})

    assert report["violations"] == [
        {"line": 3, "rule": "fair.commit", "message": "the record lists ann taking R5 R6, the replay took R5"}
    ]
    assert report["final"]["turn"] == "bob"


def test_first_cards_that_were_never_flipped_are_reported() -> None:
    report = verify({"by": "ann", "play": "R1"}, start={**START, "first": ["R9", "G4"]})

    assert report["violations"] == [
        {"line": 2, "rule": "fair.commit", "message": "the record lists R9 G4 flipped, the replay flipped R9"}
    ]


def stacked(variant: str, hands: dict[str, list[str]], order: list[str]) -> list[str]:
    """A complete deck, top first, dealing ``hands`` to two players (bob deals: ann gets the first
    card), then ``order`` on top of the pile, then the rest of the rule set's deck in canonical order."""
    top = [token for pair in zip(hands["ann"], hands["bob"], strict=True) for token in pair] + order
    rest = list(DECKS[variant])
    for taken in cards(top):
        rest.remove(taken)
    return top + tokens(rest)


def deck_start(
    variant: str, order: list[str], hands: dict[str, list[str]] | None = None, **extra: Any
) -> Line:
    """A round line dealing ``hands`` (default: ann's and bob's usual hands) from a stacked deck."""
    return {"round": 1, "dealer": "bob", "deck": stacked(variant, hands or START["hands"], order), **extra}


def test_the_stacked_deck_helper() -> None:
    deck = stacked("classic", START["hands"], ["R9", "R5"])

    assert Counter(deck) == Counter(tokens(DECKS["classic"]))
    assert deck[:4] == ["R1", "R3", "G7", "G5"]
    assert deck[14:16] == ["R9", "R5"]
    assert card(deck[-1]) in DECKS["classic"]


def test_a_round_with_a_deck_may_list_its_cards() -> None:
    report = verify(
        {"by": "ann", "draw": True, "cards": ["R5"]},
        {"by": "ann", "play": "R5"},
        {"by": "bob", "draw": True, "cards": {"bob": ["Y3"]}},
        start=deck_start("classic", ["R9", "R5", "Y3"]),
    )

    assert report["valid"], report["violations"]
    assert "Y3" in report["final"]["hands"]["bob"]
    assert report["final"]["turn"] == "ann"


def test_a_listed_card_that_is_not_the_decks_is_a_fair_commit_violation() -> None:
    report = verify(
        {"by": "ann", "draw": True, "cards": ["G3"]},  # the deck gives R5
        {"by": "ann", "play": "R5"},
        start=deck_start("classic", ["R9", "R5"]),
    )

    assert report["violations"] == [
        {"line": 3, "rule": "fair.commit", "message": "the record lists ann taking G3, the replay took R5"}
    ]
    # The deck decides: ann drew R5 and could play it.
    assert report["final"]["top"] == "R5"


def test_first_card_penalties_may_be_listed_on_a_round_line_with_a_deck() -> None:
    # A Draw Two turned up first: ann, the first player, draws 2 and loses the turn.
    report = verify(start=deck_start("classic", ["R+2", "Y3", "Y4"], cards={"ann": ["Y4", "Y3"]}))

    assert report["valid"], report["violations"]
    assert Counter(report["final"]["hands"]["ann"]) == Counter([*ANN, "Y3", "Y4"])
    assert report["final"]["turn"] == "bob"


def test_a_listing_that_names_the_wrong_player_is_a_violation() -> None:
    report = verify(start=deck_start("classic", ["R+2", "Y3", "Y4"], cards={"bob": ["Y3", "Y4"]}))

    assert report["violations"] == [
        {
            "line": 2,
            "rule": "fair.commit",
            "message": "the record lists ann taking nothing, the replay took Y3 Y4",
        },
        {
            "line": 2,
            "rule": "fair.commit",
            "message": "the record lists bob taking Y3 Y4, the replay took nothing",
        },
    ]
    assert len(report["final"]["hands"]["ann"]) == 9  # the deck decides


MK_HANDS = {"ann": ["R1", "G7", "B5", "Y2", "RS", "WIB", "W+4"], "bob": BOB}


@pytest.mark.parametrize(("flip", "valid"), [("R4", True), ("G4", False)])
def test_an_item_box_flip_listed_on_a_round_with_a_deck_is_checked(flip: str, valid: bool) -> None:
    # The deck turns up R4, a Mushroom: ann plays again at once.
    report = verify(
        {"by": "ann", "play": "WIB", "flip": flip},
        {"by": "ann", "play": "R1"},
        start=deck_start("mario-kart", ["R9", "R4"], MK_HANDS),
        variant="mario-kart",
    )

    assert report["valid"] is valid
    if not valid:
        assert report["violations"] == [
            {
                "line": 3,
                "rule": "fair.commit",
                "message": "the record lists G4 flipped, the replay flipped R4",
            }
        ]
    assert (report["final"]["turn"], report["final"]["top"]) == ("bob", "R1")
