"""Cards, faces, colours and the decks of the four rule sets.

A card is written as colour + face (``R7``, ``B+2``); a wild card by its face alone (``W``, ``W+4``), as
in the digest (``docs/RULES.md`` §1) and the game record format. Every :class:`Card` is interned:
:func:`card` (and :meth:`Card.parse`) hand out one object per token, and the engine compares identities,
so cards are never built with ``Card(...)`` outside this module. docs/DESIGN.md ("The rules engine").
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Colour(enum.Enum):
    """One of the four suit colours. The value is the one-letter token."""

    RED = "R"
    YELLOW = "Y"
    GREEN = "G"
    BLUE = "B"

    __hash__ = object.__hash__  # identity hashing, as for Face: a wild's colour keys the shared plays


class Face(enum.Enum):
    """What is printed on a card besides its colour. The value is the token's face part."""

    ZERO = "0"
    ONE = "1"
    TWO = "2"
    THREE = "3"
    FOUR = "4"
    FIVE = "5"
    SIX = "6"
    SEVEN = "7"
    EIGHT = "8"
    NINE = "9"
    SKIP = "S"
    REVERSE = "R"
    DRAW_TWO = "+2"
    WILD = "W"
    WILD_DRAW_FOUR = "W+4"
    # UNO Sonic the Hedgehog
    WILD_VICTORY_LAP = "WVL"
    # UNO Mario Kart
    WILD_ITEM_BOX = "WIB"
    # UNO Attack (both editions)
    HIT_TWO = "H2"
    DISCARD_ALL = "DA"
    TRADE_HANDS = "TH"
    WILD_HIT_FOUR = "WH4"
    WILD_ATTACK_ATTACK = "WAA"
    WILD_CUSTOMIZABLE = "WC"
    WILD_ALL_HIT = "WAH"
    WILD_HIT_FIRE = "WHF"

    # Members are singletons compared by identity, so identity hashing is exact, and it is a C slot
    # instead of Enum's Python-level hash(name): faces key the rules' lookup tables on every play.
    __hash__ = object.__hash__

    @property
    def is_wild(self) -> bool:
        """Wild faces carry no colour of their own."""
        return self in _WILD_FACES

    @property
    def number(self) -> int | None:
        """The face value of a number card, ``None`` for every other face."""
        return _NUMBERS.get(self)


_NUMBERS = {face: int(face.value) for face in Face if face.value.isdigit()}
_WILD_FACES = frozenset(face for face in Face if face.value.startswith("W"))

#: Points a card scores for the round's winner (digest ``score.round``); numbers score face value.
_POINTS = {
    Face.SKIP: 20,
    Face.REVERSE: 20,
    Face.DRAW_TWO: 20,
    Face.HIT_TWO: 20,
    Face.DISCARD_ALL: 30,
    Face.TRADE_HANDS: 30,
    Face.WILD_HIT_FOUR: 40,
    Face.WILD: 50,
    Face.WILD_DRAW_FOUR: 50,
    Face.WILD_VICTORY_LAP: 50,
    Face.WILD_ITEM_BOX: 50,
    Face.WILD_ATTACK_ATTACK: 50,
    Face.WILD_CUSTOMIZABLE: 50,
    Face.WILD_ALL_HIT: 50,
    Face.WILD_HIT_FIRE: 50,
}


class CardError(ValueError):
    """A card token that is not written in the digest's notation."""


@dataclass(frozen=True, slots=True, eq=False)
class Card:
    """One physical card face. Interned: obtain cards with :func:`card`, compare them with ``==``.

    ``eq=False`` keeps identity equality and hashing, which is exact because every card is interned.
    """

    token: str
    colour: Colour | None
    face: Face
    number: int | None
    points: int
    is_wild: bool

    @staticmethod
    def parse(token: str) -> Card:
        """The card written as ``token`` (``"R7"``, ``"W+4"``); raises :class:`CardError` if malformed."""
        found = _BY_TOKEN.get(token)
        if found is None:
            raise CardError(f"unknown card token {token!r}")
        return found

    def __repr__(self) -> str:
        return f"Card({self.token})"

    def __str__(self) -> str:
        return self.token

    def __reduce__(self) -> tuple[object, tuple[str]]:
        # Unpickling must hand back the interned object, not a copy.
        return (Card.parse, (self.token,))


def _make(colour: Colour | None, face: Face) -> Card:
    token = face.value if colour is None else colour.value + face.value
    points = _POINTS.get(face, face.number or 0)
    return Card(token, colour, face, face.number, points, face.is_wild)


_BY_TOKEN: dict[str, Card] = {}
for _face in Face:
    if _face.is_wild:
        _BY_TOKEN[_face.value] = _make(None, _face)
    else:
        for _colour in Colour:
            _BY_TOKEN[_colour.value + _face.value] = _make(_colour, _face)


def card(token: str) -> Card:
    """The interned card for ``token``; raises :class:`CardError` if the token is unknown."""
    return Card.parse(token)


def cards(tokens: Iterable[str]) -> tuple[Card, ...]:
    """Parse several tokens; a space-separated string is accepted too (``cards("R1 G2 W")``)."""
    if isinstance(tokens, str):
        tokens = tokens.split()
    return tuple(Card.parse(token) for token in tokens)


def tokens(hand: Iterable[Card]) -> list[str]:
    """The tokens of ``hand``, in order: the inverse of :func:`cards`."""
    return [c.token for c in hand]


def hand_points(hand: Iterable[Card]) -> int:
    """What ``hand`` scores for the round's winner (digest ``score.round``)."""
    return sum(c.points for c in hand)


# --- Decks (digest ``deck.composition``) ------------------------------------------------------------

_NUMBER_FACES = tuple(f for f in Face if f.number is not None)


def _per_colour(counts: dict[Face, int]) -> list[Card]:
    return [_BY_TOKEN[c.value + f.value] for c in Colour for f, n in counts.items() for _ in range(n)]


def _wilds(counts: dict[Face, int]) -> list[Card]:
    return [_BY_TOKEN[f.value] for f, n in counts.items() for _ in range(n)]


_CLASSIC_COLOURED = (
    {Face.ZERO: 1}
    | {f: 2 for f in _NUMBER_FACES[1:]}
    | {
        Face.SKIP: 2,
        Face.REVERSE: 2,
        Face.DRAW_TWO: 2,
    }
)
_ATTACK_NUMBERS = {f: 2 for f in _NUMBER_FACES[1:]}

#: Every deck, in a fixed canonical order (colours R Y G B, faces in :class:`Face` order, then wilds).
DECKS: dict[str, tuple[Card, ...]] = {
    "classic": tuple(_per_colour(_CLASSIC_COLOURED) + _wilds({Face.WILD: 4, Face.WILD_DRAW_FOUR: 4})),
    "sonic": tuple(
        _per_colour(_CLASSIC_COLOURED)
        + _wilds({Face.WILD: 4, Face.WILD_DRAW_FOUR: 4, Face.WILD_VICTORY_LAP: 4})
    ),
    "mario-kart": tuple(
        _per_colour(_CLASSIC_COLOURED) + _wilds({Face.WILD_DRAW_FOUR: 4, Face.WILD_ITEM_BOX: 8})
    ),
    "attack": tuple(
        _per_colour(_ATTACK_NUMBERS | {Face.REVERSE: 1, Face.HIT_TWO: 2, Face.SKIP: 2, Face.DISCARD_ALL: 2})
        + _wilds(
            {
                Face.WILD: 4,
                Face.WILD_ATTACK_ATTACK: 4,
                Face.WILD_CUSTOMIZABLE: 3,
                Face.WILD_HIT_FOUR: 1,
            }
        )
    ),
    "attack-2010": tuple(
        _per_colour(
            _ATTACK_NUMBERS
            | {
                Face.HIT_TWO: 2,
                Face.SKIP: 2,
                Face.REVERSE: 2,
                Face.DISCARD_ALL: 1,
                Face.TRADE_HANDS: 1,
            }
        )
        + _wilds({Face.WILD: 4, Face.WILD_ALL_HIT: 2, Face.WILD_HIT_FIRE: 2})
    ),
}
