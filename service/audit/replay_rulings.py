"""The replay page's rulings in words, and its per-player summary, from the verifier's report and replay.

Every ruling says what the table did, what the rules required and the remedy (who takes or gives back
how many cards). The table's part comes from the record line's ``applied`` and the cards the replay moved
at that line as the table did; the rules' part from the verdict and its evidence. Cards are named only
where the viewer may see them (the caller's redaction); otherwise only counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from service.domain.auth import Caller
from service.records.report import Ruling
from service.rules.events import CardsTaken, Event, LauncherPressed, UnoCaught, Wd4Challenged
from service.rules.violations import Rule

#: The causes of cards taken as a penalty someone earned another player (not a card's own effect).
PENALTY_CAUSES = frozenset((Rule.UNO_PENALTY, Rule.WD4_CHALLENGE_UPHELD, Rule.WD4_CHALLENGE_FAILED))
_NONE = "none: the table did what the rules require"


@dataclass(frozen=True, slots=True)
class Judged:
    """One catch or challenge to put in words: ``applied`` is what the table applied (a record line's
    ``applied``; ``None``: not said), ``heard`` whether the log holds it at all (a dispute may describe
    one it does not), ``took`` the cards each player took for it at that line, as the viewer may see them
    (``None`` for a card not theirs to see), ``evidence`` the ruling's evidence as the viewer sees it."""

    kind: str
    by: str
    against: str
    verdict: str
    reason: str | None
    evidence: Mapping[str, Any]
    applied: str | None
    heard: bool = True
    took: tuple[tuple[str, tuple[str | None, ...]], ...] = ()
    attack: bool = False


def took_at(
    events: Iterable[Event], players: Sequence[str], caller: Caller
) -> tuple[tuple[str, tuple[str | None, ...]], ...]:
    """The cards each player took at one line (any cause: a catch's or a challenge's line moves no other),
    named only for the admin and the player who took them."""
    taken: list[tuple[str, tuple[str | None, ...]]] = []
    for event in events:
        if isinstance(event, CardsTaken | LauncherPressed):
            mine = caller.admin or caller.seat == event.player
            taken.append((players[event.player], tuple(c.token if mine else None for c in event.cards)))
    return tuple(taken)


def _cards(count: int, cards: Sequence[str | None] = ()) -> str:
    named = [c for c in cards if c is not None]
    listing = f" ({' '.join(named)})" if named and len(named) == len(cards) else ""
    return f"{count} card{'' if count == 1 else 's'}{listing}"


def _took_text(judged: Judged) -> str:
    if not judged.took:
        return "nobody took a card"
    return "; ".join(f"{name} took {_cards(len(cards), cards)}" for name, cards in judged.took)


def _took_of(judged: Judged, name: str) -> tuple[str | None, ...]:
    return tuple(card for who, cards in judged.took if who == name for card in cards)


def applied_ok(judged: Judged) -> bool | None:
    """Whether the table applied the verdict, as the verifier judges it (``None``: not said)."""
    if judged.applied is None or not judged.heard:
        return None
    if judged.kind == "uno-catch":
        return judged.applied == ("penalty" if judged.verdict == "penalty" else "none")
    if "hand" not in judged.evidence:  # a refused challenge: nothing to apply, "failed" is its answer
        return judged.applied == "failed"
    return judged.applied == judged.verdict


def words(judged: Judged) -> dict[str, str]:
    """The ruling in three sentences: ``table`` (what the table did), ``rules`` (what the rules required)
    and ``remedy``."""
    if judged.kind == "uno-catch":
        return _catch_words(judged)
    if "hand" not in judged.evidence:
        return _refused_words(judged)
    return _challenge_words(judged)


def _table_text(judged: Judged, act: str, applied: Mapping[str, str]) -> str:
    if not judged.heard:
        return f"the log holds no such {judged.kind.replace('-', ' ')}: the table never ruled on it"
    moved = _took_text(judged)
    if judged.applied is None:
        return f"{act}; the record does not say what the table applied (replayed as the rules say: {moved})"
    return f"{act}; {applied.get(judged.applied, judged.applied)}: {moved}"


def _catch_words(judged: Judged) -> dict[str, str]:
    by, target = judged.by, judged.against
    penalty = "presses the launcher twice" if judged.attack else "draws 2 cards"
    table = _table_text(
        judged,
        f"{by} caught {target}",
        {"penalty": "the table gave the UNO penalty", "none": "the table gave no penalty"},
    )
    if judged.verdict == "penalty":
        rules = f"the catch is good ({target} held one card, had not called UNO): {target} {penalty}"
    else:
        rules = f"no penalty ({judged.reason or 'the catch is not valid'}): the catch changes nothing"
    ok = applied_ok(judged)
    if ok:
        remedy = _NONE
    elif judged.verdict == "penalty" and (ok is False or not judged.heard):
        remedy = f"{target} {penalty.replace('draws', 'takes')} now, the UNO penalty the table did not give"
    elif ok is False:
        given = _took_of(judged, target)
        remedy = f"{target} gives back the {_cards(len(given), given)} taken as the penalty"
    elif not judged.heard:
        remedy = "none: nothing was applied, and nothing is due"
    else:
        remedy = "none, if the table did as the rules say (the record does not say what it applied)"
    return {"table": table, "rules": rules, "remedy": remedy}


def _challenge_words(judged: Judged) -> dict[str, str]:
    by, offender, evidence = judged.by, judged.against, judged.evidence
    # Under house.stacking the cost is the pending total, not always 4 (and 6 for a failed challenge).
    upheld_cost = int(evidence.get("pending", 4))
    failed_cost = upheld_cost + 2
    table = _table_text(
        judged,
        f"{by} challenged {offender}'s Wild Draw Four",
        {"upheld": "the table upheld the challenge", "failed": "the table ruled that the challenge failed"},
    )
    colour = evidence.get("active_colour") or "none"
    matching = list(evidence.get("matching") or [])
    if judged.verdict == "upheld":
        rules = (
            f"the Wild Draw Four was illegal: {offender} held {_cards(len(matching), matching)} of the "
            f"active colour {colour}; {offender} draws {upheld_cost}, {by} draws nothing and takes a "
            "normal turn"
        )
    else:
        rules = (
            f"the Wild Draw Four was legal: {offender} held no other card of the active colour {colour}; "
            f"{by} draws {failed_cost} and loses the turn"
        )
    ok = applied_ok(judged)
    if ok:
        remedy = _NONE
    elif ok is None:
        remedy = "none, if the table did as the rules say (the record does not say what it applied)"
    elif judged.verdict == "upheld":
        back = _took_of(judged, by)
        remedy = (
            f"{by} gives back the {_cards(len(back), back)} taken; {offender} takes {upheld_cost} cards; "
            f"{by} takes a normal turn"
        )
    else:
        back = _took_of(judged, offender)
        remedy = (
            f"{offender} gives back the {_cards(len(back), back)} taken; {by} takes {failed_cost} cards "
            "and loses the turn"
        )
    return {"table": table, "rules": rules, "remedy": remedy}


def _refused_words(judged: Judged) -> dict[str, str]:
    table = _table_text(
        judged,
        f"{judged.by} challenged a Wild Draw Four",
        {"upheld": "the table upheld the challenge", "failed": "the table ruled that the challenge failed"},
    )
    why = judged.reason or "no Wild Draw Four to challenge"
    rules = f"the challenge may not be made ({why}): it changes nothing"
    ok = applied_ok(judged)
    if ok or ok is None:
        remedy = "none: nothing is to be taken or given back" if ok else "none, if the table applied nothing"
    else:
        remedy = "the table's ruling is void: whoever took cards for it gives them back"
    return {"table": table, "rules": rules, "remedy": remedy}


# --- the per-player summary -----------------------------------------------------------------------------


@dataclass(slots=True)
class SeatSummary:
    """One seat's tally: penalty cards given (earned another player) and taken, as the table applied
    them; challenges won and lost and UNO catches made and suffered, as the rules judged them."""

    seat: int
    name: str
    penalties_given: int = 0
    penalties_taken: int = 0
    challenges_won: int = 0
    challenges_lost: int = 0
    catches_made: int = 0
    catches_suffered: int = 0


def summarise(
    players: Sequence[str], events_by_line: Mapping[int, Sequence[Event]], rulings: Iterable[Ruling]
) -> list[SeatSummary]:
    """Every seat's tally over the game's replayed events (line → events) and the report's rulings."""
    rows = [SeatSummary(seat, name) for seat, name in enumerate(players)]
    by_name = {row.name: row for row in rows}
    for events in events_by_line.values():
        giver: dict[Rule, int] = {}
        for event in events:
            if isinstance(event, UnoCaught):
                giver[Rule.UNO_PENALTY] = event.by
            elif isinstance(event, Wd4Challenged):
                giver[Rule.WD4_CHALLENGE_UPHELD] = event.player
                giver[Rule.WD4_CHALLENGE_FAILED] = event.offender
        for event in events:
            if isinstance(event, CardsTaken | LauncherPressed) and event.cause in PENALTY_CAUSES:
                rows[event.player].penalties_taken += len(event.cards)
                if event.cause in giver:
                    rows[giver[event.cause]].penalties_given += len(event.cards)
    for ruling in rulings:
        by, against = by_name.get(ruling.by), by_name.get(ruling.against)
        if ruling.kind.value == "wd4-challenge":
            won, lost = (by, against) if ruling.verdict.value == "upheld" else (against, by)
            if won is not None:
                won.challenges_won += 1
            if lost is not None:
                lost.challenges_lost += 1
        elif ruling.verdict.value == "penalty":
            if by is not None:
                by.catches_made += 1
            if against is not None:
                against.catches_suffered += 1
    return rows
