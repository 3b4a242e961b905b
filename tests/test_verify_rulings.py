"""The verifier's rulings (``shared/RECORD.md``): every UNO catch and every Wild Draw Four challenge.

The records are written by hand in "hands" mode (``hands`` + ``first``, every card taken from the pile
listed on its line), so each expected verdict, hand and turn follows from the rules digest by hand.
Line 1 is the header, line 2 the round line, and action ``i`` (from 0) is on line ``3 + i``.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from service.records.record import read_record
from service.records.verify import verify_record

Line = dict[str, Any]


def verify(
    variant: str, players: list[str], start: Line, actions: list[Line], **options: Any
) -> dict[str, Any]:
    """The JSON report on the record made of a header, ``start`` and ``actions``."""
    header = {"record": "uno-game-record/1", "variant": variant, "players": players, "options": options}
    text = "".join(json.dumps(line) + "\n" for line in [header, start, *actions])
    return verify_record(read_record(text)).to_json()


def hand(report: dict[str, Any], name: str) -> Counter[str]:
    """A final hand as a multiset (``final.hands`` lists cards in any order)."""
    return Counter(report["final"]["hands"][name])


# --- UNO catches -----------------------------------------------------------------------------------------
#
# Two players, bob deals, ann starts. With two players Reverse acts as Skip, so ann plays on until her
# play on line 8 leaves her holding G7 alone, without calling UNO: her window opens at line 8, and it is
# bob's turn. bob holds 9 cards by then (his 7 and two he drew or fired on lines 6-7).

BOB = ["G1", "B2", "B3", "Y4", "Y5", "G5", "G6"]
PRELUDE: dict[str, tuple[Line, list[Line]]] = {
    **{
        variant: (
            {
                "round": 1,
                "dealer": "bob",
                "hands": {"ann": ["RS", "RS", "RR", "RR", "R+2", "R1", "G7"], "bob": BOB},
                "first": ["R9"],
            },
            [
                {"by": "ann", "play": "RS"},
                {"by": "ann", "play": "RS"},
                {"by": "ann", "play": "RR"},
                {"by": "ann", "play": "RR"},
                {"by": "ann", "play": "R+2", "cards": {"bob": ["Y8", "Y9"]}},
                {"by": "ann", "play": "R1"},
            ],
        )
        for variant in ("classic", "sonic", "mario-kart")
    },
    # UNO Attack (original edition: one Reverse per colour, no Draw Two): Hit 2 makes bob press twice.
    "attack": (
        {
            "round": 1,
            "dealer": "bob",
            "hands": {"ann": ["RS", "RS", "RR", "RH2", "RH2", "R1", "G7"], "bob": BOB},
            "first": ["R9"],
        },
        [
            {"by": "ann", "play": "RS"},
            {"by": "ann", "play": "RS"},
            {"by": "ann", "play": "RR"},
            {"by": "ann", "play": "RH2", "fired": [["Y8"], []]},
            {"by": "ann", "play": "RH2", "fired": [[], ["Y9"]]},
            {"by": "ann", "play": "R1"},
        ],
    ),
}
VARIANTS = list(PRELUDE)
#: What the table lists on a catch line that earned the penalty: two cards drawn, or two presses.
PENALTY: dict[str, Line] = {
    **{variant: {"cards": {"ann": ["B8", "B9"]}} for variant in ("classic", "sonic", "mario-kart")},
    "attack": {"fired": [["B8"], ["B9"]]},
}
#: bob's cards left at the end of a round that ann wins after bob played G1: 2+3+4+5+5+6+8+9.
POINTS = 42


def catch_game(variant: str, *then: Line, uno: bool = False) -> dict[str, Any]:
    start, prelude = PRELUDE[variant]
    if uno:
        prelude = [*prelude[:-1], {**prelude[-1], "uno": True}]
    return verify(variant, ["ann", "bob"], start, [*prelude, *then])


def test_the_prelude_leaves_ann_with_one_card_and_bob_on_turn() -> None:
    for variant in VARIANTS:
        report = catch_game(variant)
        assert report["valid"], (variant, report["violations"])
        assert report["final"]["hands"]["ann"] == ["G7"]
        assert hand(report, "bob") == Counter([*BOB, "Y8", "Y9"])
        assert (report["final"]["turn"], report["final"]["top"], report["final"]["colour"]) == (
            "bob",
            "R1",
            "R",
        )


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_catch_while_the_window_is_open_earns_the_penalty(variant: str) -> None:
    report = catch_game(
        variant,
        {"by": "bob", "catch": "ann", **PENALTY[variant]},
        {"by": "bob", "play": "G1"},
    )

    assert report["valid"], report["violations"]
    [ruling] = report["rulings"]
    assert ruling == {
        "line": 9,
        "kind": "uno-catch",
        "by": "bob",
        "against": "ann",
        "verdict": "penalty",
        "rule": "uno.catch",
        "evidence": {
            "hand": ["G7"],
            "active_colour": "R",
            "top": "R1",
            "window_opened": 8,
            "window_closed": None,
            "called": None,
        },
        "applied_ok": None,
    }
    assert hand(report, "ann") == Counter(["G7", "B8", "B9"])
    # The catch was table talk: it was still bob's turn, and his play then passed it to ann.
    assert (report["final"]["turn"], report["final"]["top"]) == ("ann", "G1")


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_catch_after_the_window_closed_earns_nothing(variant: str) -> None:
    report = catch_game(
        variant,
        {"by": "bob", "play": "G1"},
        {"by": "bob", "catch": "ann"},
        {"by": "ann", "play": "G7"},
    )

    assert report["valid"], report["violations"]
    [ruling] = report["rulings"]
    assert ruling["line"] == 10
    assert (ruling["kind"], ruling["by"], ruling["against"]) == ("uno-catch", "bob", "ann")
    assert (ruling["verdict"], ruling["rule"]) == ("no-penalty", "uno.catch.invalid")
    assert ruling["reason"] == "window closed at line 9"
    assert ruling["evidence"]["window_opened"] == 8
    assert ruling["evidence"]["window_closed"] == 9
    assert ruling["applied_ok"] is None
    # Nothing changed: ann still held G7 alone and went out with it.
    assert report["rounds"] == [{"round": 1, "winner": "ann", "points": POINTS}]
    assert report["scores"] == {"ann": POINTS, "bob": 0}
    assert report["final"]["hands"]["ann"] == []
    assert report["final"]["top"] == "G7"
    # Sonic plays a single round by default; the others play on to 500.
    assert report["winner"] == ("ann" if variant == "sonic" else None)
    assert report["final"]["turn"] is None


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_catch_of_a_player_who_called_with_the_play_earns_nothing(variant: str) -> None:
    report = catch_game(variant, {"by": "bob", "catch": "ann"}, uno=True)

    assert report["valid"], report["violations"]
    [ruling] = report["rulings"]
    assert (ruling["line"], ruling["verdict"], ruling["rule"]) == (9, "no-penalty", "uno.catch.invalid")
    assert ruling["reason"] == "ann called UNO at line 8"
    assert ruling["evidence"]["called"] == 8
    assert report["final"]["hands"]["ann"] == ["G7"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_catch_of_a_player_who_called_separately_earns_nothing(variant: str) -> None:
    report = catch_game(variant, {"by": "ann", "call": "uno"}, {"by": "bob", "catch": "ann"})

    assert report["valid"], report["violations"]
    [ruling] = report["rulings"]
    assert (ruling["line"], ruling["verdict"], ruling["rule"]) == (10, "no-penalty", "uno.catch.invalid")
    assert ruling["reason"] == "ann called UNO at line 9"
    assert report["final"]["hands"]["ann"] == ["G7"]
    assert report["final"]["turn"] == "bob"


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_self_catch_earns_nothing(variant: str) -> None:
    report = catch_game(variant, {"by": "ann", "catch": "ann"})

    assert report["valid"], report["violations"]
    [ruling] = report["rulings"]
    assert (ruling["line"], ruling["by"], ruling["against"]) == (9, "ann", "ann")
    assert (ruling["verdict"], ruling["rule"]) == ("no-penalty", "uno.catch.invalid")
    assert ruling["reason"] == "ann cannot catch themself"
    assert report["final"]["hands"]["ann"] == ["G7"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_catch_of_a_player_holding_more_than_one_card_earns_nothing(variant: str) -> None:
    report = catch_game(variant, {"by": "ann", "catch": "bob"})

    assert report["valid"], report["violations"]
    [ruling] = report["rulings"]
    assert (ruling["line"], ruling["by"], ruling["against"]) == (9, "ann", "bob")
    assert (ruling["verdict"], ruling["rule"]) == ("no-penalty", "uno.catch.invalid")
    assert ruling["reason"] == "bob holds 9 cards, not one"
    assert len(report["final"]["hands"]["bob"]) == 9


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_penalty_the_table_applied_agrees(variant: str) -> None:
    report = catch_game(variant, {"by": "bob", "catch": "ann", "applied": "penalty", **PENALTY[variant]})

    assert report["valid"], report["violations"]
    [ruling] = report["rulings"]
    assert (ruling["verdict"], ruling["applied_ok"]) == ("penalty", True)
    assert hand(report, "ann") == Counter(["G7", "B8", "B9"])


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_penalty_the_table_applied_agrees(variant: str) -> None:
    report = catch_game(variant, {"by": "ann", "catch": "ann", "applied": "none"})

    assert report["valid"], report["violations"]
    [ruling] = report["rulings"]
    assert (ruling["verdict"], ruling["applied_ok"]) == ("no-penalty", True)


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_penalty_the_table_did_not_apply_is_a_violation(variant: str) -> None:
    report = catch_game(
        variant, {"by": "bob", "catch": "ann", "applied": "none"}, {"by": "bob", "play": "G1"}
    )

    assert not report["valid"]
    [ruling] = report["rulings"]
    assert (ruling["line"], ruling["verdict"], ruling["rule"], ruling["applied_ok"]) == (
        9,
        "penalty",
        "uno.catch",
        False,
    )
    assert [(v["line"], v["rule"]) for v in report["violations"]] == [(9, "uno.penalty")]
    # Replayed as the table did: ann kept her single card, and the game went on.
    assert report["final"]["hands"]["ann"] == ["G7"]
    assert (report["final"]["turn"], report["final"]["top"]) == ("ann", "G1")


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_penalty_the_table_gave_for_nothing_is_a_violation(variant: str) -> None:
    report = catch_game(
        variant,
        {"by": "bob", "play": "G1"},
        {"by": "bob", "catch": "ann", "applied": "penalty", **PENALTY[variant]},
        {"by": "ann", "play": "G7"},
    )

    assert not report["valid"]
    [ruling] = report["rulings"]
    assert (ruling["line"], ruling["verdict"], ruling["rule"], ruling["applied_ok"]) == (
        10,
        "no-penalty",
        "uno.catch.invalid",
        False,
    )
    assert ruling["reason"] == "window closed at line 9"
    assert [(v["line"], v["rule"]) for v in report["violations"]] == [(10, "uno.catch.invalid")]
    # Replayed as the table did: ann took the penalty, so G7 did not take her out.
    assert hand(report, "ann") == Counter(["B8", "B9"])
    assert report["rounds"] == []
    assert report["final"]["turn"] == "bob"


def test_a_second_catch_after_the_penalty_earns_nothing() -> None:
    report = catch_game(
        "classic",
        {"by": "bob", "catch": "ann", **PENALTY["classic"]},
        {"by": "bob", "catch": "ann"},
    )

    assert report["valid"], report["violations"]
    first, second = report["rulings"]
    assert (first["line"], first["verdict"]) == (9, "penalty")
    assert (second["line"], second["verdict"], second["reason"]) == (
        10,
        "no-penalty",
        "ann holds 3 cards, not one",
    )


def test_the_window_closes_at_the_next_turn_action_of_any_kind() -> None:
    # A draw begins bob's turn as much as a play does.
    report = catch_game(
        "classic",
        {"by": "bob", "draw": True, "cards": ["Y3"]},
        {"by": "bob", "catch": "ann"},
    )

    assert report["valid"], report["violations"]
    [ruling] = report["rulings"]
    assert (ruling["line"], ruling["verdict"], ruling["reason"]) == (
        10,
        "no-penalty",
        "window closed at line 9",
    )
    assert report["final"]["turn"] == "ann"


def test_a_draw_two_victims_draw_does_not_close_the_window() -> None:
    # ann goes down to one card with a Draw Two: bob's draw is part of her play (digest uno.catch), and
    # with two players the turn comes straight back to ann, so the window is still open on line 9.
    start = {
        "round": 1,
        "dealer": "bob",
        "hands": {"ann": ["RS", "RS", "RR", "RR", "YR", "Y+2", "G7"], "bob": BOB},
        "first": ["R9"],
    }
    actions: list[Line] = [
        {"by": "ann", "play": "RS"},
        {"by": "ann", "play": "RS"},
        {"by": "ann", "play": "RR"},
        {"by": "ann", "play": "RR"},
        {"by": "ann", "play": "YR"},
        {"by": "ann", "play": "Y+2", "cards": {"bob": ["Y8", "Y9"]}},
        {"by": "bob", "catch": "ann", "cards": {"ann": ["B8", "B9"]}},
    ]
    report = verify("classic", ["ann", "bob"], start, actions)

    assert report["valid"], report["violations"]
    [ruling] = report["rulings"]
    assert (ruling["line"], ruling["verdict"], ruling["evidence"]["window_opened"]) == (9, "penalty", 8)
    assert hand(report, "ann") == Counter(["G7", "B8", "B9"])
    assert report["final"]["turn"] == "ann"


# --- Wild Draw Four challenges ---------------------------------------------------------------------------
#
# Blue 3 on top; ann plays Wild Draw Four (line 3), naming red; bob, her victim, challenges (line 4).

WD4_VARIANTS = ["classic", "sonic", "mario-kart"]  # UNO Attack has no Wild Draw Four
ILLEGAL = ["W+4", "B2", "G5", "Y7", "R1", "Y3", "G8"]  # ann holds B2, of the active colour
LEGAL = ["W+4", "G5", "Y7", "R1", "Y3", "G8", "G9"]  # no blue card
OFFENDER_DRAWS: Line = {"cards": {"ann": ["R5", "R6", "R7", "G9"]}}
VICTIM_DRAWS: Line = {"cards": {"bob": ["R5", "R6", "R7", "R8", "Y8", "Y9"]}}
BOB_WD4 = ["R3", "R4", "G1", "G2", "Y5", "Y6", "B9"]


def wd4_game(variant: str, ann: list[str], challenge: Line, *then: Line, **options: Any) -> dict[str, Any]:
    start = {"round": 1, "dealer": "bob", "hands": {"ann": ann, "bob": BOB_WD4}, "first": ["B3"]}
    actions = [
        {"by": "ann", "play": "W+4", "colour": "R"},
        {"by": "bob", "challenge": True, **challenge},
        *then,
    ]
    return verify(variant, ["ann", "bob"], start, actions, **options)


@pytest.mark.parametrize("variant", WD4_VARIANTS)
def test_a_challenge_of_an_illegal_wild_draw_four_is_upheld(variant: str) -> None:
    report = wd4_game(variant, ILLEGAL, OFFENDER_DRAWS, {"by": "bob", "play": "R3"})

    assert report["valid"], report["violations"]
    [ruling] = report["rulings"]
    assert ruling == {
        "line": 4,
        "kind": "wd4-challenge",
        "by": "bob",
        "against": "ann",
        "verdict": "upheld",
        "rule": "wd4.challenge.upheld",
        "evidence": {"hand": ILLEGAL, "active_colour": "B", "top": "B3", "matching": ["B2"], "played_at": 3},
        "applied_ok": None,
    }
    # ann draws 4; bob draws nothing and takes a normal turn; the chosen red stands.
    assert hand(report, "ann") == Counter([*ILLEGAL[1:], "R5", "R6", "R7", "G9"])
    assert hand(report, "bob") == Counter(BOB_WD4[1:])
    assert (report["final"]["turn"], report["final"]["top"], report["final"]["colour"]) == ("ann", "R3", "R")


@pytest.mark.parametrize("variant", WD4_VARIANTS)
def test_a_challenge_of_a_legal_wild_draw_four_fails(variant: str) -> None:
    report = wd4_game(variant, LEGAL, VICTIM_DRAWS, {"by": "ann", "play": "R1"})

    assert report["valid"], report["violations"]
    [ruling] = report["rulings"]
    assert (ruling["line"], ruling["by"], ruling["against"]) == (4, "bob", "ann")
    assert (ruling["verdict"], ruling["rule"]) == ("failed", "wd4.challenge.failed")
    assert ruling["evidence"]["matching"] == []
    assert ruling["evidence"]["hand"] == LEGAL
    assert "reason" not in ruling
    # bob draws 6 and loses the turn: ann (two players) plays next.
    assert len(report["final"]["hands"]["bob"]) == 13
    assert hand(report, "ann") == Counter(["G5", "Y7", "Y3", "G8", "G9"])
    assert (report["final"]["turn"], report["final"]["top"]) == ("bob", "R1")


WILDS_BLOCK = [
    # (variant, options, ann's other wild, upheld?)
    ("sonic", {}, "W", True),  # Sonic: another wild in hand makes Wild Draw Four illegal (default on)
    ("sonic", {}, "WVL", True),
    ("sonic", {}, "W+4", True),
    ("classic", {}, "W", False),  # classic: only the active colour counts
    ("classic", {}, "W+4", False),
    ("mario-kart", {}, "WIB", False),
    ("sonic", {"wd4_wilds_block": False}, "W", False),
    ("classic", {"wd4_wilds_block": True}, "W", True),
    ("mario-kart", {"wd4_wilds_block": True}, "WIB", True),
]


@pytest.mark.parametrize(("variant", "options", "wild", "upheld"), WILDS_BLOCK)
def test_the_wilds_block_rule_decides_a_challenge(
    variant: str, options: dict[str, Any], wild: str, upheld: bool
) -> None:
    ann = ["W+4", wild, "G5", "Y7", "R1", "Y3", "G8"]  # no blue card, but another wild
    report = wd4_game(variant, ann, OFFENDER_DRAWS if upheld else VICTIM_DRAWS, **options)

    assert report["valid"], report["violations"]
    [ruling] = report["rulings"]
    if upheld:
        assert (ruling["verdict"], ruling["rule"]) == ("upheld", "wd4.challenge.upheld")
        assert ruling["evidence"]["matching"] == [wild]
        assert len(report["final"]["hands"]["ann"]) == 10
        assert report["final"]["turn"] == "bob"
    else:
        assert (ruling["verdict"], ruling["rule"]) == ("failed", "wd4.challenge.failed")
        assert ruling["evidence"]["matching"] == []
        assert len(report["final"]["hands"]["bob"]) == 13
        assert report["final"]["turn"] == "ann"


@pytest.mark.parametrize("variant", WD4_VARIANTS)
def test_an_outcome_the_table_applied_agrees(variant: str) -> None:
    upheld = wd4_game(variant, ILLEGAL, {"applied": "upheld", **OFFENDER_DRAWS})
    failed = wd4_game(variant, LEGAL, {"applied": "failed", **VICTIM_DRAWS})

    for report, verdict in ((upheld, "upheld"), (failed, "failed")):
        assert report["valid"], report["violations"]
        [ruling] = report["rulings"]
        assert (ruling["verdict"], ruling["applied_ok"]) == (verdict, True)


@pytest.mark.parametrize("variant", WD4_VARIANTS)
def test_a_challenge_the_table_failed_wrongly_is_a_violation(variant: str) -> None:
    report = wd4_game(variant, ILLEGAL, {"applied": "failed", **VICTIM_DRAWS}, {"by": "ann", "play": "R1"})

    assert not report["valid"]
    [ruling] = report["rulings"]
    assert (ruling["line"], ruling["verdict"], ruling["rule"], ruling["applied_ok"]) == (
        4,
        "upheld",
        "wd4.challenge.upheld",
        False,
    )
    assert ruling["evidence"]["matching"] == ["B2"]
    assert [(v["line"], v["rule"]) for v in report["violations"]] == [(4, "wd4.challenge.upheld")]
    # Replayed as the table did: bob drew 6 and lost the turn, so ann's R1 on line 5 is in turn.
    assert len(report["final"]["hands"]["bob"]) == 13
    assert (report["final"]["turn"], report["final"]["top"]) == ("bob", "R1")


@pytest.mark.parametrize("variant", WD4_VARIANTS)
def test_a_challenge_the_table_upheld_wrongly_is_a_violation(variant: str) -> None:
    report = wd4_game(variant, LEGAL, {"applied": "upheld", **OFFENDER_DRAWS}, {"by": "bob", "play": "R3"})

    assert not report["valid"]
    [ruling] = report["rulings"]
    assert (ruling["line"], ruling["verdict"], ruling["rule"], ruling["applied_ok"]) == (
        4,
        "failed",
        "wd4.challenge.failed",
        False,
    )
    assert [(v["line"], v["rule"]) for v in report["violations"]] == [(4, "wd4.challenge.failed")]
    assert len(report["final"]["hands"]["ann"]) == 10
    assert (report["final"]["turn"], report["final"]["top"]) == ("ann", "R3")


THREE = {
    "round": 1,
    "dealer": "cy",
    "hands": {"ann": ILLEGAL, "bob": BOB_WD4, "cy": ["G3", "G4", "Y8", "Y9", "B5", "B6", "R8"]},
    "first": ["B3"],
}


def test_a_challenge_by_someone_other_than_the_victim_is_a_violation() -> None:
    report = verify(
        "classic",
        ["ann", "bob", "cy"],
        THREE,
        [
            {"by": "ann", "play": "W+4", "colour": "R"},
            {"by": "cy", "challenge": True},
            {"by": "bob", "accept": True, "cards": {"bob": ["R5", "R6", "R7", "G9"]}},
            {"by": "cy", "play": "R8"},
        ],
    )

    assert [(v["line"], v["rule"]) for v in report["violations"]] == [(4, "wd4.challenge")]
    assert report["violations"][0]["message"] == "only bob, the Wild Draw Four's victim, may answer it"
    [ruling] = report["rulings"]
    assert (ruling["line"], ruling["kind"], ruling["by"], ruling["against"]) == (
        4,
        "wd4-challenge",
        "cy",
        "ann",
    )
    assert (ruling["verdict"], ruling["rule"]) == ("failed", "wd4.challenge")
    assert ruling["reason"] == "only bob, the Wild Draw Four's victim, may answer it"
    # Rejected, it changed nothing: bob still answered, and the game went on.
    assert len(report["final"]["hands"]["bob"]) == 11
    assert len(report["final"]["hands"]["cy"]) == 6
    assert (report["final"]["turn"], report["final"]["top"]) == ("ann", "R8")


def test_a_challenge_after_the_victim_accepted_is_a_violation() -> None:
    report = verify(
        "classic",
        ["ann", "bob", "cy"],
        THREE,
        [
            {"by": "ann", "play": "W+4", "colour": "R"},
            {"by": "bob", "accept": True, "cards": {"bob": ["R5", "R6", "R7", "G9"]}},
            {"by": "bob", "challenge": True, "applied": "upheld"},
            {"by": "cy", "play": "R8"},
        ],
    )

    assert [(v["line"], v["rule"]) for v in report["violations"]] == [(5, "wd4.challenge")]
    [ruling] = report["rulings"]
    assert (ruling["line"], ruling["by"], ruling["against"]) == (5, "bob", "ann")
    assert (ruling["verdict"], ruling["rule"]) == ("failed", "wd4.challenge")
    assert ruling["reason"] == "no Wild Draw Four is waiting for an answer"
    assert ruling["evidence"] == {"played_at": 3}
    assert ruling["applied_ok"] is False  # the table upheld a challenge that could not be made
    assert len(report["final"]["hands"]["ann"]) == 6
    assert (report["final"]["turn"], report["final"]["top"]) == ("ann", "R8")


def test_a_challenge_after_the_victim_played_is_a_violation() -> None:
    # bob plays instead of answering (a violation of its own), then challenges: too late.
    report = verify(
        "classic",
        ["ann", "bob", "cy"],
        THREE,
        [
            {"by": "ann", "play": "W+4", "colour": "R"},
            {"by": "bob", "play": "R3"},
            {"by": "bob", "challenge": True},
        ],
    )

    assert [(v["line"], v["rule"]) for v in report["violations"]] == [
        (4, "action.wild-draw-four"),
        (5, "wd4.challenge"),
    ]
    [ruling] = report["rulings"]
    assert (ruling["line"], ruling["verdict"], ruling["rule"]) == (5, "failed", "wd4.challenge")


# --- The reason names what ended the chance to catch -----------------------------------------------------


def test_a_player_caught_whose_penalty_fired_nothing_cannot_be_caught_again() -> None:
    # UNO Attack: the penalty is two presses, which may fire nothing; ann still holds one card.
    report = catch_game(
        "attack",
        {"by": "bob", "catch": "ann", "fired": [[], []]},
        {"by": "bob", "catch": "ann"},
    )

    assert report["valid"], report["violations"]
    first, second = report["rulings"]
    assert (first["line"], first["verdict"]) == (9, "penalty")
    assert (second["line"], second["verdict"], second["rule"]) == (10, "no-penalty", "uno.catch.invalid")
    assert second["reason"] == "ann was already caught at line 9"
    assert report["final"]["hands"]["ann"] == ["G7"]


TRADE_DOWN_START: Line = {
    "round": 1,
    "dealer": "bob",
    "hands": {"ann": ["RS", "RS", "RR", "RR", "RH2", "RTH", "G7"], "bob": BOB},
    "first": ["R9"],
}
#: UNO Attack 2010, two players: ann sheds five cards (S and R act as Skip), then trades her last card but
#: one (G7) for bob's hand with the Trade Hands on line 8. Bob never played down to one card.
TRADE_DOWN: list[Line] = [
    {"by": "ann", "play": "RS"},
    {"by": "ann", "play": "RS"},
    {"by": "ann", "play": "RR"},
    {"by": "ann", "play": "RR"},
    {"by": "ann", "play": "RH2", "fired": [[], ["Y9"]]},
    {"by": "ann", "play": "RTH", "target": "bob"},
]


def test_a_player_left_with_one_card_by_anothers_trade_must_call() -> None:
    catch: Line = {"by": "ann", "catch": "bob", "fired": [["B5"], []]}
    report = verify("attack", ["ann", "bob"], TRADE_DOWN_START, [*TRADE_DOWN, catch], attack_edition="2010")

    assert report["valid"], report["violations"]
    [ruling] = report["rulings"]
    assert (ruling["line"], ruling["by"], ruling["against"], ruling["verdict"], ruling["rule"]) == (
        9,
        "ann",
        "bob",
        "penalty",
        "uno.catch",
    )
    assert ruling["evidence"]["window_opened"] == 8  # the trade's line
    assert hand(report, "bob") == Counter(["G7", "B5"])
    assert hand(report, "ann") == Counter([*BOB, "Y9"])
    assert report["final"]["turn"] == "bob"


def test_a_player_left_with_one_card_by_anothers_trade_is_safe_once_they_call() -> None:
    actions = [*TRADE_DOWN, {"by": "bob", "call": "uno"}, {"by": "ann", "catch": "bob"}]
    report = verify("attack", ["ann", "bob"], TRADE_DOWN_START, actions, attack_edition="2010")

    assert report["valid"], report["violations"]
    [ruling] = report["rulings"]
    assert (ruling["verdict"], ruling["reason"]) == ("no-penalty", "bob called UNO at line 9")
    assert report["final"]["hands"]["bob"] == ["G7"]
