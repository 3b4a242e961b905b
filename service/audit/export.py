"""Write a game's accepted commands and their events as an ``uno-game-record/1`` record.

A round dealt from a known deck is written with its ``deck`` (every card then follows from it, and
from the seed for reshuffles and launcher presses); a round whose deck order was unknown is written
with ``hands`` and ``first``, and every line lists the cards its action took from the pile. Launcher
presses are written as counts (with a deck) or card lists (without), one per press, on the line that
caused them. Every item carries the number of its line in the canonical text (header 1, then one line
per command), so that reports on the record can point at them.
"""

from __future__ import annotations

from collections.abc import Sequence

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
    GameCreated,
    GameEnded,
    LauncherPressed,
    RoundStarted,
    Wd4Challenged,
)
from service.rules.simulate import SimulatedGame
from service.rules.violations import Rule

from .record import Action, ActionKind, GameRecord, RecordHeader, RoundBlock, RoundLine


def record_from_game(game: SimulatedGame) -> GameRecord:
    """The record of a simulated game (its seed revealed: the game is over)."""
    created = game.events[0]
    assert isinstance(created, GameCreated)
    return record_from_steps(created, game.steps)


def record_from_steps(
    created: GameCreated,
    steps: Sequence[tuple[Command, tuple[Event, ...]]],
    *,
    reveal_seed: bool | None = None,
) -> GameRecord:
    """The record of a game from its first event and its accepted commands with their events.

    By default the seed is written only once the game has ended (``GameEnded`` reveals it), and an
    unfinished game's record carries the seed's SHA-256 alone; ``reveal_seed`` decides otherwise (the
    adjudicator's early look at a game in progress).
    """
    players = created.players
    revealed = (
        reveal_seed
        if reveal_seed is not None
        else any(isinstance(e, GameEnded) for _, events in steps for e in events)
    )
    header = RecordHeader(
        variant=created.variant,
        players=players,
        options=created.options.to_json(),
        seed_sha256=created.seed_sha256,
        seed=created.seed if revealed else None,
        line=1,
    )
    rounds: list[RoundBlock] = []
    start: RoundLine | None = None
    actions: list[Action] = []
    with_deck = True
    for line, (command, events) in enumerate(steps, start=2):
        if isinstance(command, StartRound):
            if start is not None:
                rounds.append(RoundBlock(start, tuple(actions)))
            started = next(e for e in events if isinstance(e, RoundStarted))
            with_deck = started.deck is not None
            start = _round_line(players, started, events, with_deck, line)
            actions = []
        else:
            actions.append(_action(players, command, events, with_deck, line))
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


def flipped_cards(events: Sequence[Event]) -> tuple[Card, ...]:
    """The cards turned onto the discard pile in ``events`` (first cards, item boxes), in order."""
    return tuple(e.card for e in events if isinstance(e, CardFlipped))


def _taken(players: tuple[str, ...], events: Sequence[Event], with_deck: bool) -> dict[str, tuple[Card, ...]]:
    return {} if with_deck else cards_taken(players, events)


def _round_line(
    players: tuple[str, ...], started: RoundStarted, events: Sequence[Event], with_deck: bool, line: int
) -> RoundLine:
    hands = first = None
    if not with_deck:
        assert started.hands is not None
        hands = dict(zip(players, started.hands, strict=True))
        first = flipped_cards(events)
    return RoundLine(
        round=started.round,
        dealer=players[started.dealer],
        deck=started.deck,
        hands=hands,
        first=first,
        cards=_taken(players, events, with_deck),
        fired=fired_outcomes(events, with_deck),
        line=line,
    )


def _action(
    players: tuple[str, ...], command: Command, events: Sequence[Event], with_deck: bool, line: int
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
    simple = {
        Draw: ActionKind.DRAW,
        Pass: ActionKind.PASS,
        CallUno: ActionKind.CALL_UNO,
        Accept: ActionKind.ACCEPT,
    }
    assert isinstance(command, Draw | Pass | CallUno | Accept)
    return Action(line=line, by=players[command.player], kind=simple[type(command)], cards=taken)
