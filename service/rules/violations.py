"""Rule ids of the digest (``docs/RULES.md``) and the three ways the decider refuses a command.

A :class:`Violation` is a command the rules do not allow (nothing happens); :class:`Impossible` is a
table's action that cannot be followed at all when replayed "as the table did"; a :class:`CommandError`
is bad input (a seat the game does not have), not a rule. Every rejection and every verdict names one of
the :class:`Rule` ids; a test keeps this list and the digest equal.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Rule(enum.Enum):
    """A stable rule id of the digest. The value is the id as written there."""

    DECK_COMPOSITION = "deck.composition"
    SETUP_PLAYERS = "setup.players"
    SETUP_OPTIONS = "setup.options"
    SETUP_DEALER = "setup.dealer"
    SETUP_DEAL = "setup.deal"
    SETUP_FIRST_CARD = "setup.first-card"
    SETUP_FIRST_PLAYER = "setup.first-player"
    TURN_ORDER = "turn.order"
    PLAY_MATCH = "play.match"
    PLAY_IN_HAND = "play.in-hand"
    PLAY_WILD_COLOUR = "play.wild-colour"
    DRAW_ONE = "draw.one"
    DRAW_PASS = "draw.pass"
    DRAW_RESHUFFLE = "draw.reshuffle"
    TURN_END = "turn.end"
    ACTION_SKIP = "action.skip"
    ACTION_REVERSE = "action.reverse"
    ACTION_DRAW_TWO = "action.draw-two"
    ACTION_WILD = "action.wild"
    ACTION_WILD_DRAW_FOUR = "action.wild-draw-four"
    WD4_ACCEPT = "wd4.accept"
    WD4_CHALLENGE = "wd4.challenge"
    WD4_LEGAL = "wd4.legal"
    WD4_CHALLENGE_UPHELD = "wd4.challenge.upheld"
    WD4_CHALLENGE_FAILED = "wd4.challenge.failed"
    SONIC_VICTORY_LAP = "sonic.victory-lap"
    MK_ITEM_BOX = "mk.item-box"
    MK_ITEM_MUSHROOM = "mk.item.mushroom"
    MK_ITEM_BANANA = "mk.item.banana"
    MK_ITEM_GREEN_SHELL = "mk.item.green-shell"
    MK_ITEM_LIGHTNING = "mk.item.lightning"
    MK_ITEM_BOB_OMB = "mk.item.bob-omb"
    ATTACK_HIT_TWO = "attack.hit-two"
    ATTACK_WILD_HIT_FOUR = "attack.wild-hit-four"
    ATTACK_ATTACK_ATTACK = "attack.attack-attack"
    ATTACK_DISCARD_ALL = "attack.discard-all"
    ATTACK_FOLLOW_UP = "attack.follow-up"
    ATTACK_TRADE_HANDS = "attack.trade-hands"
    ATTACK_ALL_HIT = "attack.all-hit"
    ATTACK_HIT_FIRE = "attack.hit-fire"
    ATTACK_CUSTOMIZABLE = "attack.customizable"
    ATTACK_LAUNCHER = "attack.launcher"
    UNO_CALL = "uno.call"
    UNO_CATCH = "uno.catch"
    UNO_PENALTY = "uno.penalty"
    UNO_CATCH_INVALID = "uno.catch.invalid"
    ROUND_END = "round.end"
    SCORE_ROUND = "score.round"
    SCORE_MATCH = "score.match"
    FAIR_COMMIT = "fair.commit"
    HOUSE_STACKING = "house.stacking"
    HOUSE_JUMP_IN = "house.jump-in"
    HOUSE_SEVEN_O = "house.seven-o"
    HOUSE_DRAW_TO_MATCH = "house.draw-to-match"
    HOUSE_FORCE_PLAY = "house.force-play"
    HOUSE_WD4_ANY_TIME = "house.wd4-any-time"


@dataclass(frozen=True, slots=True)
class Violation:
    """A command the rules do not allow: the rule it breaks and a message naming the cards involved."""

    rule: Rule
    message: str

    def __str__(self) -> str:
        return f"{self.rule.value}: {self.message}"


class Impossible(Exception):
    """An action that cannot physically happen (a card nobody holds, a pile with nothing to take).

    Raised when a record is replayed "as the table did" past a violation and the table's action cannot
    be followed; the verifier reports it at that line and stops.
    """

    def __init__(self, rule: Rule, message: str) -> None:
        super().__init__(message)
        self.rule = rule
        self.message = message


class CommandError(ValueError):
    """A malformed command (a seat that does not exist): bad input, not a rule violation.

    ``field`` names the command's field that is wrong (``player``, ``target``, ``dealer``).
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def require_seat(seat: int | None, players: int, field: str) -> None:
    """Raise :class:`CommandError` unless ``seat`` (when given) is one of a ``players``-seat game's."""
    if seat is not None and not 0 <= seat < players:
        raise CommandError(field, f"there is no seat {seat} (the game has {players} players)")
