"""The replay page's rulings in words, the digest's sentences, the per-player summary and the disputes'
own steps, checked on the page's data (tests/test_replay_browser.py shows them in Chromium)."""

from __future__ import annotations

import json
import re
from typing import Any

from service.app.auditor import Auditor
from service.audit.replay_html import record_replay_html
from service.audit.replay_rulings import Judged, words
from service.audit.rule_text import RULES_PATH, SENTENCES_PATH, parse_rules, plain, sentences_of
from service.audit.rule_text import main as rule_text_main
from service.records.record import read_record
from service.records.verify import verify_record
from service.store import EventStore

from .support import import_and_rule
from .test_replay_html import BOTH, data_of

#: A game with known tallies: ann's legal Wild Draw Four, challenged by bob (failed: bob takes 6); ann
#: comes down to one card without calling, bob catches her but the table gives no penalty (line 10); bob
#: catches her again after the window closed and the table penalises her (line 12: R5 R6).
KNOWN = "\n".join(
    json.dumps(line)
    for line in [
        {"record": "uno-game-record/1", "variant": "classic", "players": ["ann", "bob"], "options": {}},
        {
            "round": 1,
            "dealer": "bob",
            "hands": {
                "ann": ["W+4", "RS", "RS", "GS", "GS", "G1", "Y7"],
                "bob": ["R1", "R2", "G3", "Y4", "Y5", "Y6", "Y8"],
            },
            "first": ["B3"],
        },
        {"by": "ann", "play": "W+4", "colour": "R"},
        {
            "by": "bob",
            "challenge": True,
            "applied": "failed",
            "cards": {"bob": ["B4", "B5", "B6", "B7", "B8", "B9"]},
        },
        {"by": "ann", "play": "RS"},
        {"by": "ann", "play": "RS"},
        {"by": "ann", "play": "GS"},
        {"by": "ann", "play": "GS"},
        {"by": "ann", "play": "G1"},
        {"by": "bob", "catch": "ann", "applied": "none"},
        {"by": "bob", "play": "G3"},
        {"by": "bob", "catch": "ann", "applied": "penalty", "cards": {"ann": ["R5", "R6"]}},
    ]
)


def page_of(text: str, seat: int | None = None) -> str:
    record = read_record(text)
    return record_replay_html(record, verify_record(record), seat=seat)


def words_at(data: dict[str, Any], at: int) -> dict[str, str]:
    words: dict[str, str] = next(r["words"] for r in data["rulings"] if r["at"] == at)
    return words


def test_each_ruling_says_what_the_table_did_what_the_rules_required_and_the_remedy() -> None:
    page = page_of(KNOWN)
    data = data_of(page)

    assert words_at(data, 4) == {
        "table": "bob challenged ann's Wild Draw Four; the table ruled that the challenge failed: "
        "bob took 6 cards (B4 B5 B6 B7 B8 B9)",
        "rules": "the Wild Draw Four was legal: ann held no other card of the active colour B; "
        "bob draws 6 and loses the turn",
        "remedy": "none: the table did what the rules require",
    }
    assert words_at(data, 10) == {
        "table": "bob caught ann; the table gave no penalty: nobody took a card",
        "rules": "the catch is good (ann held one card, had not called UNO): ann draws 2 cards",
        "remedy": "ann takes 2 cards now, the UNO penalty the table did not give",
    }
    assert words_at(data, 12) == {
        "table": "bob caught ann; the table gave the UNO penalty: ann took 2 cards (R5 R6)",
        "rules": "no penalty (window closed at line 11): the catch changes nothing",
        "remedy": "ann gives back the 2 cards (R5 R6) taken as the penalty",
    }
    assert "SOMETHING ELSE" not in page


def test_a_challenge_the_table_upheld_wrongly_is_undone_and_the_challenger_pays() -> None:
    wrong = KNOWN.replace(
        '"applied": "failed", "cards": {"bob": ["B4", "B5", "B6", "B7", "B8", "B9"]}',
        '"applied": "upheld", "cards": {"ann": ["B4", "B5", "B6", "B7"]}',
    )
    words = words_at(data_of(page_of(wrong)), 4)

    assert words["table"].endswith("the table upheld the challenge: ann took 4 cards (B4 B5 B6 B7)")
    assert (
        words["remedy"]
        == "ann gives back the 4 cards (B4 B5 B6 B7) taken; bob takes 6 cards and loses the turn"
    )


def test_a_seats_words_and_summary_name_no_card_it_may_not_see() -> None:
    bob = page_of(KNOWN, seat=1)
    words = words_at(data_of(bob), 12)

    assert words["remedy"] == "ann gives back the 2 cards taken as the penalty"
    # ann's penalty cards (her hand at the W+4, Y7 with it, is shown to bob, its challenger: wd4.challenge)
    for hidden in ("R5", "R6"):
        assert f'"{hidden}"' not in bob and f"{hidden} " not in bob and f"{hidden})" not in bob
    ann = data_of(page_of(KNOWN, seat=0))
    assert words_at(ann, 4)["table"].endswith("bob took 6 cards")  # bob's six, counted, not named
    assert words_at(ann, 12)["remedy"] == "ann gives back the 2 cards (R5 R6) taken as the penalty"
    both = data_of(page_of(BOTH.read_text(), seat=0))
    assert "Y2" not in json.dumps(both["rulings"]) and "(B2)" not in json.dumps(both["rulings"])


def _summary(page: str) -> dict[str, dict[str, int]]:
    found = re.search(r'<table class="summary" id="summary">(.*?)</table>', page, re.S)
    assert found is not None
    rows = re.findall(r'<tr data-seat="\d+"><td>\d+</td><td>(.*?)</td>(.*?)</tr>', found.group(1))
    return {
        name: {k: int(v) for k, v in re.findall(r'data-count="(\w+)">(\d+)<', cells)} for name, cells in rows
    }


def test_the_summary_counts_each_seats_penalties_challenges_and_catches() -> None:
    assert _summary(page_of(KNOWN)) == {
        "ann": {
            "penalties_given": 6,
            "penalties_taken": 2,
            "challenges_won": 1,
            "challenges_lost": 0,
            "catches_made": 0,
            "catches_suffered": 1,
        },
        "bob": {
            "penalties_given": 2,
            "penalties_taken": 6,
            "challenges_won": 0,
            "challenges_lost": 1,
            "catches_made": 1,
            "catches_suffered": 0,
        },
    }
    both = _summary(page_of(BOTH.read_text()))
    assert (both["ann"]["penalties_taken"], both["bob"]["penalties_given"]) == (4, 4)
    assert (both["ann"]["catches_made"], both["bob"]["penalties_taken"]) == (1, 2)
    assert _summary(page_of(KNOWN, seat=1)) == _summary(page_of(KNOWN))  # counts: public


def _digest_sentence(rule: str) -> str:
    text = RULES_PATH.read_text(encoding="utf-8")
    found = re.search(
        rf"^ *- `{re.escape(rule)}`(?: \([^)]*\))?: (.*?)(?=\n *- |\n\n|\n#)", text, re.M | re.S
    )
    assert found is not None, rule
    return plain(found.group(1))


def test_the_page_embeds_the_digests_sentence_of_each_rule_it_cites_and_no_other() -> None:
    data = data_of(page_of(KNOWN))

    cited = {r["rule"] for r in data["rulings"]} | {v["rule"] for v in data["violations"]}
    assert set(data["rules"]) == cited | {"uno.penalty"}
    for rule in ("wd4.challenge.failed", "uno.catch", "uno.catch.invalid", "uno.penalty"):
        assert data["rules"][rule] == _digest_sentence(rule)
    assert data["rules"]["uno.penalty"] == "a caught player draws 2 (attack: presses the launcher twice)."
    assert sentences_of(["no.such-rule"]) == {}


def test_a_rule_is_its_first_bullet_with_its_continuation_lines() -> None:
    text = (
        "- `a.b` (scope: with a colon): the first\n  sentence goes on.\n  - `a.b.c`: a sub-rule.\n\n"
        "- `x.y` (option `x`; more). Its **own** sentence.\n- `a.b`: a later gloss.\n"
    )
    assert parse_rules(text) == {
        "a.b": "the first sentence goes on.",
        "a.b.c": "a sub-rule.",
        "x.y": "Its own sentence.",
    }


def test_the_raw_events_are_folded_away_and_labels_have_one_number() -> None:
    page = page_of(KNOWN)
    data = data_of(page)

    assert re.search(r'<details id="raw-events">', page)  # no "open": folded until asked for
    assert all(step["label"] == f"line {step['at']}" for step in data["steps"])


async def test_a_disputes_filing_and_ruling_are_steps_of_their_own(store: EventStore) -> None:
    auditor = Auditor(store)
    ruled = await import_and_rule(auditor, claim="too late", note="")
    game = ruled.game_id
    data = data_of(await auditor.replay(game))

    (dispute,) = data["disputes"]
    steps = data["steps"]
    assert (
        steps[dispute["filed_step"]]["at"] == ruled.filed_at
        and steps[dispute["filed_step"]]["entry"] == "filed"
    )
    assert (
        steps[dispute["ruled_step"]]["at"] == ruled.ruled_at
        and steps[dispute["ruled_step"]]["entry"] == "ruled"
    )
    assert steps[dispute["ruled_step"]]["label"] == f"position {ruled.ruled_at}"
    assert steps[dispute["ruled_step"]]["table"] == steps[dispute["filed_step"] - 1]["table"]
    assert [s["at"] for s in steps] == sorted(s["at"] for s in steps)
    assert dispute["ruling"]["words"]["remedy"] == "ann gives back the 2 cards (B8 B9) taken as the penalty"
    bob = data_of(await auditor.replay(game, seat=1))
    assert (
        bob["disputes"][0]["ruling"]["words"]["remedy"] == "ann gives back the 2 cards taken as the penalty"
    )
    assert "B8 B9" not in json.dumps(bob)


def test_a_catch_the_log_does_not_hold_and_a_refused_challenge_in_words() -> None:
    evidence = {"hand": ["G7"], "active_colour": "G", "top": "G1"}
    unheard = Judged("uno-catch", "ann", "bob", "penalty", None, evidence, None, heard=False, attack=True)
    assert words(unheard) == {
        "table": "the log holds no such uno catch: the table never ruled on it",
        "rules": "the catch is good (bob held one card, had not called UNO): bob presses the launcher twice",
        "remedy": "bob presses the launcher twice now, the UNO penalty the table did not give",
    }
    refused = Judged(
        "wd4-challenge", "cy", "ann", "failed", "cy is not the victim", {"played_at": 3}, "upheld"
    )
    assert (
        words(refused)["rules"] == "the challenge may not be made (cy is not the victim): it changes nothing"
    )
    assert words(refused)["remedy"] == "the table's ruling is void: whoever took cards for it gives them back"


def test_the_packaged_sentences_are_the_digests() -> None:
    """An installed package reads rule_sentences.json, not docs/: it must say what docs/RULES.md says."""
    assert json.loads(SENTENCES_PATH.read_text(encoding="utf-8")) == parse_rules(
        RULES_PATH.read_text(encoding="utf-8")
    )
    assert rule_text_main(["--check"]) == 0
