"""Game records under the house rules (digest §9, ``docs/RECORD.md``): reading, rulings and violations.

Every expected value here is worked out from the digest and the record format by hand — the cards each
line moves, whose turn it is, which rule a line breaks — never copied from the verifier's output. The
records are small table games written without a deck (``hands`` and ``first``; every card taken from the
pile listed on its line), three players ann, bob and cy with cy dealing, so ann plays first and play goes
ann → bob → cy.

The hand-written example records for the house rules are in ``tests/data/records/house/``, each with the
facts ``uno-audit verify --record FILE --json`` must report in its ``NAME.expected.json`` (the keys of
``test_verify_examples.py``, checked the same way here); further tests check what those files cannot say:
the evidence of the rulings (a stacked Wild Draw Four's pending total and who takes what), the reasons,
and the hands the verifier reaches.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from service.cli.main import main
from service.records.record import Action, ActionKind, RecordError, read_record, write_record
from service.records.verify import verify_record
from service.rules.cards import Card
from tests.house_table import EVERY_HOUSE_RULE

DATA = Path(__file__).parent / "data" / "records" / "house"

HANDS = {
    "ann": ["R5", "R1", "G5", "Y7", "B3", "Y3", "G8"],
    "bob": ["R3", "R4", "G1", "G2", "Y5", "Y6", "B9"],
    "cy": ["G3", "G4", "Y8", "Y9", "B5", "B6", "R8"],
}


def header(options: dict[str, Any], variant: str = "classic") -> str:
    given = {"dealer_selection": "given", **options} if variant == "classic" else options
    return json.dumps(
        {"record": "uno-game-record/1", "variant": variant, "players": ["ann", "bob", "cy"], "options": given}
    )


def round_line(first: str = "R7", **hands: list[str]) -> str:
    return json.dumps({"round": 1, "dealer": "cy", "hands": {**HANDS, **hands}, "first": [first]})


def verify(*lines: str | dict[str, Any]) -> dict[str, Any]:
    """The JSON report of the record made of ``lines`` (action lines may be given as objects)."""
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    return verify_record(read_record(text)).to_json()


def found(report: dict[str, Any]) -> list[tuple[int, str]]:
    return [(v["line"], v["rule"]) for v in report["violations"]]


def sizes(report: dict[str, Any]) -> dict[str, int]:
    return {name: len(hand) for name, hand in report["final"]["hands"].items()}


def hand(report: dict[str, Any], name: str) -> Counter[str]:
    return Counter(report["final"]["hands"][name])


# --- reading: the header's options -----------------------------------------------------------------------


def test_a_header_with_every_house_rule_reads_and_writes_back() -> None:
    options = dict(EVERY_HOUSE_RULE)
    text = header(options) + "\n" + round_line() + "\n"
    record = read_record(text)
    assert record.header.options == {"dealer_selection": "given", **options}
    assert read_record(write_record(record)) == record


@pytest.mark.parametrize(
    ("variant", "options", "option"),
    [
        ("attack", {"draw_to_match": True}, "draw_to_match"),
        ("attack", {"force_play": False}, "force_play"),  # not attack's at all, even as off
        ("attack", {"wd4_any_time": True}, "wd4_any_time"),
        ("classic", {"stacking": True}, "stacking"),  # a mode, not a switch
        ("classic", {"stacking": "sevens"}, "stacking"),
        ("classic", {"jump_in": "yes"}, "jump_in"),
        ("sonic", {"stack_sevens": True}, "stack_sevens"),
    ],
)
def test_a_refused_option_is_a_setup_options_read_error_at_line_1(
    variant: str, options: dict[str, Any], option: str
) -> None:
    with pytest.raises(RecordError) as raised:
        read_record(header(options, variant) + "\n")
    assert raised.value.line == 1
    assert raised.value.message.startswith("setup.options: ")
    assert option in raised.value.message


def test_the_command_line_exits_2_naming_line_1_and_the_option(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "attack.jsonl"
    path.write_text(header({"force_play": True}, "attack") + "\n", encoding="utf-8")

    code = main(["verify", "--record", str(path), "--json"])
    out, err = capsys.readouterr()

    assert code == 2
    assert out == ""
    assert err.startswith(f"uno-audit verify: {path}: line 1: setup.options: ")
    assert "force_play" in err


# --- reading: the line forms ------------------------------------------------------------------------------


def test_a_jump_in_line_reads_as_a_play_with_jump_in_and_writes_back_in_its_canonical_form() -> None:
    text = (
        header({"jump_in": True})
        + "\n"
        + round_line()
        + "\n"
        + '{"jump_in": true, "play": "R5", "by": "cy"}\n'
    )
    record = read_record(text)
    action = record.rounds[0].actions[0]
    assert action == Action(line=3, by="cy", kind=ActionKind.PLAY, card=Card.parse("R5"), jump_in=True)
    assert write_record(record).splitlines()[2] == '{"by": "cy", "play": "R5", "jump_in": true}'


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ('{"by": "cy", "play": "R5", "jump_in": 1}', "'jump_in' must be true or false"),
        ('{"by": "cy", "draw": true, "jump_in": true}', "key 'jump_in' does not go on a 'draw' line"),
        ('{"by": "cy", "accept": true, "jump_in": true}', "key 'jump_in' does not go on a 'accept' line"),
    ],
)
def test_a_misused_jump_in_is_a_read_error_naming_its_line(line: str, fragment: str) -> None:
    with pytest.raises(RecordError) as raised:
        read_record(header({"jump_in": True}) + "\n" + round_line() + "\n" + line + "\n")
    assert raised.value.line == 3
    assert fragment in raised.value.message


def test_a_seven_names_its_target_and_an_accept_may_give_the_presses_it_imposed() -> None:
    seven = read_record(
        header({"seven_o": True}) + "\n" + round_line() + '\n{"by": "ann", "play": "R7", "target": "cy"}\n'
    )
    assert seven.rounds[0].actions[0].target == "cy"
    accept = read_record(
        header({"stacking": "any"}, "attack")
        + "\n"
        + json.dumps({"round": 1, "dealer": "cy", "deck": ["R1"] * 30})
        + '\n{"by": "cy", "accept": true, "fired": [0, 2, 0, 1]}\n'
    )
    assert accept.rounds[0].actions[0].fired == (0, 2, 0, 1)


# --- the examples: their expected facts, then what the evidence says ------------------------------------

EXAMPLES = sorted(path.name.removesuffix(".expected.json") for path in DATA.glob("*.expected.json"))


def test_every_house_rule_example_is_here() -> None:
    assert set(EXAMPLES) == {
        "classic_stacked_draw_two",
        "classic_stacked_wd4_upheld",
        "classic_stacked_wd4_failed",
        "classic_jump_in_closes_window",
        "classic_seven_o_swap_caught",
        "classic_draw_to_match_reshuffle",
    }


@pytest.mark.parametrize("name", EXAMPLES)
def test_a_house_rule_example_verifies_to_its_expected_facts(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    expected: dict[str, Any] = json.loads((DATA / f"{name}.expected.json").read_text(encoding="utf-8"))
    code = main(["verify", "--record", str(DATA / f"{name}.jsonl"), "--json"])
    out, err = capsys.readouterr()
    report = json.loads(out)

    assert (err, code, report["valid"]) == ("", expected["exit"], expected["valid"])
    assert [(v["line"], v["rule"]) for v in report["violations"]] == [
        (v["line"], v["rule"]) for v in expected["violations"]
    ]
    assert len(report["rulings"]) == len(expected["rulings"])
    for want, got in zip(expected["rulings"], report["rulings"], strict=True):
        for key in ("line", "kind", "verdict", "by", "against", "rule", "applied_ok"):
            assert got[key] == want[key], (want["line"], key)
        if "matching_contains" in want:
            assert want["matching_contains"] in got["evidence"]["matching"]
    assert sizes(report) == expected["hand_sizes"]
    assert (report["final"]["turn"], report["final"]["top"]) == (expected["turn"], expected["top"])
    for key in ("rounds", "winner", "stopped_at"):
        assert report[key] == expected[key]


def example(name: str) -> dict[str, Any]:
    return verify_record(read_record((DATA / f"{name}.jsonl").read_text(encoding="utf-8"))).to_json()


def test_a_stacked_wild_draw_four_upheld_shows_the_pending_eight_and_the_offender_taking_them() -> None:
    # ann's W+4 (green chosen), bob's W+4 on it (yellow chosen): 8 pending against cy, who challenges bob's.
    # bob held G1 and G2 when he played it on green: illegal. Upheld: bob takes all 8, cy plays normally.
    report = example("classic_stacked_wd4_upheld")
    (ruling,) = report["rulings"]
    assert ruling["evidence"] == {
        "hand": ["W+4", "G1", "G2", "Y5", "Y6", "B9", "R4"],
        "active_colour": "G",
        "top": "W+4",
        "matching": ["G1", "G2"],
        "played_at": 4,
        "pending": 8,
        "stacked_by": ["ann", "bob"],
        "penalised": "bob",
        "penalty": 8,
    }
    kept = ["G1", "G2", "Y5", "Y6", "B9", "R4"]
    assert hand(report, "bob") == Counter([*kept, "R2", "R3", "G6", "G7", "B1", "B2", "Y1", "Y2"])


def test_a_stacked_wild_draw_four_failed_makes_the_challenger_take_the_total_and_two() -> None:
    # bob held no green when he stacked his W+4 on ann's green: legal. cy takes 8 + 2 = 10 and loses the turn.
    report = example("classic_stacked_wd4_failed")
    (ruling,) = report["rulings"]
    evidence = ruling["evidence"]
    assert evidence["matching"] == []
    assert (evidence["pending"], evidence["stacked_by"]) == (8, ["ann", "bob"])
    assert (evidence["penalised"], evidence["penalty"]) == ("cy", 10)
    assert ruling["against"] == "bob"


def test_a_stacked_ruling_reads_in_the_text_report_too(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["verify", "--record", str(DATA / "classic_stacked_wd4_upheld.jsonl")])
    out, _ = capsys.readouterr()
    assert code == 0
    assert (
        "line 5: wd4-challenge by cy against bob: upheld [wd4.challenge.upheld]; bob takes 8 "
        "(8 pending, stacked by ann bob); the table agreed"
    ) in out


def test_a_challenge_without_stacking_has_no_stacking_facts() -> None:
    # By the book the answer always costs 4 or 6: the evidence stays as it always was.
    text = (DATA.parent / "classic_wd4_upheld.jsonl").read_text(encoding="utf-8")
    (ruling,) = verify_record(read_record(text)).to_json()["rulings"]
    assert "pending" not in ruling["evidence"]


def test_a_stacked_draw_two_accepted_moves_four_cards_to_the_one_who_accepts() -> None:
    report = example("classic_stacked_draw_two")
    assert hand(report, "cy") == Counter(HANDS["cy"] + ["R2", "R3", "G6", "G7"])
    assert hand(report, "bob") == Counter(["R4", "G1", "G2", "Y5", "Y6", "B9"])  # bob stacked, took nothing


def test_a_jump_in_closes_the_window_so_the_later_catch_earns_nothing() -> None:
    report = example("classic_jump_in_closes_window")
    (ruling,) = report["rulings"]
    assert ruling["reason"] == "window closed at line 19"
    assert (ruling["evidence"]["window_opened"], ruling["evidence"]["window_closed"]) == (18, 19)
    assert ruling["evidence"]["hand"] == ["G7"]


def test_a_seven_swap_leaves_the_target_one_card_and_the_catch_penalises_them() -> None:
    report = example("classic_seven_o_swap_caught")
    (ruling,) = report["rulings"]
    assert ruling["evidence"]["hand"] == ["G9"]  # what ann had left after the 7, now cy's
    assert ruling["evidence"]["window_opened"] == 18
    assert hand(report, "ann") == Counter(["B5", "B6"])  # cy's last two cards
    assert hand(report, "cy") == Counter(["G9", "Y1", "Y2"])


def test_a_draw_to_match_through_a_reshuffle_takes_every_card_to_the_first_green() -> None:
    report = example("classic_draw_to_match_reshuffle")
    lines = (DATA / "classic_draw_to_match_reshuffle.jsonl").read_text(encoding="utf-8").splitlines()
    dealt = json.loads(lines[1])["hands"]["eve"]
    drawn = json.loads(lines[6])["cards"]
    assert len(drawn) == 38  # the 37 cards of the pile, none green, no 5, no wild; then the reshuffle's G3
    assert hand(report, "eve") == Counter(dealt + drawn[:-1])  # the G3 drawn last was played at once


# --- violations, each at its line, then the table followed ---------------------------------------------


def test_a_card_that_does_not_stack_on_a_pending_draw_two_breaks_stacking() -> None:
    report = verify(
        header({"stacking": "draw-two"}),
        round_line(ann=["R+2", "R1", "G5", "Y7", "B3", "Y3", "G8"]),
        {"by": "ann", "play": "R+2"},
        {"by": "bob", "play": "R3"},  # bob should stack a +2 or accept the 2
        {"by": "cy", "play": "R8"},
    )
    assert found(report) == [(4, "house.stacking")]
    # As the table did: bob's R3 went down, nobody took the 2, cy played on.
    assert sizes(report) == {"ann": 6, "bob": 6, "cy": 6}
    assert (report["final"]["top"], report["final"]["turn"]) == ("R8", "ann")


def test_a_stacked_total_is_taken_by_whoever_stops_stacking() -> None:
    # Under "any" a W+4 goes on a +2: 2 + 4 = 6 pending against cy, who accepts (no challenge).
    report = verify(
        header({"stacking": "any"}),
        round_line(
            ann=["R+2", "R1", "G5", "Y7", "B3", "Y3", "G8"], bob=["W+4", "R4", "G1", "G2", "Y5", "Y6", "B9"]
        ),
        {"by": "ann", "play": "R+2"},
        {"by": "bob", "play": "W+4", "colour": "G"},
        {"by": "cy", "accept": True, "cards": {"cy": ["R2", "R3", "G6", "G7", "B1", "B2"]}},
        {"by": "ann", "play": "G5"},
    )
    assert found(report) == []
    assert sizes(report) == {"ann": 5, "bob": 6, "cy": 13}
    assert report["final"]["turn"] == "bob"


def test_a_draw_two_on_a_wild_draw_four_never_stacks() -> None:
    report = verify(
        header({"stacking": "any"}),
        round_line(
            ann=["W+4", "R1", "G5", "Y7", "B3", "Y3", "G8"], bob=["G+2", "R4", "G1", "G2", "Y5", "Y6", "B9"]
        ),
        {"by": "ann", "play": "W+4", "colour": "G"},
        {"by": "bob", "play": "G+2"},
    )
    assert found(report) == [(4, "house.stacking")]


def test_a_challenge_by_a_player_who_stacked_breaks_stacking_and_changes_nothing() -> None:
    report = verify(
        header({"stacking": "draw-four"}),
        round_line(
            ann=["W+4", "R1", "G5", "Y7", "B3", "Y3", "G8"], bob=["W+4", "R4", "G1", "G2", "Y5", "Y6", "B9"]
        ),
        {"by": "ann", "play": "W+4", "colour": "G"},
        {"by": "bob", "play": "W+4", "colour": "Y"},
        {"by": "bob", "challenge": True},  # bob answered ann's W+4 by stacking on it
        {"by": "cy", "accept": True, "cards": {"cy": ["R2", "R3", "G6", "G7", "B1", "B2", "Y1", "Y2"]}},
    )
    assert found(report) == [(5, "house.stacking")]
    (ruling,) = report["rulings"]
    assert (ruling["line"], ruling["by"], ruling["against"]) == (5, "bob", "ann")
    assert (ruling["verdict"], ruling["rule"]) == ("failed", "house.stacking")
    assert ruling["evidence"] == {"played_at": 4}  # no hand shown: the challenge was not heard
    assert sizes(report) == {"ann": 6, "bob": 6, "cy": 15}
    assert report["final"]["turn"] == "ann"


def test_a_challenge_under_wd4_any_time_is_refused_and_the_victim_still_answers() -> None:
    report = verify(
        header({"wd4_any_time": True}),
        round_line(ann=["W+4", "R1", "G5", "Y7", "B3", "Y3", "G8"]),  # ann holds R1: illegal by the book
        {"by": "ann", "play": "W+4", "colour": "G"},
        {"by": "bob", "challenge": True},
        {"by": "bob", "accept": True, "cards": {"bob": ["R2", "R3", "G6", "G7"]}},
        {"by": "cy", "play": "G3"},
    )
    assert found(report) == [(4, "house.wd4-any-time")]
    (ruling,) = report["rulings"]
    assert (ruling["by"], ruling["against"], ruling["verdict"]) == ("bob", "ann", "failed")
    assert ruling["rule"] == "house.wd4-any-time"
    assert ruling["evidence"] == {"played_at": 3}  # ann's hand is not shown: it does not matter here
    assert ruling["applied_ok"] is None
    assert sizes(report) == {"ann": 6, "bob": 11, "cy": 6}  # the challenge moved no card
    assert report["final"]["turn"] == "ann"


ANN_R5 = ["R5", "R1", "G5", "Y7", "B3", "Y3", "G8"]
CY_R5 = ["R5", "G4", "Y8", "Y9", "B5", "B6", "R8"]


@pytest.mark.parametrize(
    ("hands", "lines", "line", "reason"),
    [
        # cy's R6 is not identical to ann's R5 (same colour is not enough).
        (
            {"cy": ["R6", "G4", "Y8", "Y9", "B5", "B6", "R8"]},
            [{"by": "ann", "play": "R5"}, {"by": "cy", "play": "R6", "jump_in": True}],
            4,
            "not identical",
        ),
        # ann jumps in on her own R5.
        (
            {"ann": ["R5", "R5", "G5", "Y7", "B3", "Y3", "G8"]},
            [{"by": "ann", "play": "R5"}, {"by": "ann", "play": "R5", "jump_in": True}],
            4,
            "another player's card",
        ),
        # bob drew after ann's R5 (a turn action): too late for anyone to jump in on it.
        (
            {"cy": CY_R5},
            [
                {"by": "ann", "play": "R5"},
                {"by": "bob", "draw": True, "cards": ["G6"]},
                {"by": "cy", "play": "R5", "jump_in": True},
            ],
            5,
            "too late",
        ),
    ],
    ids=["not-identical", "own-card", "too-late"],
)
def test_a_bad_jump_in_breaks_jump_in(
    hands: dict[str, list[str]], lines: list[dict[str, Any]], line: int, reason: str
) -> None:
    report = verify(header({"jump_in": True}), round_line(**{"ann": ANN_R5, **hands}), *lines)
    assert found(report) == [(line, "house.jump-in")]
    assert reason in report["violations"][0]["message"]
    # As the table did: the card went down and play went on from the jumper.
    jumper = lines[-1]["by"]
    assert report["final"]["top"] == lines[-1]["play"]
    assert report["final"]["turn"] == {"ann": "bob", "cy": "ann"}[jumper]


def test_no_jump_in_while_a_penalty_waits() -> None:
    report = verify(
        header({"jump_in": True, "stacking": "draw-two"}),
        round_line(
            ann=["R+2", "R1", "G5", "Y7", "B3", "Y3", "G8"], cy=["R+2", "G4", "Y8", "Y9", "B5", "B6", "R8"]
        ),
        {"by": "ann", "play": "R+2"},
        {"by": "cy", "play": "R+2", "jump_in": True},
    )
    assert found(report) == [(4, "house.jump-in")]


def test_an_identical_card_out_of_turn_without_the_flag_breaks_turn_order() -> None:
    report = verify(
        header({"jump_in": True}),
        round_line(cy=CY_R5),
        {"by": "ann", "play": "R5"},
        {"by": "cy", "play": "R5"},  # a jump-in would have said so
    )
    assert found(report) == [(4, "turn.order")]


def test_a_jump_in_in_a_game_without_jumping_in_breaks_turn_order() -> None:
    report = verify(
        header({}),
        round_line(cy=CY_R5),
        {"by": "ann", "play": "R5"},
        {"by": "cy", "play": "R5", "jump_in": True},
    )
    assert found(report) == [(4, "turn.order")]
    assert report["final"]["turn"] == "ann"  # followed as the table did: play went on from cy


def test_a_seven_without_a_target_breaks_seven_o_and_swaps_nothing() -> None:
    report = verify(
        header({"seven_o": True}),
        round_line(ann=["R7", "R1", "G5", "Y7", "B3", "Y3", "G8"]),
        {"by": "ann", "play": "R7"},
        {"by": "bob", "play": "R3"},
    )
    assert found(report) == [(3, "house.seven-o")]
    assert hand(report, "ann") == Counter(["R1", "G5", "Y7", "B3", "Y3", "G8"])
    assert hand(report, "cy") == Counter(HANDS["cy"])


def test_a_zero_passes_every_hand_on_in_the_direction_of_play() -> None:
    report = verify(
        header({"seven_o": True}),
        round_line(ann=["R0", "R1", "G5", "Y7", "B3", "Y3", "G8"]),
        {"by": "ann", "play": "R0"},
    )
    assert found(report) == []
    # Clockwise: ann's hand goes to bob, bob's to cy, cy's to ann.
    assert hand(report, "bob") == Counter(["R1", "G5", "Y7", "B3", "Y3", "G8"])
    assert hand(report, "cy") == Counter(HANDS["bob"])
    assert hand(report, "ann") == Counter(HANDS["cy"])


def test_stopping_a_draw_to_match_early_breaks_draw_to_match() -> None:
    report = verify(
        header({"draw_to_match": True}),
        round_line(),
        {"by": "ann", "draw": True, "cards": ["G6"]},  # not red, not a 7: ann had to go on drawing
        {"by": "bob", "play": "R3"},
    )
    assert found(report) == [(3, "house.draw-to-match")]
    assert hand(report, "ann") == Counter([*HANDS["ann"], "G6"])  # as the table did: one card, turn over
    assert report["final"]["turn"] == "cy"


def test_drawing_past_a_playable_card_breaks_draw_to_match_at_its_line() -> None:
    report = verify(
        header({"draw_to_match": True}),
        round_line(),
        {"by": "ann", "draw": True, "cards": ["R2", "G6"]},  # R2 is red: the drawing stops there
    )
    assert found(report) == [(3, "house.draw-to-match")]  # one mistake, one finding
    assert "R2" in report["violations"][0]["message"]


def test_drawing_past_a_playable_card_is_followed_as_the_table_did() -> None:
    report = verify(
        header({"draw_to_match": True}),
        round_line(),
        {"by": "ann", "draw": True, "cards": ["R2", "G6"]},
    )
    assert found(report) == [(3, "house.draw-to-match")]
    assert hand(report, "ann") == Counter([*HANDS["ann"], "R2", "G6"])


def classic_deck(first: str, pile_top: list[str]) -> list[str]:
    """A whole classic deck, top first, that deals ``HANDS`` (one card at a time from ann, left of the
    dealer cy), flips ``first`` and then has ``pile_top`` on top of the draw pile."""
    deck = Counter(
        [f"{c}0" for c in "RYGB"]
        + [f"{c}{face}" for c in "RYGB" for face in [*map(str, range(1, 10)), "S", "R", "+2"] for _ in (1, 2)]
        + ["W", "W+4"] * 4
    )
    dealt = [HANDS[name][k] for k in range(7) for name in ("ann", "bob", "cy")]
    order = [*dealt, first, *pile_top]
    deck.subtract(order)
    return order + sorted(deck.elements())


def deck_round(first: str, pile_top: list[str]) -> str:
    return json.dumps({"round": 1, "dealer": "cy", "deck": classic_deck(first, pile_top)})


@pytest.mark.parametrize(
    ("listed", "why"),
    [
        (["G6"], "drawing stopped at G6 before a playable card came"),
        (["G6", "B8", "R2", "Y4"], "drawing stops at the playable R2"),
    ],
    ids=["stopped-early", "past-a-playable-card"],
)
def test_with_a_deck_a_draw_line_that_stops_elsewhere_breaks_draw_to_match(
    listed: list[str], why: str
) -> None:
    # The deck has G6 B8 R2 Y4 on top of the pile: on R7, G6 and B8 do not match, R2 does.
    report = verify(
        header({"draw_to_match": True}),
        deck_round("R7", ["G6", "B8", "R2", "Y4"]),
        {"by": "ann", "draw": True, "cards": listed},
    )
    assert found(report) == [(3, "house.draw-to-match")]
    assert why in report["violations"][0]["message"]


def test_with_a_deck_a_draw_to_match_listed_as_drawn_is_valid() -> None:
    report = verify(
        header({"draw_to_match": True}),
        deck_round("R7", ["G6", "B8", "R2", "Y4"]),
        {"by": "ann", "draw": True, "cards": ["G6", "B8", "R2"]},
        {"by": "ann", "play": "R2"},
    )
    assert found(report) == []
    assert hand(report, "ann") == Counter([*HANDS["ann"], "G6", "B8"])
    assert report["final"]["turn"] == "bob"


@pytest.mark.parametrize("listed", [["G6"], ["G6", "B8", "R2", "Y4"]], ids=["stopped-early", "past"])
def test_with_a_deck_a_draw_that_stopped_elsewhere_is_followed_as_the_table_did(listed: list[str]) -> None:
    report = verify(
        header({"draw_to_match": True}),
        deck_round("R7", ["G6", "B8", "R2", "Y4"]),
        {"by": "ann", "draw": True, "cards": listed},
    )
    assert hand(report, "ann") == Counter([*HANDS["ann"], *listed])


def test_keeping_a_playable_drawn_card_under_force_play_breaks_force_play() -> None:
    report = verify(
        header({"force_play": True}),
        round_line(),
        {"by": "ann", "draw": True, "cards": ["R2"]},
        {"by": "ann", "pass": True},  # R2 is red on R7: it had to be played
        {"by": "bob", "play": "R3"},
    )
    assert found(report) == [(4, "house.force-play")]
    assert hand(report, "ann") == Counter([*HANDS["ann"], "R2"])
    assert report["final"]["turn"] == "cy"


def test_under_draw_to_match_and_force_play_the_card_that_ends_the_drawing_must_be_played() -> None:
    report = verify(
        header({"draw_to_match": True, "force_play": True}),
        round_line(),
        {"by": "ann", "draw": True, "cards": ["G6", "B8", "R2"]},
        {"by": "ann", "play": "R2"},
    )
    assert found(report) == []
    assert hand(report, "ann") == Counter([*HANDS["ann"], "G6", "B8"])


def test_an_attack_stack_is_taken_as_presses_listed_on_the_accept_line() -> None:
    # UNO Attack: Hit 2 on Hit 2, 4 presses pending against cy; without a deck the accept lists each
    # press's cards.
    report = verify(
        header({"stacking": "draw-two"}, "attack"),
        json.dumps(
            {
                "round": 1,
                "dealer": "cy",
                "hands": {
                    "ann": ["RH2", "R1", "G5", "Y7", "B3", "Y3", "G8"],
                    "bob": ["BH2", "R4", "G1", "G2", "Y5", "Y6", "B9"],
                    "cy": ["G3", "G4", "Y8", "Y9", "B5", "B6", "R8"],
                },
                "first": ["R7"],
            }
        ),
        {"by": "ann", "play": "RH2"},
        {"by": "bob", "play": "BH2"},
        {"by": "cy", "accept": True, "fired": [[], ["R2", "R3"], [], ["G6"]]},
        {"by": "ann", "play": "B3"},
    )
    assert found(report) == []
    assert hand(report, "cy") == Counter([*HANDS["cy"], "R2", "R3", "G6"])
    assert report["final"]["turn"] == "bob"
