"""The replay verifier for game records: re-run a record through the rules engine and adjudicate it.

:func:`verify_record` replays a :class:`~service.records.record.GameRecord` line by line with the service's
decider, collecting every violation (a broken rule is reported, then applied as the table did), ruling on
every UNO catch and Wild Draw Four challenge with the evidence, checking what came from the pile
(``fair.commit``), and stopping with one finding where the record can no longer be followed. The report
is typed (:mod:`service.records.report`). docs/DESIGN.md ("Replaying a record").
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NoReturn

from service.domain.entries import DisputeKind
from service.records.export import _action as action_line
from service.records.export import _round_line as round_line
from service.records.export import cards_taken, fired_outcomes, flipped_cards, new_piles
from service.records.record import Action, ActionKind, GameRecord, RoundLine
from service.records.report import (
    CatchEvidence,
    ChallengeEvidence,
    FinalTable,
    Finding,
    FixedDeck,
    Outcome,
    RefusedChallengeEvidence,
    RoundScore,
    RulesReport,
    Ruling,
    StackedChallengeEvidence,
    Verdict,
)
from service.rules import fair
from service.rules.cards import Card, Face, tokens
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
    PressOutcome,
    Reshuffle,
    StartRound,
    Supply,
)
from service.rules.decide import check, create, resolve
from service.rules.events import (
    Awaiting,
    CardDrawn,
    CardPlayed,
    Event,
    HandsRotated,
    HandsTraded,
    RoundStarted,
    UnoCalled,
    UnoCaught,
    Wd4Challenged,
)
from service.rules.options import Stacking, Variant, make_options
from service.rules.state import HAND_SIZE, State, new_state
from service.rules.uno import catch_reason
from service.rules.violations import Impossible, Rule, Violation


@dataclass(slots=True)
class Report:
    """What the replay found, as it goes: findings and rulings by record line, the state it reached and
    the events it applied. :meth:`rules` gives the report (:class:`~service.records.report.RulesReport`)."""

    variant: Variant
    players: tuple[str, ...]
    violations: list[Finding] = field(default_factory=list)
    rulings: list[Ruling] = field(default_factory=list)
    fixed_decks: list[FixedDeck] = field(default_factory=list)
    stopped_at: int | None = None  # the line the record could no longer be followed at
    state: State | None = None
    #: The events the replay applied for each line (line → events), in order; lines that changed
    #: nothing (a catch that earned no penalty, a refused challenge) have none.
    events: dict[int, list[Event]] = field(default_factory=dict)

    def rules(self) -> RulesReport:
        """The report: the findings and rulings, and the outcome and final table of the state reached."""
        state = self.state
        if state is None:  # the game could not even be created
            outcome = Outcome((), dict.fromkeys(self.players, 0), None)
            final = FinalTable({}, None, None, None)
        else:
            players = state.players
            outcome = Outcome(
                tuple(RoundScore(r.round, players[r.winner], r.points) for r in state.results),
                dict(zip(players, state.scores, strict=True)),
                None if state.winner is None else players[state.winner],
            )
            final = FinalTable(
                dict(zip(players, state.hands, strict=True)),
                state.discard[-1] if state.discard else None,
                state.colour,
                players[state.turn] if state.in_round() else None,
            )
        return RulesReport(
            self.variant,
            tuple(self.violations),
            tuple(self.rulings),
            outcome,
            final,
            self.stopped_at,
            fixed_decks=tuple(self.fixed_decks),
        )


class _Stop(Exception):
    """The record cannot be followed past this point."""


class Replay:
    """The running replay of one record (see :func:`verify_record`).

    ``where`` names a line in messages (``"line 12"``; a stored game's report names event positions).
    :meth:`run` replays the whole record; :meth:`rule_on` then judges one more catch or challenge, as if
    it were the record's next line (the adjudication of a catch or challenge that was never recorded).
    """

    def __init__(self, record: GameRecord, where: Callable[[int], str] = "line {}".format) -> None:
        header = record.header
        self.record = record
        self.where = where
        self.players = header.players
        self.seat = {name: i for i, name in enumerate(header.players)}
        self.report = Report(header.variant, header.players)
        self.state: State | None = None
        # UNO windows, for the reasons given with catch rulings: seat -> line the window opened at,
        # and the line it closed or the player called at.
        self.window_opened: dict[int, int] = {}
        self.window_closed: dict[int, int] = {}
        self.called_at: dict[int, int] = {}
        self.caught_at: dict[int, int] = {}
        self.wd4_line: int | None = None  # the line of the last Wild Draw Four played, by whom, on whom
        self.wd4_by: int | None = None
        self.wd4_victim: int | None = None
        self.auto_ended_draw: int | None = None  # seat whose unplayable draw just ended their turn

    # --- driving ---------------------------------------------------------------------------------------

    def run(self) -> Report:
        """Replay the record."""
        if not self.create(self.record.rounds[0].start.dealer if self.record.rounds else None):
            return self.report
        with contextlib.suppress(_Stop):
            for block in self.record.rounds:
                self.start_round(block.start)
                for action in block.actions:
                    self.action(action)
        self.report.state = self.state
        return self.report

    def run_commands(self, steps: Sequence[tuple[Command, tuple[Event, ...]]]) -> Report:
        """Replay a game given as its accepted commands, each with the events it wrote (a stored game read
        back: :meth:`GameLog.commands <service.audit.log.GameLog.commands>`), under the record's header.

        Each command is judged exactly as the line of a ``SEED`` record that
        :func:`~service.records.export.record_from_steps` writes of it, which stands at line ``i + 2`` for
        command ``i``: only the record is not written and read back. A round start, a catch or a challenge
        (their judgments read their line) and any command of a round dealt without a deck go through their
        line; any other command is carried out as it is, with the supply its line gives (the launcher
        presses its events fired; the rest comes from the deck). Like the record, commands before the
        first round start are left out.
        """
        players = self.players
        first = next((_started(events) for command, events in steps if isinstance(command, StartRound)), None)
        if not self.create(None if first is None else players[first.dealer]):
            return self.report
        with_deck, dealt = True, False
        with contextlib.suppress(_Stop):
            for line, (command, events) in enumerate(steps, start=2):
                if isinstance(command, StartRound):
                    started = _started(events)
                    with_deck, dealt = started.deck is not None, True
                    self.start_round(round_line(players, started, events, with_deck, line, False))
                elif not dealt:
                    continue
                elif with_deck and not isinstance(command, _RULED):
                    self.carry_out_with_deck(line, command, events)
                else:
                    self.action(action_line(players, command, events, with_deck, line))
        self.report.state = self.state
        return self.report

    def create(self, first_dealer: str | None) -> bool:
        """Create the game of the record's header, ``first_dealer`` dealing the first round; whether it
        could be (else the violation is reported)."""
        header = self.record.header
        options = make_options(header.variant, header.options)
        created = create(
            CreateGame(
                header.variant,
                header.players,
                options,
                header.seed,
                self.seat[first_dealer] if first_dealer is not None else None,
            )
        )
        if isinstance(created, Violation):
            self.violation(header.line, created.rule, created.message)
            return False
        self.state = new_state(created)
        return True

    def violation(self, line: int, rule: Rule, message: str) -> None:
        self.report.violations.append(Finding(line, rule, message))

    def rule_on(self, action: Action) -> Ruling | None:
        """Judge ``action`` (a catch or a challenge) at the point the replay reached, and apply it as its
        ``applied`` says; the ruling, or ``None`` when the replay had stopped before."""
        if self.state is None or self.report.stopped_at is not None:
            return None
        assert action.kind in (ActionKind.CATCH, ActionKind.CHALLENGE)
        before = len(self.report.rulings)
        with contextlib.suppress(_Stop):
            self.action(action)
        self.report.state = self.state
        return self.report.rulings[before] if len(self.report.rulings) > before else None

    def apply(self, line: int, command: Command, *, upheld: bool | None = None) -> tuple[Event, ...]:
        """Carry ``command`` out as the table did; stop the replay if it cannot happen."""
        assert self.state is not None
        try:
            events, self.state = resolve(self.state, command, upheld=upheld)
        except Impossible as impossible:
            self.stop(line, impossible.rule, impossible.message)
        self.report.events.setdefault(line, []).extend(events)
        return events

    def stop(self, line: int, rule: Rule, message: str) -> NoReturn:
        """Report that the record cannot be followed past ``line`` and end the replay.

        When the judgement of the same line already named this rule, that finding is the one fault and
        says so (one mistake, one finding).
        """
        text = f"the record cannot be followed: {message}"
        found = self.report.violations
        if found and (found[-1].at, found[-1].rule) == (line, rule):
            found[-1] = Finding(line, rule, text)
        else:
            self.violation(line, rule, text)
        self.report.stopped_at = line
        raise _Stop

    def judge_and_apply(self, line: int, command: Command) -> tuple[Event, ...]:
        assert self.state is not None
        found = check(self.state, command)
        if found is not None:
            self.violation(line, found.rule, found.message)
        return self.apply(line, command)

    # --- round lines -------------------------------------------------------------------------------------

    def start_round(self, start: RoundLine) -> None:
        assert self.state is not None
        seed = self.record.header.seed
        if start.fixed_by is not None:
            # The round says it was dealt from a fixed deck: the report says so, and the seed is not
            # asked for this deal. Everything else is checked as in any round (the deck is the rule
            # set's, the deal and every card after it come from it in order, presses and reshuffles
            # from the seed).
            self.report.fixed_decks.append(FixedDeck(start.line, start.round, start.fixed_by))
        elif start.deck is not None and seed is not None:
            derived = fair.shuffled(seed, f"round:{start.round}:deal", self.state.deck)
            if derived != start.deck:
                self.violation(
                    start.line, Rule.FAIR_COMMIT, f"round {start.round}'s deck is not the seed's shuffle"
                )
        hands = None
        if start.hands is not None:
            hands = tuple(start.hands[name] for name in self.players)
        command = StartRound(
            dealer=self.seat[start.dealer],
            deck=start.deck,
            hands=hands,
            supply=self.supply(start.cards, start.fired, start.first or (), start.reshuffles),
            fixed_by=start.fixed_by,
        )
        problem = self.undealable(command)
        if problem is not None:
            found = check(self.state, command)
            if found is not None:
                self.violation(start.line, found.rule, found.message)
            self.stop(start.line, Rule.DECK_COMPOSITION, problem)
        before = self.state
        events = self.judge_and_apply(start.line, command)
        self.check_pile(start.line, events, start.cards, start.fired, start.first, start.reshuffles)
        self.after(start.line, before, events)

    def undealable(self, command: StartRound) -> str | None:
        """Why the round cannot be dealt as recorded at all, or ``None``: dealt hands holding cards the
        rule set's deck does not have, or a deck too short for the deal and the first card. (Other decks
        and hands that break ``deck.composition`` or ``setup.deal`` are followed as the table dealt them.)
        """
        assert self.state is not None
        size, deck = self.state.size, self.state.deck
        if command.hands is not None:
            extra = Counter(c for hand in command.hands for c in hand) - Counter(deck)
            if extra:
                listed = " ".join(sorted(tokens(extra.elements())))
                return f"the dealt hands hold cards the deck does not have: {listed}"
        if command.deck is not None and len(command.deck) <= HAND_SIZE * size:
            return f"a deck of {len(command.deck)} cards cannot deal {size} hands and a first card"
        return None

    def supply(
        self,
        cards: dict[str, tuple[Card, ...]],
        fired: tuple[PressOutcome, ...],
        flips: tuple[Card, ...] = (),
        reshuffles: tuple[tuple[Card, ...], ...] = (),
    ) -> Supply:
        if not (cards or fired or flips or reshuffles):
            return NO_SUPPLY  # most lines: a seeded or deck-dealt game needs no table report
        return Supply({self.seat[name]: c for name, c in cards.items()}, fired, flips, reshuffles)

    # --- action lines --------------------------------------------------------------------------------

    def action(self, action: Action) -> None:
        line, kind = action.line, action.kind
        seat = self.seat[action.by] if action.by is not None else -1
        if kind is ActionKind.CATCH:
            self.auto_ended_draw = None
            return self.catch(action, seat)
        if kind is ActionKind.CHALLENGE:
            self.auto_ended_draw = None
            return self.challenge(action, seat)
        flips = (action.flip,) if action.flip else None
        command = self.command(action, seat)
        return self.carry_out(line, seat, command, action.cards, action.fired, flips, action.reshuffles)

    def carry_out_with_deck(self, line: int, command: Command, events: tuple[Event, ...]) -> None:
        """Carry out ``command`` of a round dealt from a deck (a turn's: not a round start, a catch or a
        challenge), which wrote ``events`` when it was accepted, as its record line says it
        (:func:`~service.records.export.record_from_steps`, then :meth:`command`): the launcher presses
        those events fired are the line's ``fired`` (a press line's own included) and the command's
        supply; nothing else comes from the table."""
        assert not isinstance(command, StartRound | Catch | Challenge)
        fired: tuple[PressOutcome, ...] = ()
        if isinstance(command, _SUPPLIED):
            fired = fired_outcomes(events, with_deck=True, imposed_only=not isinstance(command, Press))
            if fired:
                command = dataclasses.replace(command, supply=Supply({}, fired))
        seat = -1 if isinstance(command, Reshuffle) else command.player
        self.carry_out(line, seat, command, {}, fired)

    def carry_out(
        self,
        line: int,
        seat: int,
        command: Command,
        cards: dict[str, tuple[Card, ...]],
        fired: tuple[PressOutcome, ...],
        flips: tuple[Card, ...] | None = None,
        reshuffles: tuple[tuple[Card, ...], ...] = (),
    ) -> None:
        """Judge and apply the command of an action line (any but a catch or a challenge, which get their
        rulings) by ``seat``, compare what the line says came from the pile (``cards``, ``fired``,
        ``flips``, ``reshuffles``: :meth:`check_pile`) with what it took, and keep the books."""
        assert self.state is not None
        auto_ended, self.auto_ended_draw = self.auto_ended_draw, None
        if isinstance(command, Pass) and auto_ended == seat and check(self.state, command) is not None:
            return  # the table wrote down the end of a turn that the unplayable draw had ended
        before = self.state
        events = self.judge_and_apply(line, command)
        if cards or fired or flips or reshuffles:  # else there is nothing to compare
            self.check_pile(
                line, events, cards, fired, flips, reshuffles, own_press=isinstance(command, Press)
            )
        if (
            isinstance(command, Draw)
            and self.state.awaiting is not Awaiting.DRAWN
            and any(isinstance(e, CardDrawn) for e in events)
        ):
            self.auto_ended_draw = seat
        self.after(line, before, events)

    def command(self, action: Action, seat: int) -> Command:
        kind = action.kind
        if action.cards or action.fired or action.flip or action.reshuffles:
            supply = self.supply(
                action.cards, action.fired, (action.flip,) if action.flip else (), action.reshuffles
            )
        else:
            supply = NO_SUPPLY  # most lines: a seeded or deck-dealt game needs no table report
        target = self.seat[action.target] if action.target is not None else None
        if kind is ActionKind.PLAY:
            assert action.card is not None
            return Play(seat, action.card, action.colour, action.uno, target, supply, action.jump_in)
        if kind is ActionKind.DRAW:
            return Draw(seat, supply)
        if kind is ActionKind.PASS:
            return Pass(seat)
        if kind is ActionKind.PRESS:
            return Press(seat, supply)
        if kind is ActionKind.CALL_UNO:
            return CallUno(seat)
        if kind is ActionKind.ACCEPT:
            return Accept(seat, supply)
        if kind is ActionKind.CHOOSE:
            return Choose(seat, action.colour, target, supply)
        assert kind is ActionKind.RESHUFFLE and action.pile is not None
        return Reshuffle(action.pile)

    def catch(self, action: Action, seat: int) -> None:
        assert self.state is not None and action.target is not None
        state, line = self.state, action.line
        target = self.seat[action.target]
        command = Catch(seat, target, self.supply(action.cards, action.fired, (), action.reshuffles))
        reason = catch_reason(state, command)
        if reason is not None and seat != target and len(state.hands[target]) == 1:
            reason = self.catch_detail(target)
        applied_ok = (
            None if action.applied is None else action.applied == ("penalty" if reason is None else "none")
        )
        evidence = CatchEvidence(
            state.hands[target],
            state.colour,
            state.discard[-1] if state.discard else None,
            self.window_opened.get(target),
            self.window_closed.get(target),
            self.called_at.get(target),
        )
        self.report.rulings.append(
            Ruling(
                line,
                DisputeKind.UNO_CATCH,
                self.players[seat],
                action.target,
                Verdict.PENALTY if reason is None else Verdict.NO_PENALTY,
                Rule.UNO_CATCH if reason is None else Rule.UNO_CATCH_INVALID,
                evidence,
                reason,
                applied_ok,
            )
        )
        penalise = reason is None if action.applied is None else action.applied == "penalty"
        if applied_ok is False:
            if penalise:
                self.violation(line, Rule.UNO_CATCH_INVALID, f"the table penalised {action.target}: {reason}")
            else:
                self.violation(
                    line, Rule.UNO_PENALTY, f"the table did not penalise {action.target}, who was caught"
                )
        if penalise:
            events = self.apply(line, command)
            self.check_pile(line, events, action.cards, action.fired, None, action.reshuffles)
            self.after(line, state, events)

    def catch_detail(self, target: int) -> str:
        """Why a player holding one card earns no penalty for a catch by someone else, naming the line."""
        name = self.players[target]
        called = self.called_at.get(target)
        if called is not None:
            return f"{name} called UNO at {self.where(called)}"
        caught = self.caught_at.get(target)
        if caught is not None:
            return f"{name} was already caught at {self.where(caught)}"
        closed = self.window_closed.get(target)
        if closed is not None:
            return f"window closed at {self.where(closed)}"
        return f"{name} has had no UNO window since coming down to one card"

    def challenge(self, action: Action, seat: int) -> None:
        assert self.state is not None
        state, line = self.state, action.line
        command = Challenge(seat, self.supply(action.cards, action.fired, (), action.reshuffles))
        found = check(state, command)
        if found is not None or state.wd4 is None:
            # Not the victim's to make, or too late, or not heard at all (``house.wd4-any-time``; a player
            # who stacked on the W+4, ``house.stacking``): rejected, so it changes nothing and nothing is
            # applied. It fails, on no hand: the offender's hand is shown only to a challenge that is heard.
            message = found.message if found is not None else "no Wild Draw Four to challenge"
            rule = (
                found.rule
                if found is not None and found.rule in _REFUSING_HOUSE_RULES
                else Rule.WD4_CHALLENGE
            )
            self.violation(line, rule, message)
            offender = state.wd4.offender if state.wd4 is not None else self.wd4_by
            if rule is Rule.HOUSE_STACKING and seat in state.stackers[1:]:
                # A stacker's challenge would be of the card they stacked on: its player's, not their own.
                offender = state.stackers[state.stackers.index(seat) - 1]
            self.report.rulings.append(
                Ruling(
                    line,
                    DisputeKind.WD4_CHALLENGE,
                    self.players[seat],
                    self.players[offender] if offender is not None else "",
                    Verdict.FAILED,
                    rule,
                    RefusedChallengeEvidence(self.wd4_line),
                    message,
                    None if action.applied is None else action.applied == "failed",
                )
            )
            return
        pending, stackers = state.pending, state.stackers
        upheld = None if action.applied is None else action.applied == "upheld"
        events = self.apply(line, command, upheld=upheld)
        judged = next(e for e in events if isinstance(e, Wd4Challenged))
        # The judgement, as opposed to what the table applied: a legal W+4 has no matching cards.
        verdict_upheld = bool(judged.matching)
        applied_ok = None if upheld is None else upheld == verdict_upheld
        if applied_ok is False:
            self.violation(
                line,
                Rule.WD4_CHALLENGE_UPHELD if verdict_upheld else Rule.WD4_CHALLENGE_FAILED,
                f"the table ruled the challenge {action.applied}; the rules say "
                f"{'upheld' if verdict_upheld else 'failed'}",
            )
        self.report.rulings.append(
            Ruling(
                line,
                DisputeKind.WD4_CHALLENGE,
                self.players[seat],
                self.players[judged.offender],
                Verdict.UPHELD if verdict_upheld else Verdict.FAILED,
                Rule.WD4_CHALLENGE_UPHELD if verdict_upheld else Rule.WD4_CHALLENGE_FAILED,
                self.challenge_evidence(state, judged, verdict_upheld, pending, stackers),
                None,
                applied_ok,
            )
        )
        self.check_pile(line, events, action.cards, action.fired, None, action.reshuffles)
        self.after(line, state, events)

    def challenge_evidence(
        self, state: State, judged: Wd4Challenged, upheld: bool, pending: int, stackers: tuple[int, ...]
    ) -> ChallengeEvidence:
        """The evidence of a challenge that was heard: the offender's hand as played and what made it
        illegal; in a game with ``house.stacking`` also the total pending (``pending``, before the
        challenge), who stacked it (``stackers``) and who takes how many cards by the verdict — the
        offender the total, or the challenger the total and 2 — since that is no longer always 4 or 6."""
        top = state.wd4.top if state.wd4 else None
        if state.options.stacking is Stacking.OFF:
            return ChallengeEvidence(judged.hand, judged.colour, top, judged.matching, self.wd4_line)
        total = pending or 4
        return StackedChallengeEvidence(
            judged.hand,
            judged.colour,
            top,
            judged.matching,
            self.wd4_line,
            pending=total,
            stacked_by=tuple(self.players[seat] for seat in stackers),
            penalised=self.players[judged.offender if upheld else judged.player],
            penalty=total if upheld else total + 2,
        )

    # --- bookkeeping ------------------------------------------------------------------------------

    def check_pile(
        self,
        line: int,
        events: tuple[Event, ...],
        cards: dict[str, tuple[Card, ...]],
        fired: tuple[PressOutcome, ...],
        flips: tuple[Card, ...] | None = None,
        reshuffles: tuple[tuple[Card, ...], ...] = (),
        *,
        own_press: bool = False,
    ) -> None:
        """Compare what a line says came from the pile with what the replay took (``fair.commit``).

        ``cards``: when the line lists any, every player's cards, in any order. ``fired``: when given, the
        count of every press, in order (``own_press``: including the player's own press, on a ``press``
        line). ``flips``: the line's ``flip`` or ``first`` cards, in order (``None`` when it gives none).
        In a round with a deck all of them come from the deck (or the seed), so a line can disagree with
        it; without a deck the replay takes them from the line, so only what it never took can disagree.
        ``reshuffles``: the new piles the line gives (``draw.reshuffle``): each must be one the replay made
        (the pile ran out, or a first card went back) and, in a seeded game, which derives them, the same.
        """
        if cards:
            taken = cards_taken(self.players, events)
            for name in self.players:
                said, took = cards.get(name, ()), taken.get(name, ())
                if Counter(said) != Counter(took):
                    message = f"the record lists {name} taking {_cards(said)}, the replay took {_cards(took)}"
                    self.violation(line, Rule.FAIR_COMMIT, message)
        if fired:
            stated = [f if isinstance(f, int) else len(f) for f in fired]
            replayed = list(fired_outcomes(events, with_deck=True, imposed_only=not own_press))
            if stated != replayed:
                message = f"the record says the launcher fired {stated}, the replay fired {replayed}"
                self.violation(line, Rule.FAIR_COMMIT, message)
        if flips is not None:
            flipped = flipped_cards(events)
            if flips != flipped:
                message = f"the record lists {_cards(flips)} flipped, the replay flipped {_cards(flipped)}"
                self.violation(line, Rule.FAIR_COMMIT, message)
        if reshuffles:
            self.check_reshuffles(line, reshuffles, new_piles(events))

    def check_reshuffles(
        self, line: int, given: tuple[tuple[Card, ...], ...], made: tuple[tuple[Card, ...], ...]
    ) -> None:
        """A line's ``reshuffle`` piles against the ones the replay made: more than the pile ran out is a
        reshuffle before the pile was empty (``draw.reshuffle``); one the seed made otherwise breaks
        ``fair.commit`` (a table game's own piles are the ones the replay used)."""
        if len(given) > len(made):
            ran_out = f"ran out {len(made)} time(s)" if made else "did not run out"
            message = f"the line reshuffles {len(given)} time(s) but the draw pile {ran_out}"
            self.violation(line, Rule.DRAW_RESHUFFLE, message)
        for number, (pile, replayed) in enumerate(zip(given, made, strict=False), start=1):
            if pile != replayed:
                self.violation(line, Rule.FAIR_COMMIT, f"reshuffle {number} on the line is not the seed's")

    def after(self, line: int, before: State, events: tuple[Event, ...]) -> None:
        """Track UNO windows and Wild Draw Four plays, for the evidence of later rulings."""
        assert self.state is not None
        new_hands: set[int] = set()  # players whose hand this line replaced: a window may open anew
        spoke: set[int] = set()  # players who called or were caught on this line
        for event in events:
            if not isinstance(event, _TRACKED):
                continue  # most events (prompts, draws) change no window: one test, not four
            if isinstance(event, HandsRotated):
                # A 0 under house.seven-o: every hand changed, so every window may open anew.
                for seat in range(len(self.players)):
                    new_hands.add(seat)
                    for book in (self.window_opened, self.window_closed, self.called_at, self.caught_at):
                        book.pop(seat, None)
            elif isinstance(event, CardPlayed | HandsTraded):
                # The player's hand changed with the play; a trade's other player's with the trade.
                seat = event.player if isinstance(event, CardPlayed) else event.other
                new_hands.add(seat)
                for book in (self.window_opened, self.window_closed, self.called_at, self.caught_at):
                    book.pop(seat, None)
                if isinstance(event, CardPlayed) and event.uno:
                    self.called_at[event.player] = line
                if isinstance(event, CardPlayed) and event.card.face is Face.WILD_DRAW_FOUR:
                    self.wd4_line, self.wd4_by = line, event.player
            elif isinstance(event, UnoCalled):
                self.called_at[event.player] = line
                spoke.add(event.player)
            elif isinstance(event, UnoCaught):
                self.caught_at[event.target] = line
                spoke.add(event.target)
        if self.state.wd4 is not None and self.state.awaiting is Awaiting.WD4_RESPONSE:
            self.wd4_victim = self.state.turn
        exposed, was = self.state.exposed, before.exposed
        for seat in exposed:
            if seat not in was or seat in new_hands:
                self.window_opened[seat] = line
        for seat in was:
            if seat not in exposed and seat not in spoke:
                self.window_closed[seat] = line


#: The commands that get a ruling, and the turn commands whose line gives the launcher presses they
#: imposed (tuples: ``isinstance`` takes them faster than unions).
_RULED = (Catch, Challenge)
_SUPPLIED = (Play, Press, Accept)

#: The events :meth:`Replay.after` keeps its books by.
_TRACKED = (HandsRotated, CardPlayed, HandsTraded, UnoCalled, UnoCaught)

#: The house rules that refuse a challenge outright: no Wild Draw Four is challenged where any may be
#: played (``house.wd4-any-time``), and a player who stacked on one has answered it (``house.stacking``).
_REFUSING_HOUSE_RULES = frozenset((Rule.HOUSE_WD4_ANY_TIME, Rule.HOUSE_STACKING))


def _started(events: tuple[Event, ...]) -> RoundStarted:
    """The round a round start's events deal."""
    return next(e for e in events if isinstance(e, RoundStarted))


def _cards(cards: tuple[Card, ...]) -> str:
    """Cards for a message: their tokens, or "nothing"."""
    return " ".join(tokens(cards)) if cards else "nothing"


def verify_record(record: GameRecord) -> RulesReport:
    """Replay and adjudicate ``record``; see the module docstring."""
    return Replay(record).run().rules()
