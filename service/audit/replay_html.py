"""The arbiter's replay: one self-contained HTML page to step through a game position by position.

The tables come from the verifier's own replay (:class:`~service.records.verify.Replay`) and the findings
from the typed report. The page is pure and loads nothing: inline CSS and script allowed by hash in its
Content-Security-Policy, and its data one JSON blob rendered with ``textContent`` only. ``seat`` gives a
seat's view through :func:`service.domain.visibility.redact`; without it the page is the adjudicator's.
Rulings come in words and the summary per seat from :mod:`service.audit.replay_rulings`, the rules'
sentences from :mod:`service.audit.rule_text`; a dispute's filing and ruling are steps of their own.
docs/DESIGN.md ("The arbiter's replay page").
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

import jinja2
from markupsafe import Markup

from service.audit.decision import DisputeOutcome
from service.audit.game_report import GameReport
from service.audit.log import Dispute, GameLog, LogError
from service.audit.pages import content_policy, templates
from service.audit.replay_rulings import Judged, SeatSummary, summarise, took_at, words
from service.audit.rule_text import sentences_of
from service.domain.auth import Caller
from service.domain.catalogue import encode, type_name
from service.domain.entries import DisputeRuled
from service.domain.visibility import redact
from service.records.record import Action, ActionKind, GameRecord, RoundLine
from service.records.report import Finding, Outcome, RulesReport, Ruling
from service.records.verify import Replay, Report
from service.rules.events import Event, Prompted
from service.rules.options import Variant
from service.rules.state import State
from service.rules.violations import Rule

#: The event fields that name a seat: shown as the player's name.
_SEAT_FIELDS = frozenset(("player", "target", "by", "offender", "winner", "dealer", "other"))
#: Event fields too long to list in full (a whole deck, a reshuffled pile): shown as a count.
_COUNTED_FIELDS = frozenset(("deck", "pile"))
#: The palette of the score chart's lines, one per seat (repeating past eight players).
_SERIES_COLOURS = ("#d62828", "#1d6fd1", "#2a9d3c", "#e0a800", "#7b2cbf", "#e76f51", "#118ab2", "#6c757d")


class SeatError(ValueError):
    """A seat view asked of a seat the game does not have."""


class _Recorder(Replay):
    """The verifier's replay, keeping the table it reached after every line (the header's: the table as
    created). A line the record cannot be followed past keeps the table as it was before it."""

    def __init__(self, record: GameRecord, where: Callable[[int], str] = "line {}".format) -> None:
        super().__init__(record, where)
        self.tables: dict[int, State | None] = {}

    def run(self) -> Report:
        report = super().run()
        self.tables.setdefault(self.record.header.line, self.state)  # a game with no round, or not created
        return report

    def start_round(self, start: RoundLine) -> None:
        self.tables.setdefault(self.record.header.line, self.state)
        try:
            super().start_round(start)
        finally:
            self.tables[start.line] = self.state

    def action(self, action: Action) -> None:
        try:
            super().action(action)
        finally:
            self.tables[action.line] = self.state


@dataclass(frozen=True, slots=True)
class _Source:
    """What a page is made of: the record, the report judging it (lines or positions), where each line
    stands (``place``: the identity for a record), the disputes and the status rows of the heading."""

    title: str
    record: GameRecord
    rules: RulesReport
    place: Callable[[int], int]
    where: Callable[[int], str]
    disputes: tuple[Dispute, ...]
    status: tuple[tuple[str, bool | None, str], ...]


def record_replay_html(
    record: GameRecord, report: RulesReport, *, seat: int | None = None, title: str = "game record"
) -> str:
    """The replay page of a record file, judged by ``report`` (:func:`~service.records.verify.verify_record`
    of the same record); ``seat``: that seat's view (see the module docstring)."""
    header = record.header
    seed: tuple[bool | None, str]
    if header.seed is None:
        seed = (None, "no seed in the record: the cards are as the record lists them")
    elif header.seed_sha256 is None:
        seed = (True, "seed given: every card re-derived from it")
    else:
        matches = hashlib.sha256(header.seed).hexdigest() == header.seed_sha256
        seed = (matches, "seed matches its commitment" if matches else "seed does NOT match its commitment")
    source = _Source(
        title,
        record,
        report,
        lambda line: line,
        "line {}".format,
        (),
        (
            ("rules", report.valid, _rules_status(report)),
            ("hash chain", None, "a record file has no hash chain (a stored game does)"),
            ("seed", seed[0], seed[1] + _mismatches(report) + _fixed(report)),
        ),
    )
    return _page(source, seat)


def game_replay_html(
    log: GameLog, report: GameReport, *, seat: int | None = None, public: bool = False
) -> str:
    """The replay page of a stored game, judged by ``report`` (:func:`~service.audit.stored_game.
    verify_game` of the same log); positions are the log's. ``public`` (no ``seat``): a spectator's view,
    hand counts only. Raises :class:`~service.audit.log.LogError` (or
    :class:`~service.records.record.RecordError`) for a log that cannot be read back as a record, which
    has no positions to step through."""
    unreadable = report.unreadable
    if report.rules is None or unreadable is not None:
        raise LogError(
            unreadable.message if unreadable is not None else "the log cannot be read back as a record",
            unreadable.position if unreadable is not None else 1,
        )
    rules = report.rules
    logged = log.record(reveal=log.seed is not None)
    chain = report.chain
    chain_text = f"{chain.events} events, head {chain.head.hex()[:16]}…"
    if chain.findings:
        first = chain.findings[0]
        chain_text += f"; {len(chain.findings)} finding(s), first at position {first.position}: {first.kind}"
    status: list[tuple[str, bool | None, str]] = [
        ("rules", rules.valid, _rules_status(rules)),
        ("hash chain", chain.valid, ("intact: " if chain.valid else "BROKEN: ") + chain_text),
    ]
    if report.seed is not None:
        seed = report.seed
        ok = None if seed.commitment_ok is None else seed.commitment_ok and not seed.mismatches
        text = f"{seed.status.value}; commitment {_said(seed.commitment_ok, 'matches', 'does NOT match')}"
        if seed.checked_to is not None:
            text += f"; cards re-derived to position {seed.checked_to}"
        if seed.mismatches:
            text += f"; {len(seed.mismatches)} mismatch(es), first at position {seed.mismatches[0].position}"
        status.append(("seed", ok, text + _fixed(rules)))
    if report.replay is not None:
        replay = report.replay
        diverged = replay.diverged_at
        same = diverged is None and not replay.outcome_differs
        text = "today's rules engine agrees with the log"
        if diverged is not None:
            text = f"today's rules engine differs from the log at position {diverged.position}"
        elif replay.outcome_differs:
            text = "the stored outcome differs from today's replay"
        status.append(("replay", same, text))
    source = _Source(
        f"game {log.game_id} ({report.origin.value}, {report.status.value})",
        logged.record,
        rules,
        logged.position,
        lambda line: f"position {logged.position(line)}",
        report.disputes,
        tuple(status),
    )
    return _page(source, seat, public=public)


def _said(value: bool | None, yes: str, no: str) -> str:
    return "not checked" if value is None else (yes if value else no)


def _rules_status(report: RulesReport) -> str:
    text = f"{len(report.violations)} violation(s), {len(report.rulings)} ruling(s)"
    if report.stopped_at is not None:
        text += f"; cannot be followed past {report.unit.value} {report.stopped_at}"
    return text


def _mismatches(report: RulesReport) -> str:
    unfair = [v for v in report.violations if v.rule is Rule.FAIR_COMMIT]
    return f"; {len(unfair)} card(s) not the seed's" if unfair else ""


def _fixed(report: RulesReport) -> str:
    """The rounds dealt from a fixed deck, which the seed did not deal (so it was not asked about them)."""
    return "".join(
        f"; round {f.round} dealt from a fixed deck by {f.by} at {report.unit.value} {f.at}, not by the seed"
        for f in report.fixed_decks
    )


# --- the page ---------------------------------------------------------------------------------------------


def _page(source: _Source, seat: int | None, *, public: bool = False) -> str:
    players = source.record.header.players
    if seat is not None and not 0 <= seat < len(players):
        raise SeatError(f"seats are 0 to {len(players) - 1}, not {seat}")
    if public and seat is not None:
        raise SeatError("a public view is no seat's")
    recorder = _Recorder(source.record, where=source.where)
    replayed = recorder.run()
    # The public's caller is a spectator's (no seat, not the admin): the redaction leaves counts only.
    caller = Caller() if public else Caller(admin=True) if seat is None else Caller(seat=seat)
    rules = source.rules
    lines = sorted(recorder.tables)
    steps = [
        _step(line, source, replayed.events.get(line, []), recorder.tables.get(line), caller, players)
        for line in lines
    ]
    steps = _with_dispute_steps(steps, source.disputes, source.rules.unit.value, players)
    ats = [cast(int, step["at"]) for step in steps]

    def step_of(at: int | None) -> int | None:
        """The index of the step a number of the report stands for: the last step at or before it."""
        if at is None:
            return None
        found = [index for index, step_at in enumerate(ats) if step_at <= at]
        return found[-1] if found else 0

    judge = _Judge(source, replayed.events, lines, caller, players)
    data: dict[str, Any] = {
        "unit": rules.unit.value,
        "players": list(players),
        "viewer": (
            "the public (hand counts only)"
            if public
            else "the adjudicator (every hand)"
            if seat is None
            else f"seat {seat} ({players[seat]})"
        ),
        "steps": steps,
        "violations": [_finding(v, step_of) for v in rules.violations],
        "rulings": [_ruling(r, players, caller, step_of, judge) for r in rules.rulings],
        "disputes": [_dispute(d, players, caller, step_of, judge) for d in source.disputes],
        "stopped": step_of(rules.stopped_at),
    }
    data["rules"] = sentences_of(_cited(data))
    summary = summarise(players, replayed.events, rules.rulings)
    return _render(source, data, summary)


def _render(source: _Source, data: dict[str, Any], summary: Sequence[SeatSummary]) -> str:
    rules = source.rules
    players = source.record.header.players
    # The text the page inlines is exactly the text hashed, so the policy always allows it (and only it).
    stylesheet, script = (
        templates().get_template(name).render() for name in ("replay.css.j2", "replay.js.j2")
    )
    policy = content_policy(scripts=[script], styles=[stylesheet])  # keywords and base64: nothing to escape
    return _template().render(
        policy=Markup(policy),
        stylesheet=Markup(stylesheet),
        script=Markup(script),
        title=source.title,
        variant=rules.variant.value,
        players=players,
        viewer=data["viewer"],
        valid=rules.valid,
        status=source.status,
        chart=_chart(rules.outcome, players),
        summary=summary,
        data=data,
    )


def _cited(data: Mapping[str, Any]) -> set[str]:
    """The rule ids the page names: its findings', its rulings' (and the penalty a good catch earns)."""
    cited = {v["rule"] for v in data["violations"]} | {r["rule"] for r in data["rulings"]}
    cited |= {d["ruling"]["rule"] for d in data["disputes"] if d.get("ruling")}
    if any(r["verdict"] == "penalty" for r in data["rulings"]):
        cited.add(Rule.UNO_PENALTY.value)
    return cited


#: What a ruling decided of its dispute, in the title of its step.
_RULED = {
    DisputeOutcome.UPHELD: "upheld",
    DisputeOutcome.REJECTED: "rejected",
    DisputeOutcome.CONDITIONAL: "upheld only if the table did otherwise than the rules require",
}


def _with_dispute_steps(
    steps: list[dict[str, object]], disputes: Sequence[Dispute], unit: str, players: Sequence[str]
) -> list[dict[str, object]]:
    """The game's steps with a step for every dispute's filing and ruling, at their own positions of the
    log (the table there is the one before them: an audit entry changes no card)."""
    extra: list[dict[str, object]] = []
    for dispute in disputes:
        shown = dispute.to_json(players)
        kind = str(shown["kind"]).replace("-", " ")
        what = f"{shown['filer']} disputes the {kind} at {unit} {shown['position']}"
        extra.append({"at": dispute.filed_at, "entry": "filed", "what": what})
        if dispute.ruling is not None and dispute.ruled_at is not None:
            ruling = dispute.ruling
            # The dispute's outcome, not the verdict: "no-penalty" here read as the dispute's refusal.
            said = ruling.verdict if dispute.outcome is None else _RULED[dispute.outcome]
            what = f"the adjudicator rules on {shown['filer']}'s dispute: {said} [{ruling.rule}]"
            extra.append({"at": dispute.ruled_at, "entry": "ruled", "what": what})
    if not extra:
        return steps
    merged = sorted([*steps, *extra], key=lambda step: cast(int, step["at"]))
    table: object = None
    for step in merged:
        if "entry" in step:
            step.update(line=None, label=f"{unit} {step['at']}", events=[], table=table)
        else:
            table = step["table"]
    return merged


def _step(
    line: int,
    source: _Source,
    events: Sequence[Event],
    state: State | None,
    caller: Caller,
    players: Sequence[str],
) -> dict[str, object]:
    at = source.place(line)
    return {
        "at": at,
        "line": line,
        "label": f"{source.rules.unit.value} {at}",  # one number: the line's (position's) own
        "what": _what(line, source.record),
        "events": [_event(e, caller, players) for e in events if not isinstance(e, Prompted)],
        "table": None if state is None else _table(state, caller),
    }


def _what(line: int, record: GameRecord) -> str:
    """What record line ``line`` says happened, in words (never the cards it lists as taken: those are
    private, and the events say them to whoever may see them)."""
    header = record.header
    if line == header.line:
        return f"game created: {header.variant.value}, {', '.join(header.players)}"
    for block in record.rounds:
        if block.start.line == line:
            return f"round {block.start.round} dealt by {block.start.dealer}"
        for action in block.actions:
            if action.line == line:
                return _action_text(action)
    return ""


def _action_text(action: Action) -> str:
    kind, by = action.kind, action.by or "the table"
    if kind is ActionKind.PLAY:
        assert action.card is not None
        parts = [f"{by} plays {action.card.token}"]
        if action.colour is not None:
            parts.append(f"colour {action.colour.value}")
        if action.target is not None:
            parts.append(f"at {action.target}")
        if action.uno:
            parts.append("calling UNO")
        return ", ".join(parts)
    words = {
        ActionKind.DRAW: "draws",
        ActionKind.PASS: "passes",
        ActionKind.PRESS: "presses the launcher",
        ActionKind.CALL_UNO: "calls UNO",
        ActionKind.ACCEPT: "accepts the Wild Draw Four",
        ActionKind.CHALLENGE: "challenges the Wild Draw Four",
        ActionKind.RESHUFFLE: "reshuffles the discards into a new draw pile",
    }
    if kind is ActionKind.CATCH:
        text = f"{by} catches {action.target}"
    elif kind is ActionKind.CHOOSE:
        chosen = action.colour.value if action.colour is not None else action.target
        text = f"{by} chooses {chosen}"
    else:
        text = f"{by} {words[kind]}"
    if action.applied is not None:
        text += f" (the table applied: {action.applied})"
    return text


def _event(event: Event, caller: Caller, players: Sequence[str]) -> dict[str, object]:
    """An event as ``caller`` may see it (the service's redaction), seats named, long piles counted."""
    kind, payload = encode(event)
    seen = redact(kind, payload, caller, players)
    fields: list[list[object]] = []
    for key, value in seen.items():
        if value is None or value == [] or key == "new_turn" or (key == "uno" and value is False):
            continue  # nothing there, or nothing to say (an UNO call not made is the usual case)
        if key in _SEAT_FIELDS and isinstance(value, int) and 0 <= value < len(players):
            value = players[value]
        elif key in _COUNTED_FIELDS and isinstance(value, list):
            value = f"{len(value)} cards"
        fields.append([key, value])
    return {"type": kind, "fields": fields}


def _table(state: State, caller: Caller) -> dict[str, object]:
    """The table at one position as ``caller`` may see it: every hand for the adjudicator, a seat's own
    hand and the others' counts for a seat (as the game view gives them)."""
    in_round = state.in_round()
    sees_drawn = caller.admin or caller.seat == state.turn
    return {
        "round": state.round,
        "dealer": None if state.dealer is None else state.players[state.dealer],
        "top": state.discard[-1].token if state.discard else None,
        "colour": None if state.colour is None else state.colour.value,
        "direction": state.direction,
        "turn": state.players[state.turn] if in_round else None,
        "awaiting": state.awaiting.value,
        "pile": len(state.pile),
        "discard": len(state.discard),
        "drawn": state.drawn.token if state.drawn is not None and in_round and sees_drawn else None,
        "hands": [
            {
                "name": name,
                "seat": seat,
                "count": len(hand),
                "cards": [c.token for c in hand] if caller.admin or caller.seat == seat else None,
                "score": state.scores[seat],
                "uno_window": seat in state.exposed,
            }
            for seat, (name, hand) in enumerate(zip(state.players, state.hands, strict=True))
        ],
    }


def _finding(finding: Finding, step_of: Callable[[int | None], int | None]) -> dict[str, object]:
    return {
        "at": finding.at,
        "step": step_of(finding.at),
        "rule": finding.rule.value,
        "message": finding.message,
    }


def _evidence(
    evidence: Mapping[str, Any], by: object, players: Sequence[str], caller: Caller
) -> dict[str, Any]:
    """A ruling's evidence as ``caller`` may see it: through the redaction of a ``DisputeRuled`` entry
    (the hands in it are the adjudicator's only, and a challenge's its challenger's, ``by``), as every
    AuditService reply gives it."""
    entry = {"by": by, "evidence": dict(evidence)}
    seen: dict[str, Any] = redact(type_name(DisputeRuled), entry, caller, players)["evidence"]
    return seen


class _Judge:
    """Puts a ruling in words (:mod:`service.audit.replay_rulings`): the record line a ruling's number
    stands for, what its action says the table applied, and the cards the replay moved there."""

    def __init__(
        self,
        source: _Source,
        events: Mapping[int, Sequence[Event]],
        lines: Sequence[int],
        caller: Caller,
        players: Sequence[str],
    ) -> None:
        self.line_of = {source.place(line): line for line in lines}
        self.actions = {a.line: a for block in source.record.rounds for a in block.actions}
        self.events, self.caller, self.players = events, caller, players
        self.attack = source.rules.variant is Variant.ATTACK

    def words(
        self, ruled: Mapping[str, Any], evidence: Mapping[str, Any], at: int, heard: bool
    ) -> dict[str, str]:
        """``ruled``: the ruling's ``kind``, ``by``, ``against``, ``verdict`` and ``reason``; ``at``: the
        number (line or position) of the catch or challenge; ``heard``: whether the log holds it there."""
        line = self.line_of.get(at) if heard else None
        action = self.actions.get(line) if line is not None else None
        took = took_at(self.events.get(line, ()), self.players, self.caller) if line is not None else ()
        judged = Judged(
            str(ruled["kind"]),
            str(ruled["by"]),
            str(ruled["against"]),
            str(ruled["verdict"]),
            ruled.get("reason"),
            evidence,
            action.applied if action is not None else None,
            heard,
            took,
            self.attack,
        )
        return words(judged)


def _ruling(
    ruling: Ruling,
    players: Sequence[str],
    caller: Caller,
    step_of: Callable[[int | None], int | None],
    judge: _Judge,
) -> dict[str, object]:
    evidence = _evidence(ruling.evidence.to_json(), ruling.by, players, caller)
    shown: dict[str, object] = {
        "at": ruling.at,
        "step": step_of(ruling.at),
        "kind": ruling.kind.value,
        "by": ruling.by,
        "against": ruling.against,
        "verdict": ruling.verdict.value,
        "rule": ruling.rule.value,
        "reason": ruling.reason,
        "applied_ok": ruling.applied_ok,
        "evidence": evidence,
        # The evidence's numbers are positions (lines) of the game: the steps they stand for, to jump to.
        "jumps": {name: step_of(getattr(ruling.evidence, name)) for name in type(ruling.evidence).PLACES},
    }
    shown["words"] = judge.words(shown, evidence, ruling.at, heard=True)
    return shown


def _dispute(
    dispute: Dispute,
    players: Sequence[str],
    caller: Caller,
    step_of: Callable[[int | None], int | None],
    judge: _Judge,
) -> dict[str, object]:
    shown = dispute.to_json(players)
    ruling = shown.get("ruling")
    if isinstance(ruling, dict) and isinstance(ruling.get("evidence"), dict):
        evidence = _evidence(ruling["evidence"], ruling.get("by"), players, caller)
        words = judge.words(
            {**ruling, "kind": dispute.filed.kind},
            evidence,
            int(ruling["position"]),
            bool(ruling["recorded"]),
        )
        shown["ruling"] = {
            **ruling,
            "evidence": evidence,
            "words": {key: words[key] for key in ("table", "rules", "remedy")},
        }
    return {
        **shown,
        "at": dispute.filed.position,
        "step": step_of(dispute.filed.position),
        "filed_step": step_of(dispute.filed_at),
        "ruled_step": step_of(dispute.ruled_at),
    }


# --- the score chart -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Series:
    name: str
    colour: str
    points: str  # SVG polyline points
    dots: tuple[tuple[float, float, int], ...]  # x, y, the score there


@dataclass(frozen=True, slots=True)
class _Chart:
    width: int
    height: int
    left: int
    bottom: int
    top: int
    right: int
    series: tuple[_Series, ...]
    x_ticks: tuple[tuple[float, str], ...]
    y_ticks: tuple[tuple[float, str], ...]


def _chart(outcome: Outcome, players: Sequence[str]) -> _Chart | None:
    """Every player's match score after each round (0 before the first), as lines; ``None`` before a
    round has ended. A round's points go to its winner (``score.round``), as the outcome lists them."""
    if not outcome.rounds:
        return None
    totals = dict.fromkeys(players, 0)
    history = {name: [0] for name in players}
    for result in outcome.rounds:
        if result.winner in totals:
            totals[result.winner] += result.points
        for name in players:
            history[name].append(totals[name])
    width, height, left, right, top, bottom = 640, 260, 56, 120, 16, 36
    rounds = len(outcome.rounds)
    high = max(max(totals.values()), 1)

    def x(index: int) -> float:
        return round(left + (width - left - right) * index / rounds, 1)

    def y(score: int) -> float:
        return round(height - bottom - (height - top - bottom) * score / high, 1)

    series = tuple(
        _Series(
            name,
            _SERIES_COLOURS[seat % len(_SERIES_COLOURS)],
            " ".join(f"{x(i)},{y(s)}" for i, s in enumerate(history[name])),
            tuple((x(i), y(s), s) for i, s in enumerate(history[name])),
        )
        for seat, name in enumerate(players)
    )
    step = max(1, rounds // 10)
    x_ticks = tuple((x(i), str(i)) for i in range(0, rounds + 1, step))
    y_ticks = tuple((y(round(high * k / 4)), str(round(high * k / 4))) for k in range(5))
    return _Chart(width, height, left, bottom, top, right, series, x_ticks, y_ticks)


@cache
def _template() -> jinja2.Template:
    return templates().get_template("replay.html.j2")
