"""Write a game's accepted commands and their events as an ``uno-game-record/1`` record.

A record gives the cards that come from the pile in one of three ways (:class:`RecordMode`): ``SEED``
(decks, and the seed once revealed), ``DECK`` (decks, reshuffles and launcher counts) or ``HANDS`` (dealt
hands, and every card each line took). Every item carries the number of its line in the canonical text,
and the three records of one game replay to the same table, scores and rulings. docs/DESIGN.md
("Replaying a record") and docs/RECORD.md give the details.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence

from service.play.simulate import SimulatedGame
from service.records.record import Action, ActionKind, GameRecord, RecordHeader, RoundBlock, RoundLine
from service.rules.cards import Card
from service.rules.commands import (
    Accept,
    CallUno,
    Catch,
    Challenge,
    Choose,
    Command,
    Draw,
    Pass,
    Play,
    Press,
    PressOutcome,
    Reshuffle,
    StartRound,
)
from service.rules.events import (
    CardDrawn,
    CardFlipped,
    CardsTaken,
    Event,
    FlipReturned,
    GameCreated,
    GameEnded,
    LauncherPressed,
    PileReshuffled,
    RoundStarted,
    Wd4Challenged,
)
from service.rules.state import deal
from service.rules.violations import Rule


class RecordMode(enum.Enum):
    """How a record gives the cards that come from the pile (see the module docstring)."""

    SEED = "seed"
    DECK = "deck"
    HANDS = "hands"


def record_from_game(game: SimulatedGame, mode: RecordMode = RecordMode.SEED) -> GameRecord:
    """The record of a simulated game (in ``SEED`` mode its seed revealed: the game is over)."""
    created = game.events[0]
    assert isinstance(created, GameCreated)
    return record_from_steps(created, game.steps, mode=mode)


def record_from_steps(
    created: GameCreated,
    steps: Sequence[tuple[Command, tuple[Event, ...]]],
    *,
    reveal_seed: bool | None = None,
    mode: RecordMode = RecordMode.SEED,
) -> GameRecord:
    """The record of a game from its first event and its accepted commands with their events.

    In ``SEED`` mode the seed is written, by default, only once the game has ended (``GameEnded``
    reveals it), and an unfinished game's record carries the seed's SHA-256 alone; ``reveal_seed``
    decides otherwise (the adjudicator's early look at a game in progress). The other modes write no
    seed at all.
    """
    players = created.players
    revealed = (
        reveal_seed
        if reveal_seed is not None
        else any(isinstance(e, GameEnded) for _, events in steps for e in events)
    )
    seeded = mode is RecordMode.SEED
    header = RecordHeader(
        variant=created.variant,
        players=players,
        options=created.options.to_json(),
        seed_sha256=created.seed_sha256 if seeded else None,
        seed=created.seed if revealed and seeded else None,
        line=1,
    )
    # Only a record without a seed gives the piles of the reshuffles the seed would otherwise make.
    piles = mode is RecordMode.DECK
    rounds: list[RoundBlock] = []
    start: RoundLine | None = None
    actions: list[Action] = []
    with_deck = True
    for line, (command, events) in enumerate(steps, start=2):
        if isinstance(command, StartRound):
            if start is not None:
                rounds.append(RoundBlock(start, tuple(actions)))
            started = next(e for e in events if isinstance(e, RoundStarted))
            with_deck = started.deck is not None and mode is not RecordMode.HANDS
            start = _round_line(players, started, events, with_deck, line, piles, seeded=seeded)
            actions = []
        else:
            action = _action(players, command, events, with_deck, line)
            if piles and with_deck:
                action = dataclasses.replace(action, reshuffles=new_piles(events))
            actions.append(action)
    if start is not None:
        rounds.append(RoundBlock(start, tuple(actions)))
    return GameRecord(header, tuple(rounds))


def cards_taken(players: tuple[str, ...], events: Sequence[Event]) -> dict[str, tuple[Card, ...]]:
    """What each player took from the draw pile in ``events``, as a line's ``cards`` lists it: drawn
    cards and imposed draws, in order (launcher presses are ``fired``, flips ``first``/``flip``)."""
    taken: dict[str, tuple[Card, ...]] = {}
    for event in events:
        if isinstance(event, CardsTaken | CardDrawn):
            cards = event.cards if isinstance(event, CardsTaken) else (event.card,)
            name = players[event.player]
            taken[name] = taken.get(name, ()) + cards
    return taken


def fired_outcomes(
    events: Sequence[Event], with_deck: bool, imposed_only: bool = True
) -> tuple[PressOutcome, ...]:
    """The launcher presses in ``events`` as a line's ``fired`` gives them: counts (``with_deck``) or card
    lists. ``imposed_only`` leaves out a press the player chose (a ``press`` line's own outcome)."""
    return tuple(
        len(e.cards) if with_deck else e.cards
        for e in events
        if isinstance(e, LauncherPressed) and not (imposed_only and e.cause is Rule.ATTACK_LAUNCHER)
    )


def new_piles(events: Sequence[Event]) -> tuple[tuple[Card, ...], ...]:
    """The draw piles (top first) that reshuffles made in ``events`` in a known order — the pile run out,
    or a first card returned to it — as a line's ``reshuffle`` gives them."""
    return tuple(
        e.pile for e in events if isinstance(e, FlipReturned) or (isinstance(e, PileReshuffled) and e.ordered)
    )


def flipped_cards(events: Sequence[Event]) -> tuple[Card, ...]:
    """The cards turned onto the discard pile in ``events`` (first cards, item boxes), in order."""
    return tuple(e.card for e in events if isinstance(e, CardFlipped))


def _taken(players: tuple[str, ...], events: Sequence[Event], with_deck: bool) -> dict[str, tuple[Card, ...]]:
    return {} if with_deck else cards_taken(players, events)


def _round_line(
    players: tuple[str, ...],
    started: RoundStarted,
    events: Sequence[Event],
    with_deck: bool,
    line: int,
    piles: bool,
    *,
    seeded: bool = True,
) -> RoundLine:
    """The round line of ``started``; ``seeded``: the record commits to the game's seed, so a round dealt
    from a fixed deck says who fixed it (a record without the seed claims no seed's shuffle)."""
    hands = first = None
    if not with_deck:
        dealt = started.hands
        if dealt is None:
            assert started.deck is not None
            dealt, _ = deal(started.deck, len(players), started.dealer)
        hands = dict(zip(players, dealt, strict=True))
        first = flipped_cards(events)
    return RoundLine(
        round=started.round,
        dealer=players[started.dealer],
        deck=started.deck if with_deck else None,
        hands=hands,
        first=first,
        cards=_taken(players, events, with_deck),
        fired=fired_outcomes(events, with_deck),
        line=line,
        reshuffles=new_piles(events) if piles and with_deck else (),
        fixed_by=started.fixed_by if seeded and with_deck else None,
    )


def _action(
    players: tuple[str, ...],
    command: Command,
    events: Sequence[Event],
    with_deck: bool,
    line: int,
) -> Action:
    taken = _taken(players, events, with_deck)
    fired = fired_outcomes(events, with_deck)
    if isinstance(command, Play):
        flips = flipped_cards(events)
        return Action(
            line=line,
            by=players[command.player],
            kind=ActionKind.PLAY,
            card=command.card,
            colour=command.colour,
            uno=command.uno,
            target=players[command.target] if command.target is not None else None,
            cards=taken,
            fired=fired,
            flip=flips[0] if flips and not with_deck else None,
            jump_in=command.jump_in,
        )
    if isinstance(command, Press):
        return Action(
            line=line,
            by=players[command.player],
            kind=ActionKind.PRESS,
            fired=fired_outcomes(events, with_deck, False),
        )
    if isinstance(command, Catch):
        return Action(
            line=line,
            by=players[command.player],
            kind=ActionKind.CATCH,
            target=players[command.target],
            applied="penalty",
            cards=taken,
            fired=fired,
        )
    if isinstance(command, Challenge):
        judged = next(e for e in events if isinstance(e, Wd4Challenged))
        return Action(
            line=line,
            by=players[command.player],
            kind=ActionKind.CHALLENGE,
            applied="upheld" if judged.upheld else "failed",
            cards=taken,
        )
    if isinstance(command, Choose):
        return Action(
            line=line,
            by=players[command.player],
            kind=ActionKind.CHOOSE,
            colour=command.colour,
            target=players[command.target] if command.target is not None else None,
            cards=taken,
        )
    if isinstance(command, Reshuffle):
        return Action(line=line, by=None, kind=ActionKind.RESHUFFLE, pile=command.pile)
    if isinstance(command, Accept):
        # A W+4 accepted, or a stacked penalty taken (``house.stacking``): in UNO Attack a stack of Hit 2
        # and Wild Hit 4 is taken as launcher presses, which the line gives like any imposed press.
        return Action(line=line, by=players[command.player], kind=ActionKind.ACCEPT, cards=taken, fired=fired)
    # A draw under house.draw-to-match takes several cards (one CardDrawn each): still one line, whose
    # ``cards`` (without a deck) lists them all in order.
    simple = {Draw: ActionKind.DRAW, Pass: ActionKind.PASS, CallUno: ActionKind.CALL_UNO}
    assert isinstance(command, Draw | Pass | CallUno)
    return Action(line=line, by=players[command.player], kind=simple[type(command)], cards=taken)
