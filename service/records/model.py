"""The typed model of a game record (``uno-game-record/1``): what each line of a record says.

A :class:`GameRecord` is a header and its rounds; each :class:`RoundBlock` is a round line and the action
lines after it. The model keeps what a line says, not what it means (``options`` stay the raw JSON
object), and line numbers take no part in equality. Reading and writing the text:
:mod:`service.records.record`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from service.rules.cards import Card, Colour
from service.rules.options import Variant

#: The value of the header's ``record`` key for this version of the format.
FORMAT = "uno-game-record/1"

#: One launcher outcome: how many cards came out (a round dealt from a deck), or which (a round without).
Fired = int | tuple[Card, ...]


class RecordError(ValueError):
    """A game record that is not well formed.

    ``line`` is the 1-based physical line number the problem is on (blank and comment lines count);
    ``message`` says what is wrong. ``str()`` gives both as ``"line N: message"``.
    """

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


class ActionKind(enum.Enum):
    """What an action line does. The value is the line's action key."""

    PLAY = "play"
    DRAW = "draw"
    PASS = "pass"
    PRESS = "press"
    CALL_UNO = "call"
    CATCH = "catch"
    CHALLENGE = "challenge"
    ACCEPT = "accept"
    CHOOSE = "choose"
    RESHUFFLE = "reshuffle"


@dataclass(frozen=True, slots=True)
class RecordHeader:
    """The header, the first JSON line of a record.

    Attributes:
        variant: the rule set the game is played under.
        players: the players' names in seat (clockwise) order; 2–10 distinct non-empty strings.
        options: the ``options`` object exactly as recorded (option name → JSON value). It has been
            validated with :func:`~service.rules.options.make_options` but not filled with defaults, so
            it round-trips; call ``make_options(header.variant, header.options)`` for the full options.
            A header without ``options`` reads as ``{}``.
        seed_sha256: the committed SHA-256 of the game seed, 64 lowercase hex digits, if recorded.
        seed: the revealed game seed, if recorded. When both are present, ``sha256(seed)`` matches.
        line: the physical line number of the header; not part of equality.
    """

    variant: Variant
    players: tuple[str, ...]
    options: dict[str, Any]
    seed_sha256: str | None
    seed: bytes | None
    line: int = field(compare=False)


@dataclass(frozen=True, slots=True)
class RoundLine:
    """The line that starts a round.

    A round is given either by its ``deck`` (``hands`` and ``first`` are then ``None``: the deal and the
    first flip are taken from the deck) or by ``hands`` and ``first`` (``deck`` is then ``None``).

    Attributes:
        round: the round's number: 1 for the first round line, then 2, 3…
        dealer: the player who deals this round.
        deck: the complete shuffled deck before the deal, top card first.
        hands: every player's dealt hand, keyed by every player of the header.
        first: the card or cards flipped to start the discard pile, in flip order (at least one).
        cards: cards that first-card penalties made players draw, per player (required without a deck,
            optional with one); empty when none are listed.
        fired: launcher presses that the first card imposed, one outcome per press in order (a count
            with a deck, a list of cards without); empty when there were none.
        reshuffles: the draw pile (top first) after each first card that was returned to it, in order,
            when the table says how it reshuffled; empty otherwise.
        fixed_by: who fixed the ``deck`` of a round that a game committed to a seed did not deal from
            the seed's shuffle (the service's admin), or ``None``: the seed dealt it (or there is none).
        line: the physical line number of the round line; not part of equality.
    """

    round: int
    dealer: str
    deck: tuple[Card, ...] | None
    hands: dict[str, tuple[Card, ...]] | None
    first: tuple[Card, ...] | None
    cards: dict[str, tuple[Card, ...]]
    fired: tuple[Fired, ...]
    line: int = field(compare=False)
    reshuffles: tuple[tuple[Card, ...], ...] = ()
    fixed_by: str | None = None


@dataclass(frozen=True, slots=True)
class Action:
    """One action line. Which fields are set depends on ``kind``; the others keep their defaults.

    ============  =====================================  ===============================================
    kind          line                                   fields
    ============  =====================================  ===============================================
    PLAY          ``{"by": P, "play": "R+2", ...}``      ``card``; optional ``colour`` (a wild),
                                                         ``uno``, ``target``, ``jump_in``, ``flip``,
                                                         ``cards``, ``fired``
    DRAW          ``{"by": P, "draw": true}``            optional ``cards`` (what was drawn, written
                                                         ``"cards": [...]`` or per player)
    PASS          ``{"by": P, "pass": true}``            —
    PRESS         ``{"by": P, "press": true,             ``fired``: a 1-tuple holding the line's single
                  "fired": 2}``                          outcome; empty when a seeded header leaves
                                                         ``fired`` out
    CALL_UNO      ``{"by": P, "call": "uno"}``           —
    CATCH         ``{"by": P, "catch": Q}``              ``target`` = Q; optional ``applied``
                                                         (``"penalty"``/``"none"``), ``cards``, ``fired``
    CHALLENGE     ``{"by": P, "challenge": true}``       optional ``applied`` (``"upheld"``/
                                                         ``"failed"``), ``cards``
    ACCEPT        ``{"by": P, "accept": true}``          optional ``cards``, ``fired`` (a W+4, or a
                                                         stacked penalty: ``house.stacking``)
    CHOOSE        ``{"by": P, "choose": {...}}``         exactly one of ``colour`` (``{"colour": "B"}``)
                                                         and ``target`` (``{"target": "cy"}``); optional
                                                         ``cards``
    RESHUFFLE     ``{"reshuffle": [...]}``               ``pile``; ``by`` is optional here only
    ============  =====================================  ===============================================

    Attributes:
        line: the physical line number of the action; not part of equality.
        by: the acting player; ``None`` only for a reshuffle that names nobody.
        kind: what the line does.
        card: the card played (PLAY).
        colour: the colour chosen for a played wild (PLAY), or the colour chosen (CHOOSE).
        uno: whether UNO was called with the play (PLAY).
        target: the player named by the play (PLAY: WAA, TH, a customizable, a 7 under
            ``house.seven-o``), caught (CATCH) or chosen (CHOOSE: Green Shell).
        jump_in: the play was made out of turn on an identical card (PLAY, ``house.jump-in``). The line
            says so because a play out of turn without it is a different thing: ``turn.order`` broken.
        applied: what the table did: ``"penalty"``/``"none"`` (CATCH), ``"upheld"``/``"failed"``
            (CHALLENGE); ``None`` when the record does not say.
        cards: the cards each listed player took from the pile because of this line (required in a
            round without a deck, optional in one with a deck); empty when none are listed.
        fired: the launcher outcomes: for PRESS the press's own single outcome, otherwise one per press
            the line imposed, in order; a count with a deck, a list of cards without. Empty when none.
        flip: the card an item box flipped, as given on a PLAY line (required without a deck, optional
            with one).
        pile: the new draw pile, top card first (RESHUFFLE).
        reshuffles: the new draw piles (top first) of the reshuffles made inside this action when the
            pile ran out in the middle of it, in order (the ``reshuffle`` key on a line of another
            action); empty when the line gives none.
    """

    line: int = field(compare=False)
    by: str | None
    kind: ActionKind
    card: Card | None = None
    colour: Colour | None = None
    uno: bool = False
    target: str | None = None
    applied: str | None = None
    cards: dict[str, tuple[Card, ...]] = field(default_factory=dict)
    fired: tuple[Fired, ...] = ()
    flip: Card | None = None
    pile: tuple[Card, ...] | None = None
    reshuffles: tuple[tuple[Card, ...], ...] = ()
    jump_in: bool = False


@dataclass(frozen=True, slots=True)
class RoundBlock:
    """One round: its round line and the action lines after it, in record order."""

    start: RoundLine
    actions: tuple[Action, ...]


@dataclass(frozen=True, slots=True)
class GameRecord:
    """A whole record: the header and the rounds in order (possibly none).

    Equality ignores line numbers, so ``read_record(write_record(r)) == r`` for every well-formed ``r``.
    """

    header: RecordHeader
    rounds: tuple[RoundBlock, ...]
