"""The game record format ``uno-game-record/1`` (``shared/RECORD.md``): reading, writing, rejecting."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from service.records.record import (
    Action,
    ActionKind,
    GameRecord,
    RecordError,
    RecordHeader,
    RoundBlock,
    RoundLine,
    read_record,
    read_record_file,
    write_record,
)
from service.rules.cards import Colour, card, cards
from service.rules.options import Variant

DATA = Path(__file__).parent / "data" / "records"

HEADER = (
    '{"record": "uno-game-record/1", "variant": "classic", "players": ["ann", "bob", "cy"], "options": {}}'
)
HANDS = '{"ann": ["R1", "R2"], "bob": ["G1", "G2"], "cy": ["B1", "B2"]}'
ROUND = '{"round": 1, "dealer": "cy", "hands": ' + HANDS + ', "first": ["Y5"]}'
DECK_ROUND = '{"round": 1, "dealer": "cy", "deck": ["R1", "G2", "W", "B+2"]}'

SEED = bytes.fromhex("00ff10")
SEED_SHA256 = hashlib.sha256(SEED).hexdigest()

# Every action and modifier, a round without a deck and one with. The reader does not judge rules or deck
# composition, so the cards need not make a legal game. Written in canonical form.
RICH = "".join(
    line + "\n"
    for line in [
        '{"record": "uno-game-record/1", "variant": "attack", "players": ["ann", "bob", "cy"], '
        '"options": {"attack_edition": 2010, "launcher_weights": [1, 2]}, '
        f'"seed_sha256": "{SEED_SHA256}", "seed": "00ff10"}}',
        '{"round": 1, "dealer": "cy", "hands": {"ann": ["R1", "WAA"], "bob": ["G1"], "cy": ["WIB"]}, '
        '"first": ["RH2"], "cards": {"bob": ["G7"]}, "fired": [["R1"], []]}',
        '{"by": "ann", "play": "WAA", "colour": "G", "uno": true, "target": "cy", '
        '"fired": [["B2", "B3"], []]}',
        '{"by": "bob", "press": true, "fired": ["Y1"]}',
        '{"by": "cy", "press": true, "fired": []}',
        '{"by": "ann", "call": "uno"}',
        '{"by": "bob", "catch": "ann", "applied": "penalty", "fired": [["G1"], ["G2", "G3"]]}',
        '{"by": "cy", "play": "WIB", "flip": "G5", "cards": {"ann": ["R2"]}}',
        '{"by": "cy", "choose": {"target": "bob"}, "cards": {"bob": ["Y2"]}}',
        '{"by": "ann", "choose": {"colour": "B"}}',
        '{"by": "ann", "draw": true, "cards": ["B9"]}',
        '{"by": "ann", "pass": true}',
        '{"by": "bob", "play": "W+4", "colour": "Y"}',
        '{"by": "cy", "challenge": true, "applied": "failed", '
        '"cards": {"cy": ["R9", "R8", "R7", "R6", "R5", "R4"]}}',
        '{"by": "ann", "accept": true, "cards": {"ann": ["Y6", "Y7", "Y8", "Y9"]}}',
        '{"reshuffle": ["R1", "G2"]}',
        '{"by": "bob", "reshuffle": []}',
        '{"by": "bob", "draw": true, "cards": {"ann": ["R3"], "cy": ["R1"]}}',
        '{"round": 2, "dealer": "ann", "deck": ["R7", "G2", "WH4"], "fired": [2, 0]}',
        '{"by": "bob", "press": true, "fired": 3}',
        '{"by": "cy", "play": "WH4", "colour": "R", "fired": [1, 0, 2, 0]}',
        '{"by": "ann", "catch": "cy", "applied": "none"}',
    ]
)

# RICH as a table might write it: comments, blank lines, CRLF, keys out of order, defaults spelt out,
# the alternative spellings (per-player cards on a draw, upper-case hex), cards in another order.
NOISY = "\r\n".join(
    [
        "# a hand-written copy of RICH",
        '{"players": ["ann", "bob", "cy"], "record": "uno-game-record/1", "variant": "attack", '
        '"options": {"launcher_weights": [1, 2], "attack_edition": 2010}, '
        f'"seed": "00FF10", "seed_sha256": "{SEED_SHA256.upper()}"}}',
        "",
        '{"round": 1, "first": ["RH2"], "hands": {"cy": ["WIB"], "bob": ["G1"], "ann": ["R1", "WAA"]}, '
        '"dealer": "cy", "fired": [["R1"], []], "cards": {"bob": ["G7"]}}',
        '  {"fired": [["B2", "B3"], []], "target": "cy", "uno": true, "colour": "G", '
        '"play": "WAA", "by": "ann"}',
        '{"by": "bob", "press": true, "fired": ["Y1"]}',
        '{"by": "cy", "press": true, "fired": []}',
        '{"by": "ann", "call": "uno"}',
        '{"by": "bob", "catch": "ann", "applied": "penalty", "fired": [["G1"], ["G2", "G3"]]}',
        '{"by": "cy", "play": "WIB", "flip": "G5", "cards": {"ann": ["R2"]}, "uno": false}',
        '{"by": "cy", "choose": {"target": "bob"}, "cards": {"bob": ["Y2"]}}',
        '{"by": "ann", "choose": {"colour": "B"}}',
        '{"by": "ann", "draw": true, "cards": {"ann": ["B9"]}}',
        '{"by": "ann", "pass": true}',
        '{"by": "bob", "play": "W+4", "colour": "Y", "cards": {}, "fired": []}',
        '{"by": "cy", "challenge": true, "applied": "failed", '
        '"cards": {"cy": ["R9", "R8", "R7", "R6", "R5", "R4"]}}',
        '{"by": "ann", "accept": true, "cards": {"ann": ["Y6", "Y7", "Y8", "Y9"]}}',
        '{"reshuffle": ["R1", "G2"]}',
        '{"by": "bob", "reshuffle": []}',
        '{"by": "bob", "draw": true, "cards": {"cy": ["R1"], "ann": ["R3"]}}',
        "    # round two is dealt from a deck",
        '{"round": 2, "dealer": "ann", "deck": ["R7", "G2", "WH4"], "fired": [2, 0]}',
        '{"by": "bob", "press": true, "fired": 3}',
        '{"by": "cy", "play": "WH4", "colour": "R", "fired": [1, 0, 2, 0]}',
        '{"by": "ann", "catch": "cy", "applied": "none"}',
    ]
)


def text(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def after_round(line: str) -> str:
    """A record whose first round (without a deck) has the single action ``line``, on line 3."""
    return text(HEADER, ROUND, line)


def after_deck(line: str) -> str:
    """A record whose first round (with a deck) has the single action ``line``, on line 3."""
    return text(HEADER, DECK_ROUND, line)


def lines_of(record: GameRecord) -> list[int]:
    out = [record.header.line]
    for block in record.rounds:
        out.append(block.start.line)
        out.extend(action.line for action in block.actions)
    return out


# --- The shared examples -------------------------------------------------------------------------------


def test_reads_the_classic_wd4_example() -> None:
    record = read_record_file(DATA / "classic_wd4_upheld.jsonl")

    assert record.header == RecordHeader(
        Variant.CLASSIC, ("ann", "bob", "cy"), {"dealer_selection": "given"}, None, None, line=1
    )
    assert record.header.line == 1
    [block] = record.rounds
    assert block.start == RoundLine(
        round=1,
        dealer="cy",
        deck=None,
        hands={
            "ann": cards("W+4 B2 G5 Y7 R1 Y3 G8"),
            "bob": cards("R3 R4 G1 G2 Y5 Y6 B9"),
            "cy": cards("G3 G4 Y8 Y9 B5 B6 R8"),
        },
        first=(card("B3"),),
        cards={},
        fired=(),
        line=2,
    )
    assert block.start.line == 2
    assert block.actions == (
        Action(3, "ann", ActionKind.PLAY, card=card("W+4"), colour=Colour.RED),
        Action(4, "bob", ActionKind.CHALLENGE, cards={"ann": cards("R5 R6 R7 G9")}),
        Action(5, "bob", ActionKind.PLAY, card=card("R3")),
    )
    assert [action.line for action in block.actions] == [3, 4, 5]
    # The expected verdicts refer to the lines this reader numbers.
    expected = json.loads((DATA / "classic_wd4_upheld.expected.json").read_text(encoding="utf-8"))
    by_line = {action.line: action for action in block.actions}
    [ruling] = expected["rulings"]
    assert ruling["kind"] == "wd4-challenge"
    assert by_line[ruling["line"]].kind is ActionKind.CHALLENGE
    assert set(expected["hand_sizes"]) == set(record.header.players)


def test_reads_the_sonic_scoring_example() -> None:
    record = read_record_file(DATA / "sonic_scoring_230.jsonl")

    assert record.header.variant is Variant.SONIC
    assert record.header.players == ("ann", "bob")
    assert record.header.options == {}
    [block] = record.rounds
    assert block.start.dealer == "bob"
    assert block.start.first == (card("R3"),)
    assert block.start.hands is not None
    assert block.start.hands["ann"] == cards("R5 RS RS RR RR R+2 R+2")
    assert [action.line for action in block.actions] == list(range(3, 11))
    assert [(action.by, action.card) for action in block.actions[:2]] == [
        ("ann", card("R5")),
        ("bob", card("R1")),
    ]
    assert [action.line for action in block.actions if action.uno] == [9]
    assert {action.line: action.cards for action in block.actions if action.cards} == {
        9: {"bob": cards("W W+4")},
        10: {"bob": cards("WVL G9")},
    }
    expected = json.loads((DATA / "sonic_scoring_230.expected.json").read_text(encoding="utf-8"))
    assert expected["winner"] in record.header.players


@pytest.mark.parametrize("name", ["classic_wd4_upheld", "sonic_scoring_230"])
def test_examples_are_already_canonical(name: str) -> None:
    original = (DATA / f"{name}.jsonl").read_text(encoding="utf-8")
    record = read_record(original)

    assert write_record(record) == original
    assert read_record(write_record(record)) == record


# --- Every field, round trip -----------------------------------------------------------------------------


def test_reads_every_action_and_modifier() -> None:
    record = read_record(RICH)

    header = record.header
    assert header.variant is Variant.ATTACK
    assert header.options == {"attack_edition": 2010, "launcher_weights": [1, 2]}
    assert header.seed == SEED
    assert header.seed_sha256 == SEED_SHA256
    first, second = record.rounds
    assert first.start.cards == {"bob": (card("G7"),)}
    assert first.start.fired == ((card("R1"),), ())
    actions = {action.line: action for action in first.actions + second.actions}
    assert actions[3] == Action(
        3,
        "ann",
        ActionKind.PLAY,
        card=card("WAA"),
        colour=Colour.GREEN,
        uno=True,
        target="cy",
        fired=(cards("B2 B3"), ()),
    )
    assert actions[4].kind is ActionKind.PRESS
    assert actions[4].fired == ((card("Y1"),),)
    assert actions[5].fired == ((),)
    assert actions[6].kind is ActionKind.CALL_UNO
    assert (actions[7].kind, actions[7].target, actions[7].applied) == (ActionKind.CATCH, "ann", "penalty")
    assert actions[7].fired == ((card("G1"),), cards("G2 G3"))
    assert (actions[8].flip, actions[8].cards) == (card("G5"), {"ann": (card("R2"),)})
    assert (actions[9].kind, actions[9].target, actions[9].colour) == (ActionKind.CHOOSE, "bob", None)
    assert (actions[10].target, actions[10].colour) == (None, Colour.BLUE)
    assert (actions[11].kind, actions[11].cards) == (ActionKind.DRAW, {"ann": (card("B9"),)})
    assert actions[12].kind is ActionKind.PASS
    assert (actions[14].kind, actions[14].applied) == (ActionKind.CHALLENGE, "failed")
    assert actions[15].kind is ActionKind.ACCEPT
    assert (actions[16].by, actions[16].pile) == (None, cards("R1 G2"))
    assert (actions[17].by, actions[17].pile) == ("bob", ())
    assert actions[18].cards == {"ann": (card("R3"),), "cy": (card("R1"),)}
    assert second.start == RoundLine(2, "ann", cards("R7 G2 WH4"), None, None, {}, (2, 0), line=19)
    assert actions[20].fired == (3,)
    assert actions[21].fired == (1, 0, 2, 0)
    assert (actions[22].target, actions[22].applied) == ("cy", "none")


def test_writes_every_action_and_modifier_canonically() -> None:
    record = read_record(RICH)

    assert write_record(record) == RICH
    assert read_record(write_record(record)) == record


def test_any_spelling_reads_as_the_canonical_record() -> None:
    canonical = read_record(RICH)
    noisy = read_record(NOISY)

    assert noisy == canonical
    assert write_record(noisy) == RICH
    # Equality ignores line numbers, which differ: comments and blank lines count.
    assert lines_of(canonical) == list(range(1, 23))
    assert lines_of(noisy)[:4] == [2, 4, 5, 6]
    assert lines_of(noisy)[-4:] == [22, 23, 24, 25]


def test_equality_ignores_line_numbers_only() -> None:
    action = Action(3, "ann", ActionKind.PLAY, card=card("R1"))

    assert dataclasses.replace(action, line=30) == action
    assert dataclasses.replace(action, card=card("R2")) != action
    assert dataclasses.replace(action, uno=True) != action


def test_line_numbers_count_physical_lines_only() -> None:
    # U+2028 and U+0085 are line breaks to str.splitlines but not to JSON Lines (a player name may not
    # hold them, a comment line may).
    odd = "# an\u2028n\u0085a"
    record_text = text(HEADER, odd, ROUND, '{"by": "bob", "pass": true}')
    record = read_record(record_text)

    assert lines_of(record) == [1, 3, 4]
    with pytest.raises(RecordError) as caught:
        read_record(record_text + '{"by": "dan", "pass": true}\n')
    assert caught.value.line == 5


def test_reads_a_file_with_a_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "game.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + text(HEADER, ROUND).encode())

    assert read_record_file(path).rounds[0].start.dealer == "cy"


def test_reports_bytes_that_are_not_utf8_by_line(tmp_path: Path) -> None:
    path = tmp_path / "game.jsonl"
    path.write_bytes(text(HEADER, ROUND).encode() + b'{"by": "ann", "play": "\xff"}\n')

    with pytest.raises(RecordError) as caught:
        read_record_file(path)
    assert caught.value.line == 3
    assert "not UTF-8" in caught.value.message


# --- What the format allows beyond the canonical export ------------------------------------------------


def test_a_round_with_a_deck_may_still_list_cards_and_flips() -> None:
    record_text = text(
        HEADER,
        DECK_ROUND[:-1] + ', "cards": {"ann": ["R1", "G2"]}}',
        '{"by": "ann", "draw": true, "cards": ["R1"]}',
        '{"by": "bob", "play": "WIB", "flip": "G5", "cards": {"cy": ["B+2"]}}',
        '{"by": "cy", "play": "R+2", "cards": {"ann": ["W", "G2"]}}',
    )
    record = read_record(record_text)

    [block] = record.rounds
    assert block.start.deck == cards("R1 G2 W B+2")
    assert block.start.cards == {"ann": cards("R1 G2")}
    assert block.actions[0].cards == {"ann": (card("R1"),)}
    assert (block.actions[1].flip, block.actions[1].cards) == (card("G5"), {"cy": (card("B+2"),)})
    assert block.actions[2].cards == {"ann": cards("W G2")}
    assert write_record(record) == record_text
    assert read_record(write_record(record)) == record


SEEDED_HEADER = HEADER[:-1] + f', "seed_sha256": "{SEED_SHA256}", "seed": "00ff10"}}'


@pytest.mark.parametrize("round_line", [DECK_ROUND, ROUND], ids=["deck", "hands"])
def test_a_press_may_leave_fired_out_when_the_header_reveals_the_seed(round_line: str) -> None:
    record_text = text(SEEDED_HEADER, round_line, '{"by": "ann", "press": true}')
    record = read_record(record_text)

    [action] = record.rounds[0].actions
    assert (action.kind, action.fired) == (ActionKind.PRESS, ())
    assert write_record(record) == record_text


def test_a_press_without_fired_needs_a_seeded_header() -> None:
    for round_line in (DECK_ROUND, ROUND):
        with pytest.raises(RecordError) as caught:
            read_record(text(HEADER, round_line, '{"by": "ann", "press": true}'))
        assert caught.value.line == 3
        assert "a 'press' line needs 'fired'" in caught.value.message
        assert "unless the header has a seed" in caught.value.message


# --- The writer refuses what it cannot write faithfully ---------------------------------------------------


def _with_action(action: Action) -> GameRecord:
    record = read_record(text(HEADER, ROUND))
    return GameRecord(record.header, (RoundBlock(record.rounds[0].start, (action,)),))


@pytest.mark.parametrize(
    ("action", "fragment"),
    [
        (Action(0, "dan", ActionKind.PASS), "'by' must name a player"),
        (Action(0, "ann", ActionKind.PLAY), "'play' must be a card token, not null"),
        (Action(0, "ann", ActionKind.PRESS), "a 'press' line needs 'fired'"),
        (Action(0, "ann", ActionKind.PRESS, fired=((), ())), "'fired' must be a list of card tokens"),
        (Action(0, "ann", ActionKind.CHOOSE), "'choose' must be"),
        (Action(0, "ann", ActionKind.DRAW, colour=Colour.RED), "key 'colour' does not go on a 'draw' line"),
        (Action(0, "ann", ActionKind.DRAW, card=card("R1")), "cannot express"),
        (Action(0, "ann", ActionKind.PASS, pile=()), "cannot express"),
    ],
)
def test_writer_rejects_a_malformed_model(action: Action, fragment: str) -> None:
    with pytest.raises(RecordError) as caught:
        write_record(_with_action(action))
    assert caught.value.line == 3
    assert fragment in caught.value.message


def test_writer_rejects_options_that_do_not_read_back() -> None:
    record = read_record(text(HEADER))
    header = dataclasses.replace(record.header, options={"launcher_weights": (1, 2)})

    with pytest.raises(RecordError) as caught:
        write_record(GameRecord(header, ()))
    assert caught.value.line == 1
    assert "cannot express" in caught.value.message


# --- Malformed records ---------------------------------------------------------------------------------

ERRORS = [
    # JSON
    ("invalid-json", after_round('{"by": "ann", "play": "R1"'), 3, "invalid JSON"),
    ("not-an-object", after_round('["play", "R1"]'), 3, "expected a JSON object, not an array"),
    ("duplicate-key", after_round('{"by": "ann", "by": "bob", "pass": true}'), 3, "duplicate key 'by'"),
    ("nan", text(HEADER.replace("{}", '{"target_score": NaN}')), 1, "NaN is not a JSON number"),
    # header
    ("empty-file", "", 1, "no header"),
    ("comments-only", "# nothing\n\n   # here\n", 4, "no header"),
    ("no-header", text("# a comment", ROUND), 2, "the first line must be the header"),
    (
        "wrong-record",
        text(HEADER.replace("/1", "/2")),
        1,
        "unsupported 'record' the string 'uno-game-record/2'",
    ),
    ("second-header", after_round(HEADER), 3, "a header may only be the first line"),
    ("no-variant", text(HEADER.replace('"variant": "classic", ', "")), 1, "the header has no 'variant'"),
    ("variant-type", text(HEADER.replace('"classic"', "1")), 1, "'variant' must be a string"),
    ("unknown-variant", text(HEADER.replace("classic", "flip")), 1, "unknown variant 'flip'"),
    (
        "unknown-option",
        text(HEADER.replace("{}", '{"stack_sevens": true}')),
        1,
        "unknown option 'stack_sevens'",
    ),
    ("bad-house-rule", text(HEADER.replace("{}", '{"stacking": true}')), 1, "option stacking must be one of"),
    ("bad-option", text(HEADER.replace("{}", '{"target_score": 0}')), 1, "option target_score must be"),
    ("options-type", text(HEADER.replace("{}", "[]")), 1, "'options' must be an object"),
    ("one-player", text(HEADER.replace('"bob", "cy"', '"bob"').replace('"ann", ', "")), 1, "not 1 players"),
    (
        "eleven-players",
        text(HEADER.replace('"cy"', ", ".join(f'"p{i}"' for i in range(9)))),
        1,
        "list of 2 to 10 names, not 11 players",
    ),
    ("players-type", text(HEADER.replace('["ann", "bob", "cy"]', '"ann"')), 1, "'players' must be a list"),
    ("no-players", text(HEADER.replace('"players": ["ann", "bob", "cy"], ', "")), 1, "not null"),
    ("duplicate-player", text(HEADER.replace('"cy"', '"ann"')), 1, "player 'ann' is listed twice"),
    ("empty-player", text(HEADER.replace('"cy"', '""')), 1, "printable characters, not the string ''"),
    ("player-type", text(HEADER.replace('"cy"', "7")), 1, "printable characters, not the number 7"),
    ("player-long", text(HEADER.replace('"cy"', '"' + "c" * 65 + '"')), 1, "a name of 1 to 64 printable"),
    ("player-nul", text(HEADER.replace('"cy"', '"c\\u0000y"')), 1, "a name of 1 to 64 printable"),
    ("player-newline", text(HEADER.replace('"cy"', '"c\\ny"')), 1, "a name of 1 to 64 printable"),
    ("player-spaces", text(HEADER.replace('"cy"', '"   "')), 1, "a name of 1 to 64 printable"),
    ("seed-hex", text(HEADER[:-1] + ', "seed": "xyz1"}'), 1, "'seed' must be a non-empty string of hex"),
    ("seed-odd", text(HEADER[:-1] + ', "seed": "abc"}'), 1, "'seed' must be a non-empty string of hex"),
    ("seed-sha256", text(HEADER[:-1] + ', "seed_sha256": "abcd"}'), 1, "'seed_sha256' must be 64 hex digits"),
    (
        "seed-mismatch",
        text(HEADER[:-1] + f', "seed_sha256": "{SEED_SHA256}", "seed": "00ff11"}}'),
        1,
        "'seed' does not match 'seed_sha256'",
    ),
    # cards
    (
        "card-in-hands",
        text(HEADER, ROUND.replace('"R2"', '"R10"')),
        2,
        "unknown card token 'R10' in 'hands.ann'",
    ),
    ("card-in-first", text(HEADER, ROUND.replace('"Y5"', '"Y"')), 2, "unknown card token 'Y' in 'first'"),
    (
        "card-in-deck",
        text(HEADER, DECK_ROUND.replace('"W"', '"W+2"')),
        2,
        "unknown card token 'W+2' in 'deck'",
    ),
    ("card-in-play", after_round('{"by": "ann", "play": "RW"}'), 3, "unknown card token 'RW' in 'play'"),
    (
        "card-type",
        after_round('{"by": "ann", "play": 7}'),
        3,
        "'play' must be a card token, not the number 7",
    ),
    (
        "card-in-cards",
        after_round('{"by": "ann", "play": "R+2", "cards": {"bob": ["G+4"]}}'),
        3,
        "unknown card token 'G+4' in 'cards.bob'",
    ),
    ("card-in-flip", after_round('{"by": "ann", "play": "WIB", "flip": "P1"}'), 3, "'P1' in 'flip'"),
    ("card-in-fired", after_round('{"by": "ann", "press": true, "fired": ["B"]}'), 3, "'B' in 'fired'"),
    ("card-in-pile", after_round('{"reshuffle": ["R1", "S"]}'), 3, "'S' in 'reshuffle'"),
    (
        "cards-type",
        after_round('{"by": "ann", "play": "R+2", "cards": ["G1"]}'),
        3,
        "'cards' must be an object",
    ),
    (
        "deck-type",
        text(HEADER, DECK_ROUND.replace('["R1", "G2", "W", "B+2"]', '"R1"')),
        2,
        "'deck' must be a list",
    ),
    # players named on lines
    ("by", after_round('{"by": "dan", "pass": true}'), 3, "'by' must name a player (ann, bob, cy)"),
    (
        "dealer",
        text(HEADER, ROUND.replace('"dealer": "cy"', '"dealer": "dan"')),
        2,
        "'dealer' must name a player",
    ),
    ("play-target", after_round('{"by": "ann", "play": "WAA", "target": "dan"}'), 3, "'target' must name"),
    ("catch-target", after_round('{"by": "ann", "catch": "dan"}'), 3, "'catch' must name a player"),
    ("catch-type", after_round('{"by": "ann", "catch": true}'), 3, "'catch' must name a player"),
    ("choose-target", after_round('{"by": "ann", "choose": {"target": "dan"}}'), 3, "'choose.target' must"),
    (
        "cards-key",
        after_round('{"by": "ann", "play": "R+2", "cards": {"dan": ["G1"]}}'),
        3,
        "'cards' names 'dan', who is not a player",
    ),
    (
        "hands-key",
        text(HEADER, ROUND.replace('"cy": [', '"dan": [')),
        2,
        "'hands' names 'dan', who is not a player",
    ),
    # action keys
    ("no-action", after_round('{"by": "ann"}'), 3, "exactly one action key (play, draw, pass"),
    ("two-actions", after_round('{"by": "ann", "draw": true, "pass": true}'), 3, "found 'draw', 'pass'"),
    ("no-by", after_round('{"play": "R1"}'), 3, "a 'play' line needs 'by'"),
    ("by-type", after_round('{"by": null, "pass": true}'), 3, "'by' must name a player"),
    # value types
    ("draw-value", after_round('{"by": "ann", "draw": false}'), 3, "'draw' must be true, not false"),
    ("pass-value", after_round('{"by": "ann", "pass": "yes"}'), 3, "'pass' must be true, not the string"),
    ("press-value", after_round('{"by": "ann", "press": 1, "fired": []}'), 3, "'press' must be true"),
    ("challenge-value", after_round('{"by": "ann", "challenge": {}}'), 3, "'challenge' must be true"),
    ("accept-value", after_round('{"by": "ann", "accept": null}'), 3, "'accept' must be true, not null"),
    ("call-value", after_round('{"by": "ann", "call": "UNO"}'), 3, "'call' must be \"uno\""),
    ("colour-value", after_round('{"by": "ann", "play": "W", "colour": "P"}'), 3, "'colour' must be one"),
    ("choose-colour", after_round('{"by": "ann", "choose": {"colour": "r"}}'), 3, "'choose.colour' must"),
    ("choose-both", after_round('{"by": "ann", "choose": {"colour": "R", "target": "bob"}}'), 3, "'choose'"),
    ("choose-type", after_round('{"by": "ann", "choose": "R"}'), 3, "'choose' must be {\"colour\": C}"),
    ("uno-value", after_round('{"by": "ann", "play": "R1", "uno": 1}'), 3, "'uno' must be true or false"),
    (
        "catch-applied",
        after_round('{"by": "ann", "catch": "bob", "applied": "upheld"}'),
        3,
        "'applied' on a 'catch' line must be 'penalty' or 'none', not the string 'upheld'",
    ),
    (
        "challenge-applied",
        after_round('{"by": "ann", "challenge": true, "applied": null}'),
        3,
        "must be 'upheld' or 'failed', not null",
    ),
    ("reshuffle-value", after_round('{"reshuffle": true}'), 3, "'reshuffle' must be a list of card tokens"),
    ("press-no-fired", after_round('{"by": "ann", "press": true}'), 3, "a 'press' line needs 'fired'"),
    ("fired-negative", after_deck('{"by": "ann", "press": true, "fired": -1}'), 3, "a count of cards"),
    ("fired-bool", after_deck('{"by": "ann", "press": true, "fired": true}'), 3, "not true"),
    (
        "fired-entry",
        after_deck('{"by": "ann", "play": "WH4", "fired": [1, 2.5]}'),
        3,
        "'fired' must be a count of cards (a round with a deck), not the number 2.5",
    ),
    ("fired-type", after_deck('{"by": "ann", "play": "WH4", "fired": 4}'), 3, "one entry per press"),
    # how the round is dealt decides how pile cards are given
    ("fired-count-no-deck", after_round('{"by": "ann", "press": true, "fired": 2}'), 3, "without a deck"),
    ("fired-list-deck", after_deck('{"by": "ann", "press": true, "fired": ["R1"]}'), 3, "with a deck"),
    (
        "cards-type-with-deck",
        after_deck('{"by": "ann", "draw": true, "cards": "R1"}'),
        3,
        "'cards' must be an object",
    ),
    ("flip-card-with-deck", after_deck('{"by": "ann", "play": "WIB", "flip": "G"}'), 3, "'G' in 'flip'"),
    (
        "round-cards-player-with-deck",
        text(HEADER, DECK_ROUND[:-1] + ', "cards": {"dan": []}}'),
        2,
        "'cards' names 'dan', who is not a player",
    ),
    # a seed decides a press only when it is revealed
    (
        "press-no-fired-sha-only",
        text(HEADER[:-1] + f', "seed_sha256": "{SEED_SHA256}"}}', DECK_ROUND, '{"by": "ann", "press": true}'),
        3,
        "a 'press' line needs 'fired'",
    ),
    # unknown keys
    ("header-key", text(HEADER[:-1] + ', "date": "2024"}'), 1, "unknown key 'date' on the header"),
    ("round-key", text(HEADER, ROUND[:-1] + ', "note": 1}'), 2, "unknown key 'note' on a round line"),
    ("action-key", after_round('{"by": "ann", "plya": "R1"}'), 3, "unknown key 'plya' on an action line"),
    (
        "misplaced-key",
        after_round('{"by": "ann", "draw": true, "colour": "R"}'),
        3,
        "key 'colour' does not go",
    ),
    ("misplaced-applied", after_round('{"by": "ann", "play": "R1", "applied": "none"}'), 3, "'applied' does"),
    # rounds
    (
        "action-first",
        text(HEADER, '{"by": "ann", "play": "R1"}'),
        2,
        "an action line before the first round line",
    ),
    ("reshuffle-first", text(HEADER, "", '{"reshuffle": ["R1"]}'), 3, "before the first round line"),
    (
        "round-from-2",
        text(HEADER, ROUND.replace('"round": 1', '"round": 2')),
        2,
        "expected round 1, not the number 2",
    ),
    ("round-skipped", after_round(ROUND.replace('"round": 1', '"round": 3')), 3, "expected round 2, not"),
    ("round-repeated", after_round(ROUND), 3, "expected round 2, not the number 1"),
    (
        "round-string",
        text(HEADER, ROUND.replace('"round": 1', '"round": "1"')),
        2,
        "expected round 1, not the string",
    ),
    (
        "round-bool",
        text(HEADER, ROUND.replace('"round": 1', '"round": true')),
        2,
        "expected round 1, not true",
    ),
    ("no-dealer", text(HEADER, ROUND.replace('"dealer": "cy", ', "")), 2, "a round line needs a 'dealer'"),
    ("no-deal", text(HEADER, '{"round": 1, "dealer": "cy"}'), 2, "needs a 'deck', or 'hands' and 'first'"),
    (
        "no-first",
        text(HEADER, ROUND.replace(', "first": ["Y5"]', "")),
        2,
        "needs a 'deck', or 'hands' and 'first'",
    ),
    ("deck-and-hands", text(HEADER, DECK_ROUND[:-1] + ', "hands": ' + HANDS + "}"), 2, "not both"),
    (
        "hands-missing",
        text(HEADER, ROUND.replace(', "cy": ["B1", "B2"]', "")),
        2,
        "every player; missing: cy",
    ),
    ("first-empty", text(HEADER, ROUND.replace('["Y5"]', "[]")), 2, "'first' must list at least one card"),
]


@pytest.mark.parametrize(
    ("record", "line", "fragment"), [case[1:] for case in ERRORS], ids=[c[0] for c in ERRORS]
)
def test_rejects_a_malformed_record(record: str, line: int, fragment: str) -> None:
    with pytest.raises(RecordError) as caught:
        read_record(record)
    assert caught.value.line == line
    assert fragment in caught.value.message
    assert str(caught.value) == f"line {line}: {caught.value.message}"


def test_error_line_numbers_count_blank_comment_and_crlf_lines() -> None:
    record = "\r\n".join(["# header next", HEADER, "", "   # round", ROUND, '{"by": "dan", "pass": true}'])

    with pytest.raises(RecordError) as caught:
        read_record(record)
    assert caught.value.line == 6
    assert str(caught.value).startswith("line 6: 'by' must name a player")
