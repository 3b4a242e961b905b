"""Commands: what a player (or the table) asks the game to do. :func:`service.rules.decide` judges them.

Players are seat numbers (0-based, clockwise in the order given at creation).

:class:`Supply` carries what a *table* reported when the engine cannot know it itself: the cards a
player took from a draw pile whose order is unknown, how many cards a launcher fired in a game without
a seed. A game dealt from a seed, or from a known deck order, ignores it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from service.rules.cards import Card, Colour
from service.rules.options import Options, Variant

PressOutcome = int | tuple[Card, ...]
"""What one launcher press fired as a table reported it: a count (known pile order) or the cards."""

_NO_DRAWS: Mapping[int, tuple[Card, ...]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Supply:
    """Table-reported outcomes, consumed in the order the engine needs them.

    ``draws[seat]`` lists the cards ``seat`` takes from the pile during the command, in order;
    ``presses`` lists each launcher press's outcome in order; ``flips`` the cards turned over
    (first cards, item boxes) in order; ``reshuffles`` the new draw piles (top first) of the reshuffles
    the command needs when the pile runs out in the middle of it, in order — a game with a seed derives
    them instead.
    """

    draws: Mapping[int, tuple[Card, ...]] = field(default_factory=lambda: _NO_DRAWS)
    presses: tuple[PressOutcome, ...] = ()
    flips: tuple[Card, ...] = ()
    reshuffles: tuple[tuple[Card, ...], ...] = ()


NO_SUPPLY = Supply()


@dataclass(frozen=True, slots=True)
class CreateGame:
    """Create a game. ``seed`` deals it fairly (``fair.commit``); ``None`` reconstructs a table game
    whose cards come from the rounds' given decks or from :class:`Supply`. ``dealer`` is the first
    round's dealer when dealer selection is ``given`` (default: seat 0)."""

    variant: Variant
    players: tuple[str, ...]
    options: Options
    seed: bytes | None
    dealer: int | None = None


@dataclass(frozen=True, slots=True)
class StartRound:
    """Deal the next round. ``deck`` fixes the shuffled deck (top first); ``hands`` gives dealt hands of a
    table game whose deck order is unknown (then ``supply.flips`` lists the first cards turned).
    ``dealer`` states the round's dealer when the caller knows it (checked against the rules).
    ``fixed_by`` names who fixed ``deck`` in a game that commits to a seed: the round is then dealt from
    that deck and says so (``RoundStarted.fixed_by``), instead of claiming the seed's shuffle."""

    dealer: int | None = None
    deck: tuple[Card, ...] | None = None
    hands: tuple[tuple[Card, ...], ...] | None = None
    supply: Supply = NO_SUPPLY
    fixed_by: str | None = None


@dataclass(frozen=True, slots=True)
class Play:
    """``player`` plays ``card``: ``colour`` for a wild, ``uno`` to call UNO with it, ``target`` for a
    card that names a player (a 7 under ``house.seven-o`` too), ``jump_in`` for a play out of turn of a
    card identical to the top card (``house.jump-in``)."""

    player: int
    card: Card
    colour: Colour | None = None
    uno: bool = False
    target: int | None = None
    supply: Supply = NO_SUPPLY
    jump_in: bool = False


@dataclass(frozen=True, slots=True)
class Draw:
    """``player`` draws one card instead of playing (``draw.one``); under ``house.draw-to-match``, cards
    until a playable one."""

    player: int
    supply: Supply = NO_SUPPLY


@dataclass(frozen=True, slots=True)
class Pass:
    """``player`` keeps the drawn card (``draw.pass``) or ends an Attack follow-up chance."""

    player: int


@dataclass(frozen=True, slots=True)
class Press:
    """``player`` presses the UNO Attack launcher instead of playing (``attack.launcher``)."""

    player: int
    supply: Supply = NO_SUPPLY


@dataclass(frozen=True, slots=True)
class CallUno:
    """``player`` calls UNO while holding one card (``uno.call``)."""

    player: int


@dataclass(frozen=True, slots=True)
class Catch:
    """``player`` catches ``target`` for not calling UNO (``uno.catch``)."""

    player: int
    target: int
    supply: Supply = NO_SUPPLY


@dataclass(frozen=True, slots=True)
class Challenge:
    """``player``, the Wild Draw Four victim, challenges it (``wd4.challenge``)."""

    player: int
    supply: Supply = NO_SUPPLY


@dataclass(frozen=True, slots=True)
class Accept:
    """``player``, the Wild Draw Four victim, accepts it and draws four (``wd4.accept``) — or, under
    ``house.stacking``, takes the whole draw penalty stacked against them."""

    player: int
    supply: Supply = NO_SUPPLY


@dataclass(frozen=True, slots=True)
class Choose:
    """``player`` makes the choice the game asked for: a colour or a target."""

    player: int
    colour: Colour | None = None
    target: int | None = None
    supply: Supply = NO_SUPPLY


@dataclass(frozen=True, slots=True)
class Reshuffle:
    """A table reports the new draw pile made from the discard pile (``draw.reshuffle``), top first.

    Only a game without a seed takes it; a seeded game reshuffles by itself."""

    pile: tuple[Card, ...]


Command = StartRound | Play | Draw | Pass | Press | CallUno | Catch | Challenge | Accept | Choose | Reshuffle
TURN_COMMANDS = (Play, Draw, Pass, Press, Challenge, Accept)
