"""The four variants side by side: :data:`VARIANT_RULES` is the one place where they differ in play.

The decider reads a game's :class:`VariantRules` (``VARIANT_RULES[state.variant]``) wherever the
variants part ways, instead of asking which variant it is. What a *game* may change is not here but in
its options (:mod:`service.rules.options`: per-variant defaults such as Sonic's single round and
``wd4_wilds_block``, and the UNO Attack edition, which picks the deck): they are fixed at creation and
recorded, and ``evolve`` needs the deck before any rule runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from service.rules import attack, classic, mario_kart, sonic
from service.rules.cards import Face
from service.rules.commands import Draw, Press
from service.rules.engine import Act, Effect
from service.rules.options import Variant
from service.rules.violations import Rule, Violation


@dataclass(frozen=True, slots=True)
class Taking:
    """How a variant gets cards into hands: from the draw pile, or by pressing UNO Attack's launcher."""

    #: The turn action that takes cards instead of a play: :class:`Draw` (``draw.one``) or
    #: :class:`Press` (``attack.launcher``).
    action: type[Draw] | type[Press]
    #: A rule making ``seat`` take ``count`` cards (the UNO penalty): ``(act, seat, count, cause)``.
    impose: Callable[[Act, int, int, Rule], None]
    #: The answer to the other turn action, which this variant does not have.
    other_action: Violation
    #: The answer to a pass with nothing to pass on (no drawn card, no follow-up chance).
    nothing_to_pass: Violation


def _pile(variant: Variant) -> Taking:
    """Cards come from the draw pile: a player draws one (``draw.one``), a penalty is drawn."""
    return Taking(
        action=Draw,
        impose=Act.take,
        other_action=Violation(Rule.ATTACK_LAUNCHER, f"{variant.value} has no launcher: draw a card"),
        nothing_to_pass=Violation(Rule.DRAW_PASS, "nothing to pass on: play a card or draw one first"),
    )


_LAUNCHER = Taking(
    action=Press,
    impose=Act.presses,
    other_action=Violation(Rule.ATTACK_LAUNCHER, "UNO Attack has no draw pile: press the launcher"),
    nothing_to_pass=Violation(Rule.ATTACK_LAUNCHER, "nothing to pass on: play a card or press the launcher"),
)


@dataclass(frozen=True, slots=True)
class VariantRules:
    """What one variant does its own way."""

    #: What each face does once played (a face missing here acts as a number card).
    effects: Mapping[Face, Effect]
    #: ``setup.first-card``: flips the first card and says who starts, and how.
    first_card: Callable[[Act], None]
    #: How cards are taken: what a draw, a press and a pass mean, and how a penalty is taken.
    taking: Taking


#: The rules of every variant.
VARIANT_RULES: Final[Mapping[Variant, VariantRules]] = MappingProxyType(
    {
        Variant.CLASSIC: VariantRules(
            effects=classic.EFFECTS, first_card=classic.first_card, taking=_pile(Variant.CLASSIC)
        ),
        Variant.SONIC: VariantRules(
            effects=sonic.EFFECTS, first_card=sonic.first_card, taking=_pile(Variant.SONIC)
        ),
        Variant.MARIO_KART: VariantRules(
            effects=mario_kart.EFFECTS, first_card=mario_kart.first_card, taking=_pile(Variant.MARIO_KART)
        ),
        Variant.ATTACK: VariantRules(effects=attack.EFFECTS, first_card=attack.first_card, taking=_LAUNCHER),
    }
)
