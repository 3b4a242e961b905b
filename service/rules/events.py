"""Events: the immutable facts a game's log is made of.

Each accepted command yields one or more events; :func:`service.rules.state.evolve` applies them one at a
time and never validates. Events say what happened in full, so a reader of the log needs no rules engine
to follow a game. They fall into turn actions, consequences the rules impose, and out-of-turn table talk:
docs/DESIGN.md ("The rules engine") lists each group.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from service.rules.cards import Card, Colour
from service.rules.options import Options, Variant
from service.rules.violations import Rule

#: The field metadata key of a field added to an event after logs were stored with it: the stored payload
#: leaves the field out while it holds its default (:func:`service.domain.codec.to_json`), so that an event
#: which does not use it is written exactly as before the field existed, and decodes as the default.
LEFT_OUT_AT_DEFAULT = "left_out_at_default"


class Awaiting(enum.Enum):
    """What the game waits for from the prompted player."""

    ROUND_START = "round-start"  # anyone may start the next round
    PLAY = "play"  # a normal turn: play, draw (or press, in UNO Attack)
    DRAWN = "drawn"  # the drawn card is playable: play it or pass (``draw.pass``)
    WD4_RESPONSE = "wd4-response"  # the Wild Draw Four victim: accept or challenge (or stack on it)
    STACK = "stack"  # a stacked draw penalty is pending: stack on it or accept it (``house.stacking``)
    FOLLOW_UP = "follow-up"  # UNO Attack: one more matching card after S or R, or pass
    COLOUR = "colour"  # choose the active colour (first-card wild, item-box Bob-omb)
    TARGET = "target"  # name an opponent (item-box Green Shell)
    GAME_OVER = "game-over"

    # Identity hashing, as for Face and Variant: members are singletons compared by identity, and
    # Enum's own hash is a Python-level hash(name). The engine keys its shared prompts by it.
    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True)
class GameCreated:
    """A game was created. ``seed`` is secret until the game ends; ``seed_sha256`` is its public pledge.

    ``seed`` is ``None`` for a game reconstructed from a table (its cards come from the record).
    """

    variant: Variant
    players: tuple[str, ...]
    options: Options
    seed: bytes | None
    seed_sha256: str | None
    dealer: int | None


@dataclass(frozen=True, slots=True)
class DealerDrawn:
    """Dealer selection by draw (``setup.dealer``): every card drawn, in order, and the dealer found."""

    round: int
    draws: tuple[tuple[int, Card], ...]
    dealer: int


@dataclass(frozen=True, slots=True)
class RoundStarted:
    """A round was dealt. Exactly one of ``deck`` and ``hands`` is given.

    ``deck`` is the complete shuffled deck, top first, before the deal (7 cards each, one at a time,
    starting left of the dealer); ``hands`` are dealt hands reported by a table whose deck order is
    unknown, in which case the draw pile is the rest of the deck in no known order.

    ``fixed_by`` names who fixed the deck's order (the service's admin) when a game that commits to a seed
    deals this round from a deck given to it rather than from the seed's shuffle (``fair.commit``); it is
    ``None`` for a round the seed dealt, or a table game's. Added after logs were stored: left out of the
    payload while ``None``.
    """

    round: int
    dealer: int
    deck: tuple[Card, ...] | None
    hands: tuple[tuple[Card, ...], ...] | None
    fixed_by: str | None = field(default=None, metadata={LEFT_OUT_AT_DEFAULT: True})


@dataclass(frozen=True, slots=True)
class CardFlipped:
    """The top card of the draw pile was turned onto the discard pile (first card, item box)."""

    card: Card


@dataclass(frozen=True, slots=True)
class FlipReturned:
    """The flipped first card went back into the draw pile, which is now ``pile`` (top first)."""

    card: Card
    pile: tuple[Card, ...]


@dataclass(frozen=True, slots=True)
class PileReshuffled:
    """The discard pile except its top card became the new draw pile (``draw.reshuffle``).

    ``ordered`` is false when a table reported the reshuffle without its order.
    """

    pile: tuple[Card, ...]
    ordered: bool


@dataclass(frozen=True, slots=True)
class CardPlayed:
    """``player`` played ``card``; ``discarded`` went beneath it (UNO Attack Discard All).

    ``colour`` is the colour chosen for a wild (``None`` for coloured cards and the item box, whose colour
    comes from the flipped card). ``uno`` is an UNO call made with the play. ``target`` is the player
    the card names (Attack-Attack, Trade Hands, a customizable), if any.
    """

    player: int
    card: Card
    colour: Colour | None = None
    uno: bool = False
    target: int | None = None
    discarded: tuple[Card, ...] = ()


@dataclass(frozen=True, slots=True)
class CardDrawn:
    """``player`` drew ``card`` from the draw pile instead of playing (``draw.one``)."""

    player: int
    card: Card


@dataclass(frozen=True, slots=True)
class Passed:
    """``player`` kept the drawn card (``draw.pass``) or ended an Attack follow-up chance."""

    player: int


@dataclass(frozen=True, slots=True)
class CardsTaken:
    """``player`` took ``cards`` from the draw pile because the rule ``cause`` imposed it."""

    player: int
    cards: tuple[Card, ...]
    cause: Rule


@dataclass(frozen=True, slots=True)
class LauncherPressed:
    """``player`` pressed the UNO Attack launcher, which fired ``cards`` (possibly none).

    ``cause`` is ``attack.launcher`` for a press the player chose (a turn action), otherwise the rule
    that imposed it (Hit 2, a penalty, …).
    """

    player: int
    cards: tuple[Card, ...]
    cause: Rule


@dataclass(frozen=True, slots=True)
class DirectionReversed:
    """Play now goes the other way round (``action.reverse``)."""


@dataclass(frozen=True, slots=True)
class ColourChosen:
    """``player`` chose the active colour outside a play (first-card wild, Bob-omb)."""

    player: int
    colour: Colour


@dataclass(frozen=True, slots=True)
class HandsTraded:
    """``player`` and ``other`` swapped hands (UNO Attack Trade Hands, or a 7 under ``house.seven-o``)."""

    player: int
    other: int


@dataclass(frozen=True, slots=True)
class HandsRotated:
    """Every player passed their hand to the next player in the current direction (``house.seven-o``:
    ``player`` played a 0)."""

    player: int


@dataclass(frozen=True, slots=True)
class JumpedIn:
    """``player`` plays out of turn a card identical to the top card (``house.jump-in``): the turn is
    theirs from here, and the :class:`CardPlayed` that follows is that play."""

    player: int


@dataclass(frozen=True, slots=True)
class StackAccepted:
    """``player`` took the stacked draw penalty pending against them, ``total`` cards or presses
    (``house.stacking``), and loses the turn; the cards follow as :class:`CardsTaken` (or presses)."""

    player: int
    total: int


@dataclass(frozen=True, slots=True)
class UnoCalled:
    """``player`` called UNO by itself (not with a play)."""

    player: int


@dataclass(frozen=True, slots=True)
class UnoCaught:
    """``by`` caught ``target`` holding one card without having called UNO (``uno.catch``)."""

    by: int
    target: int


@dataclass(frozen=True, slots=True)
class Wd4Accepted:
    """The Wild Draw Four victim accepted (``wd4.accept``); the draw follows as :class:`CardsTaken`: four
    cards, or the whole stacked total (``house.stacking``)."""

    player: int


@dataclass(frozen=True, slots=True)
class Wd4Challenged:
    """The victim challenged the Wild Draw Four of ``offender`` (``wd4.challenge``).

    The evidence: ``hand`` is what the offender held when playing it (the Wild Draw Four included),
    ``colour`` the active colour then, ``matching`` the cards that made the play illegal.
    """

    player: int
    offender: int
    upheld: bool
    hand: tuple[Card, ...]
    colour: Colour | None
    matching: tuple[Card, ...]


@dataclass(frozen=True, slots=True)
class Prompted:
    """The game now waits for ``player`` to act as ``awaiting`` says.

    ``pointer`` is whose turn comes once that is done, for a colour or target choice and an Attack
    follow-up chance. ``new_turn`` is true when this begins a turn (not a choice or a drawn card).
    """

    player: int
    awaiting: Awaiting
    pointer: int | None = None
    new_turn: bool = True


@dataclass(frozen=True, slots=True)
class RoundEnded:
    """``winner`` went out (``round.end``) and scored ``points`` (``score.round``) from ``hands``."""

    round: int
    winner: int
    points: int
    hands: tuple[tuple[Card, ...], ...]


@dataclass(frozen=True, slots=True)
class GameEnded:
    """``winner`` won the game (``score.match``); ``seed`` is revealed (``fair.commit``)."""

    winner: int
    scores: tuple[int, ...]
    seed: bytes | None


Event = (
    GameCreated
    | DealerDrawn
    | RoundStarted
    | CardFlipped
    | FlipReturned
    | PileReshuffled
    | CardPlayed
    | CardDrawn
    | Passed
    | CardsTaken
    | LauncherPressed
    | DirectionReversed
    | ColourChosen
    | HandsTraded
    | HandsRotated
    | JumpedIn
    | StackAccepted
    | UnoCalled
    | UnoCaught
    | Wd4Accepted
    | Wd4Challenged
    | Prompted
    | RoundEnded
    | GameEnded
)
