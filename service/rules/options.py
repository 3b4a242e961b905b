"""Rule sets and per-game options (digest §2–§7, and the house rules of §9), validated once at creation.

Options are fixed when a game is created and recorded in its first event. Every option has a rule-set
default; :func:`make_options` fills the defaults in and rejects anything unknown, out of range, or not
supported by the rule set (``setup.options``) with an :class:`OptionError` that names the option.

The house rules (``house.*``) are all off by default. A game's recorded options leave out the house rules
that are off (:meth:`Options.to_json`), so the first event of a game without house rules reads as it did
before they existed, and a first event written then still decodes (:func:`options_from_json`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any


class Variant(enum.Enum):
    """The four rule sets. The value is the name used in records and on the wire."""

    CLASSIC = "classic"
    SONIC = "sonic"
    ATTACK = "attack"
    MARIO_KART = "mario-kart"

    __hash__ = object.__hash__  # identity hashing, as for Face: the decider looks the rule set up per play

    @staticmethod
    def parse(name: str) -> Variant:
        """The variant called ``name``; raises :class:`OptionError` for an unknown name."""
        try:
            return Variant(name)
        except ValueError:
            known = ", ".join(v.value for v in Variant)
            raise OptionError(f"unknown variant {name!r} (known: {known})") from None


class Stacking(enum.Enum):
    """``house.stacking``: which draw cards may be stacked on a pending draw penalty.

    UNO Attack reads Hit 2 for Draw Two and Wild Hit 4 for Wild Draw Four.
    """

    OFF = "off"
    DRAW_TWO = "draw-two"  # a +2 on a +2
    DRAW_FOUR = "draw-four"  # a W+4 on a W+4
    ANY = "any"  # both, and a W+4 on a +2 (never a +2 on a W+4)

    __hash__ = object.__hash__


class OptionError(ValueError):
    """An unknown option, a value of the wrong type or out of range, or an option the rule set does not
    support: the rule ``setup.options`` is broken. ``option`` names the option (``None`` for the variant)."""

    def __init__(self, message: str, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


class DealerSelection(enum.Enum):
    """How the first round's dealer is found (``setup.dealer``)."""

    GIVEN = "given"
    DRAW = "draw"


class CustomAction(enum.Enum):
    """What the UNO Attack Wild Customizable does (``attack.customizable``), fixed at creation."""

    PLAIN = "plain"  # unset: a plain wild
    TARGET_PRESS = "target-press"  # a named player presses N times
    ALL_PRESS = "all-press"  # every other player presses N times
    SKIP = "skip"
    REVERSE = "reverse"
    TRADE_HANDS = "trade-hands"


#: The launcher's default distribution of how many cards one press fires (index = cards fired).
#: Weights, not probabilities: a press fires k cards with chance ``weight[k] / sum(weights)``.
#: Often nothing (45 %), sometimes a few, rarely many (up to 6), as the seed describes the toy.
DEFAULT_LAUNCHER_WEIGHTS: tuple[int, ...] = (45, 20, 13, 9, 6, 4, 3)


@dataclass(frozen=True, slots=True)
class Options:
    """Every option of the digest, with its value for one game. Build with :func:`make_options`."""

    target_score: int
    single_round: bool
    dealer_selection: DealerSelection
    two_player_reverse_skips: bool
    wd4_wilds_block: bool
    attack_edition: str
    attack_follow_up: bool
    launcher_weights: tuple[int, ...]
    custom_action: CustomAction
    custom_count: int
    # The house rules (digest §9): all off by default.
    stacking: Stacking = Stacking.OFF
    jump_in: bool = False
    seven_o: bool = False
    draw_to_match: bool = False
    force_play: bool = False
    wd4_any_time: bool = False

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values, as recorded in the game's first event and in records.

        House rules that are off are left out: they are the default, and a game without any reads as
        one recorded before house rules existed.
        """
        out = asdict(self)
        out["dealer_selection"] = self.dealer_selection.value
        out["custom_action"] = self.custom_action.value
        out["launcher_weights"] = list(self.launcher_weights)
        out["stacking"] = self.stacking.value
        for name in HOUSE_RULES:
            if out[name] == _HOUSE_DEFAULTS[name]:
                del out[name]
        return out

    def house_rules(self) -> dict[str, Any]:
        """The house rules that are on, by option name (empty for a game by the book). Read field by
        field: every game view shows them, and ``to_json`` copies every option."""
        on: dict[str, Any] = {}
        if self.stacking is not Stacking.OFF:
            on["stacking"] = self.stacking.value
        for name in HOUSE_RULES[1:]:
            if getattr(self, name):
                on[name] = True
        return on


_DEFAULTS: dict[Variant, dict[str, Any]] = {
    Variant.CLASSIC: {"dealer_selection": "draw", "single_round": False, "wd4_wilds_block": False},
    Variant.SONIC: {"dealer_selection": "given", "single_round": True, "wd4_wilds_block": True},
    Variant.ATTACK: {"dealer_selection": "given", "single_round": False, "wd4_wilds_block": False},
    Variant.MARIO_KART: {"dealer_selection": "draw", "single_round": False, "wd4_wilds_block": False},
}
_COMMON_DEFAULTS: dict[str, Any] = {
    "target_score": 500,
    "two_player_reverse_skips": True,
    "attack_edition": "original",
    "attack_follow_up": True,
    "launcher_weights": DEFAULT_LAUNCHER_WEIGHTS,
    "custom_action": "plain",
    "custom_count": 2,
}
ATTACK_EDITIONS = ("original", "2010")
_OPTION_NAMES = tuple(f.name for f in fields(Options))

#: The house-rule options (digest §9), with their values when off.
_HOUSE_DEFAULTS: dict[str, Any] = {
    "stacking": Stacking.OFF.value,
    "jump_in": False,
    "seven_o": False,
    "draw_to_match": False,
    "force_play": False,
    "wd4_any_time": False,
}
HOUSE_RULES = tuple(_HOUSE_DEFAULTS)

#: House rules a rule set does not support (``setup.options``): UNO Attack has no draw pile to draw
#: from until a match, and no Wild Draw Four to play at any time.
UNSUPPORTED: dict[Variant, frozenset[str]] = {
    Variant.CLASSIC: frozenset(),
    Variant.SONIC: frozenset(),
    Variant.MARIO_KART: frozenset(),
    Variant.ATTACK: frozenset({"draw_to_match", "force_play", "wd4_any_time"}),
}


def _shown(value: Any) -> str:
    """``value`` for a message, cut short: an option's value comes from the caller and may be huge."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise OptionError(f"option {name} must be true or false, not {_shown(value)}", name)
    return value


def _int(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise OptionError(
            f"option {name} must be a whole number from {low} to {high}, not {_shown(value)}", name
        )
    return value


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise OptionError(f"option {name} must be one of {', '.join(allowed)}, not {_shown(value)}", name)
    return value


def make_options(variant: Variant, given: Mapping[str, Any] | None = None) -> Options:
    """Validate ``given`` (option name → JSON value) and fill in ``variant``'s defaults.

    Raises :class:`OptionError` (``setup.options``) for an unknown option, a bad value, or a house rule
    ``variant`` does not support — named at all, even as off: a table that asks for it is told at once.
    """
    values: dict[str, Any] = {**_COMMON_DEFAULTS, **_DEFAULTS[variant], **_HOUSE_DEFAULTS}
    for name, value in (given or {}).items():
        if name not in _OPTION_NAMES:
            shown = name if len(name) <= 64 else name[:61] + "..."
            raise OptionError(f"unknown option {shown!r} (known: {', '.join(_OPTION_NAMES)})", name)
        if name in UNSUPPORTED[variant]:
            raise OptionError(f"option {name} is not a house rule of {variant.value}", name)
        values[name] = value
    edition = values["attack_edition"]
    if isinstance(edition, int) and not isinstance(edition, bool):
        edition = str(edition)  # records may write the year as a number
    weights = values["launcher_weights"]
    if (
        not isinstance(weights, list | tuple)
        or not weights
        or any(isinstance(w, bool) or not isinstance(w, int) or w < 0 for w in weights)
        or sum(weights) <= 0
        or len(weights) > 32
    ):
        raise OptionError(
            "option launcher_weights must be a list of 1 to 32 non-negative whole numbers with a "
            f"positive sum, not {_shown(weights)}",
            "launcher_weights",
        )
    return Options(
        target_score=_int("target_score", values["target_score"], 1, 1_000_000),
        single_round=_bool("single_round", values["single_round"]),
        dealer_selection=DealerSelection(
            _choice("dealer_selection", values["dealer_selection"], ("given", "draw"))
        ),
        two_player_reverse_skips=_bool("two_player_reverse_skips", values["two_player_reverse_skips"]),
        wd4_wilds_block=_bool("wd4_wilds_block", values["wd4_wilds_block"]),
        attack_edition=_choice("attack_edition", edition, ATTACK_EDITIONS),
        attack_follow_up=_bool("attack_follow_up", values["attack_follow_up"]),
        launcher_weights=tuple(weights),
        custom_action=CustomAction(
            _choice("custom_action", values["custom_action"], tuple(a.value for a in CustomAction))
        ),
        custom_count=_int("custom_count", values["custom_count"], 1, 10),
        stacking=Stacking(_choice("stacking", values["stacking"], tuple(m.value for m in Stacking))),
        jump_in=_bool("jump_in", values["jump_in"]),
        seven_o=_bool("seven_o", values["seven_o"]),
        draw_to_match=_bool("draw_to_match", values["draw_to_match"]),
        force_play=_bool("force_play", values["force_play"]),
        wd4_any_time=_bool("wd4_any_time", values["wd4_any_time"]),
    )


def options_from_json(values: Mapping[str, Any]) -> Options:
    """The options recorded by :meth:`Options.to_json`, validated again.

    Every option but the house rules must be present; a house rule absent was off (see the module
    docstring). The house rules recorded are checked against no rule set here: the game's creation did.
    """
    missing = [name for name in _OPTION_NAMES if name not in values and name not in _HOUSE_DEFAULTS]
    if missing:
        raise OptionError(f"recorded options lack {', '.join(missing)}", missing[0])
    return make_options(Variant.CLASSIC, values)  # every value is given, so no rule set's default applies


def deck_name(variant: Variant, options: Options) -> str:
    """The key of :data:`service.rules.cards.DECKS` that this game is dealt from."""
    if variant is Variant.ATTACK and options.attack_edition == "2010":
        return "attack-2010"
    return variant.value
