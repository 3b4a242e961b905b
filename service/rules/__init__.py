"""The pure rules engine of uno-audit: four UNO rule sets as one decider.

``decide(state, command)`` answers with the events a command produces or the rule it breaks;
``evolve(state, event)`` applies one event. No I/O, no clock, no logging; randomness comes only from
the game's seed (:mod:`service.rules.fair`). Rule ids are those of ``docs/RULES.md``.

Each rule family has one module (:mod:`service.rules.decide` lists them), and ``VARIANT_RULES``
(:mod:`service.rules.variants`) is the one place where the four rule sets differ in play.
"""

from service.rules.cards import DECKS, Card, CardError, Colour, Face, card, cards
from service.rules.commands import (
    NO_SUPPLY,
    Accept,
    CallUno,
    Catch,
    Challenge,
    Choose,
    Command,
    CreateGame,
    Draw,
    Pass,
    Play,
    Press,
    Reshuffle,
    StartRound,
    Supply,
)
from service.rules.decide import check, create, decide, execute, resolve
from service.rules.events import Awaiting, Event
from service.rules.legality import playable
from service.rules.options import OptionError, Options, Variant, make_options
from service.rules.state import State, conservation_error, evolve, fold, new_state
from service.rules.variants import VARIANT_RULES, VariantRules
from service.rules.violations import CommandError, Impossible, Rule, Violation

__all__ = [
    "DECKS",
    "NO_SUPPLY",
    "VARIANT_RULES",
    "Accept",
    "Awaiting",
    "CallUno",
    "Card",
    "CardError",
    "Catch",
    "Challenge",
    "Choose",
    "Colour",
    "Command",
    "CommandError",
    "CreateGame",
    "Draw",
    "Event",
    "Face",
    "Impossible",
    "OptionError",
    "Options",
    "Pass",
    "Play",
    "Press",
    "Reshuffle",
    "Rule",
    "StartRound",
    "State",
    "Supply",
    "Variant",
    "VariantRules",
    "Violation",
    "card",
    "cards",
    "check",
    "conservation_error",
    "create",
    "decide",
    "evolve",
    "execute",
    "fold",
    "make_options",
    "new_state",
    "playable",
    "resolve",
]
