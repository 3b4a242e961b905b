"""Disputed catches and challenges, as table records, and what a ruling on them must judge.

The disputes tests (over gRPC in ``test_dispute_rulings.py``, over the command line in
``tests/test_cli_audit.py``) sweep the same cases: who disputes (the catcher, the caught player, a third
seat, the adjudicator for a seat), whether the log holds the catch (challenge) at the disputed position,
the verdict, and what the dispute names. Every record is imported, so line *n* is at position *n* + 1.

Three players, cy deals, ann starts:

* **catch** — ann, bob and cy play red cards in turn until ann, with R6 at line 18 (position 19), comes
  down to G7 alone; at line 19 (position 20) bob catches her. In the ``penalty`` record she did not call
  UNO (the catch earns the penalty); in the ``no-penalty`` record she called it with the play. Disputing
  position 20 disputes the recorded catch; disputing position 19 (the play, where the log holds no
  catch) asks for the one the dispute describes, made right after the play.
* **challenge** — ann plays a Wild Draw Four on B3 at line 3 (position 4), holding B2 (``upheld``) or
  no blue card (``failed``); bob, her victim, challenges at line 4 (position 5). Position 5 disputes the
  recorded challenge; position 4 the one described, made right after the Wild Draw Four.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tests.api.support import arranged_deck

ANN, BOB, CY = 0, 1, 2
PLAYERS = ("ann", "bob", "cy")

CATCH_PLAY_POSITION, CATCH_POSITION = 19, 20
WD4_POSITION, CHALLENGE_POSITION = 4, 5

_ANN_REDS = ["R1", "R2", "R3", "R4", "R5", "R6"]
_BOB_REDS = ["R7", "R8", "R9", "R1", "R2"]
_CY_REDS = ["R3", "R4", "R5", "R6", "R7"]
CATCH_HANDS = {"ann": [*_ANN_REDS, "G7"], "bob": [*_BOB_REDS, "Y1", "Y2"], "cy": [*_CY_REDS, "B1", "B2"]}

WD4_HANDS = {
    "upheld": ["W+4", "B2", "G5", "Y7", "R1", "Y3", "G8"],  # B2 is of the active colour
    "failed": ["W+4", "G5", "Y7", "R1", "Y3", "G8", "G9"],  # no blue card
}
_WD4_BOB = ["R3", "R4", "G1", "G2", "Y5", "Y6", "B9"]
_WD4_CY = ["G3", "G4", "Y8", "Y9", "B5", "B6", "R8"]


def _text(start: dict[str, Any], actions: list[dict[str, Any]]) -> str:
    header = {
        "record": "uno-game-record/1",
        "variant": "classic",
        "players": list(PLAYERS),
        "options": {"dealer_selection": "given"},
    }
    return "".join(
        json.dumps(line) + "\n" for line in [header, {"round": 1, "dealer": "cy", **start}, *actions]
    )


def catch_record(verdict: str) -> str:
    """The catch record whose recorded catch earns ``verdict`` (``penalty`` or ``no-penalty``)."""
    plays: list[dict[str, Any]] = []
    for turn, card in enumerate(_ANN_REDS):
        plays.append({"by": "ann", "play": card})
        if turn < len(_BOB_REDS):
            plays += [{"by": "bob", "play": _BOB_REDS[turn]}, {"by": "cy", "play": _CY_REDS[turn]}]
    called = verdict == "no-penalty"
    if called:
        plays[-1]["uno"] = True
    catch: dict[str, Any] = {"by": "bob", "catch": "ann"}
    if not called:
        catch["cards"] = {"ann": ["B8", "B9"]}
    return _text({"hands": CATCH_HANDS, "first": ["R8"]}, [*plays, catch])


def challenge_record(verdict: str) -> str:
    """The challenge record whose recorded challenge is ``verdict`` (``upheld`` or ``failed``).

    Dealt from a whole deck: a challenge judged as made right after the Wild Draw Four (not written
    down) takes its cards from it, as the written one does.
    """
    hands = {ANN: WD4_HANDS[verdict], BOB: _WD4_BOB, CY: _WD4_CY}
    deck = arranged_deck(hands, "B3", players=len(PLAYERS), dealer=CY)
    actions: list[dict[str, Any]] = [
        {"by": "ann", "play": "W+4", "colour": "R"},
        {"by": "bob", "challenge": True},
    ]
    return _text({"deck": deck}, actions)


@dataclass(frozen=True, slots=True)
class Judged:
    """What a ruling must say: who it judged, the verdict and rule (and reason), whether the judged one is
    the recorded one, and the mismatch it reports between what was named and what was judged."""

    by: str
    against: str
    verdict: str
    rule: str
    reason: str | None
    recorded: bool
    mismatch: str | None


#: What a catch dispute (or an adjudication) may name: ``(by, target)``.
CATCH_NAMES = {"names-nothing": (None, None), "names-the-recorded": (BOB, ANN), "names-cy": (CY, None)}
#: What a challenge dispute may name as the challenger.
CHALLENGE_NAMES = {"names-nothing": None, "names-cy": CY}


def judged_catch(verdict: str, recorded: bool, names: str) -> Judged:
    """The ruling on the catch case: the recorded catch (bob's of ann) at position 20 whatever is named;
    at position 19 the catch described (``names-cy``: cy's of ann, whose window is the one open or who
    holds one card; else bob's)."""
    by = "cy" if names == "names-cy" and not recorded else "bob"
    mismatch = None
    if names == "names-cy" and recorded:
        mismatch = (
            f"by cy named, but the uno-catch recorded at position {CATCH_POSITION} is by bob against ann"
        )
    if verdict == "penalty":
        return Judged(by, "ann", "penalty", "uno.catch", None, recorded, mismatch)
    reason = f"ann called UNO at position {CATCH_PLAY_POSITION}"
    return Judged(by, "ann", "no-penalty", "uno.catch.invalid", reason, recorded, mismatch)


def judged_challenge(verdict: str, recorded: bool, names: str) -> Judged:
    """The ruling on the challenge case: bob's recorded challenge at position 5 whatever is named; at
    position 4 the challenge described (``names-cy``: cy's, who is not the victim and may not challenge;
    else bob's, by default as the victim)."""
    if names == "names-cy" and not recorded:
        reason = "only bob, the Wild Draw Four's victim, may answer it"
        return Judged("cy", "ann", "failed", "wd4.challenge", reason, False, None)
    mismatch = None
    if names == "names-cy":
        where = f"recorded at position {CHALLENGE_POSITION}"
        mismatch = f"by cy named, but the wd4-challenge {where} is by bob against ann"
    return Judged("bob", "ann", verdict, f"wd4.challenge.{verdict}", None, recorded, mismatch)
