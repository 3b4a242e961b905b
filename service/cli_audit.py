"""The arbiter's commands on stored games: ``verify --game`` / ``--all``, ``adjudicate``, ``export``,
``import`` (usage: :mod:`service.cli`).

They talk to the database directly (``--database-url``, default ``$DATABASE_URL``), migrating it first,
through :class:`service.audit.auditor.Auditor`, and print human text or, with ``--json``, one JSON object.
A refusal or a database that cannot be used gets one line on standard error and exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.audit.entries import DisputeKind
from service.audit.verify import LINE_EVIDENCE

if TYPE_CHECKING:  # the database's modules load only when a command runs
    from service.audit.auditor import Auditor
    from service.audit.stored_game import Adjudication

#: The exit statuses of every ``uno-audit`` command: done (valid), invalid, bad usage or refused.
EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
DISPUTE_KINDS = {"catch": DisputeKind.UNO_CATCH, "challenge": DisputeKind.WD4_CHALLENGE}


class _Stop(Exception):
    """A command on stored games that cannot go on: a one-line message for standard error, and the exit
    status (bad usage, an unknown game, a refusal: 2)."""

    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _on_auditor(args: argparse.Namespace, work: Callable[[Auditor], Awaitable[int]]) -> int:
    """Run ``work`` with an auditor over the database at ``args.database_url`` (or the embedded one in
    ``args.data_dir``), migrated first; its exit status, or 2 with a one-line message for a refusal or a
    database that cannot be used."""
    import psycopg
    from psycopg_pool import PoolTimeout

    from service.audit.auditor import Auditor, Refused
    from service.store import EventStore, StoreError

    url: str | None = args.database_url
    embedded = None
    if url is None:
        data_dir: Path = args.data_dir
        if not data_dir.is_dir():
            print(
                f"uno-audit {args.command}: no database: give --database-url (or $DATABASE_URL), or run "
                f"`uno-audit serve` first, which keeps an embedded one in {data_dir}",
                file=sys.stderr,
            )
            return EXIT_USAGE
        from service.api.server import embedded_database

        url, embedded = embedded_database(data_dir)  # shared with a `serve` running on the same folder

    async def run(url: str) -> int:
        try:  # fail fast, with the server's own words, rather than after the pool's 30 s of retries
            probe = await psycopg.AsyncConnection.connect(url, connect_timeout=10)
        except psycopg.Error as error:
            raise _Stop(f"cannot connect to the database: {_one_line(error)}") from None
        await probe.close()
        store = await EventStore.open(url, max_size=4)
        try:
            await store.migrate()
            return await work(Auditor(store))
        finally:
            await store.close()

    try:
        return asyncio.run(run(url))
    except _Stop as stop:
        print(f"uno-audit {args.command}: {stop}", file=sys.stderr)
        return stop.status
    except Refused as refused:
        print(f"uno-audit {args.command}: {refused}", file=sys.stderr)
        return EXIT_USAGE
    except (psycopg.Error, PoolTimeout, StoreError) as error:
        print(f"uno-audit {args.command}: database: {_one_line(error)}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        if embedded is not None:
            embedded.cleanup()  # stops it only if no other process (a `serve`) uses it


def _new_id() -> str:
    return str(uuid.uuid4())


def _print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False))


def verify_stored(args: argparse.Namespace) -> int:
    if args.all and args.reveal_seed:
        print("uno-audit verify: --reveal-seed goes with --game, not --all", file=sys.stderr)
        return EXIT_USAGE
    if args.game is not None:
        return _on_auditor(args, lambda auditor: _verify_game(auditor, args))
    return _on_auditor(args, lambda auditor: _verify_every(auditor, args))


async def _verify_game(auditor: Auditor, args: argparse.Namespace) -> int:
    from service.audit.auditor import Refused

    try:
        report = await auditor.verify(
            args.game,
            check_projections=not args.no_projections,
            reveal_seed=args.reveal_seed,
            command_id=_new_id() if args.reveal_seed else None,
        )
    except Refused as refused:
        if refused.kind != "precondition":
            raise
        # The game is stored but its log cannot be read as a game: it does not verify.
        if args.json:
            _print_json({"game_id": args.game, "valid": False, "error": str(refused)})
        else:
            print(f"game {args.game}: INVALID\n  {refused}")
        return EXIT_INVALID
    if args.json:
        _print_json(report)
    else:
        print(_human_game(report))
    return EXIT_OK if report["valid"] else EXIT_INVALID


def _cards(cards: Sequence[str]) -> str:
    return " ".join(cards) if cards else "(none)"


def _outcome(outcome: dict[str, Any]) -> str:
    scores = ", ".join(f"{name} {points}" for name, points in (outcome.get("scores") or {}).items())
    parts = [f"winner {outcome.get('winner') or 'none yet'}", f"scores {scores or '-'}"]
    parts.append(f"{len(outcome.get('rounds') or [])} rounds")
    if "valid" in outcome:
        parts.append("valid" if outcome["valid"] else "invalid")
    if outcome.get("stopped_at") is not None:
        parts.append(f"stopped at {outcome['stopped_at']}")
    return ", ".join(parts)


def _event_text(event: dict[str, Any] | None) -> str:
    if event is None:
        return "nothing"
    return f"{event['type']} {json.dumps(event['payload'], ensure_ascii=False, sort_keys=True)}"


def _evidence_lines(evidence: dict[str, Any], indent: str) -> list[str]:
    lines = []
    for name, value in evidence.items():
        label = name.replace("_", " ")
        if name in LINE_EVIDENCE:
            text = "-" if value is None else f"position {value}"
        elif isinstance(value, list):
            text = _cards(value)
        else:
            text = "-" if value is None else str(value)
        lines.append(f"{indent}{label}: {text}")
    return lines


_TABLE_SAID = {True: "the table agreed", False: "THE TABLE DISAGREED", None: "the table did not say"}


def _ruling_line(ruling: dict[str, Any]) -> str:
    why = f" ({ruling['reason']})" if ruling.get("reason") else ""
    said = _TABLE_SAID.get(ruling.get("applied_ok"), "")
    return (
        f"position {ruling['position']}: {ruling['kind']} by {ruling['by']} against {ruling['against']}: "
        f"{ruling['verdict']} [{ruling['rule']}]{why}; {said}"
    )


def _judged(kind: str, position: int, recorded: bool) -> str:
    """Which catch or challenge a ruling judged: the recorded one, or the one described."""
    if recorded:
        return f"the {kind} recorded at position {position}"
    return f"the {kind} described, as made right after position {position} (none is recorded there)"


def _dispute_line(dispute: dict[str, Any]) -> str:
    """A dispute of a stored game's report, with what it names and, once ruled, what was judged."""
    named = "".join(
        f" {word} {dispute[key]}" for word, key in (("by", "by"), ("of", "target")) if dispute.get(key)
    )
    head = (
        f"dispute {dispute['dispute_id']} filed at position {dispute['filed_at']} by {dispute['filer']}: "
        f"{dispute['kind']}{named} at position {dispute['position']}: {dispute['claim']!r}"
    )
    ruling = dispute.get("ruling")
    if ruling is None:
        return f"{head}; open"
    why = f" ({ruling['reason']})" if ruling.get("reason") else ""
    mismatch = f"; NOT AS NAMED: {ruling['mismatch']}" if ruling.get("mismatch") else ""
    judged = _judged(dispute["kind"], ruling["position"], ruling["recorded"])
    return (
        f"{head}; ruled at position {dispute['ruled_at']} on {judged}: {ruling['verdict']} "
        f"[{ruling['rule']}]{why}, by {ruling['by'] or '-'} against {ruling['against'] or '-'}{mismatch}"
    )


def _human_game(report: dict[str, Any]) -> str:
    """A stored game's report as text (the report object itself is ``--json``)."""
    lines = [
        f"game {report['game_id']}: {'VALID' if report['valid'] else 'INVALID'}",
        f"  {report['origin']} {report.get('variant') or '?'} game, version {report['version']}, "
        f"{report['status']}; rules {'kept' if report['rules_valid'] else 'BROKEN'}",
    ]
    unreadable = report.get("unreadable")
    if unreadable is not None:
        lines.append(
            f"  UNREADABLE from position {unreadable['position']}: the log cannot be read back as a "
            f"record: {unreadable['message']}"
        )
    chain = report["chain"]
    if chain["valid"]:
        lines.append(f"  hash chain: intact, {chain['events']} events, head {chain['head']}")
    else:
        lines.append(f"  hash chain: TAMPERED ({chain['events']} events, head {chain['head']})")
        for finding in chain["findings"]:
            lines.append(f"    position {finding['position']}: {finding['kind']}: {finding['message']}")
    if report["seed"] is not None:
        lines.extend(_seed_lines(report["seed"]))
    if report["replay"] is not None:
        lines.extend(_replay_lines(report["origin"], report["replay"]))
    projections = report.get("projections")
    if projections is None:
        lines.append("  read models: not checked")
    elif not projections["problems"]:
        lines.append("  read models: agree with the log")
    else:
        lines.append("  read models: DISAGREE with the log")
        lines.extend(f"    {problem}" for problem in projections["problems"])
    for violation in report["violations"]:
        lines.append(f"  position {violation['position']}: {violation['rule']}: {violation['message']}")
    for ruling in report["rulings"]:
        lines.append("  " + _ruling_line(ruling))
    for dispute in report["disputes"]:
        lines.append("  " + _dispute_line(dispute))
    for rnd in report["rounds"]:
        lines.append(f"  round {rnd['round']}: {rnd['winner']} scored {rnd['points']}")
    scores = ", ".join(f"{name} {points}" for name, points in report["scores"].items())
    lines.append(f"  scores: {scores or '-'}; winner: {report['winner'] or 'none yet'}")
    if report["stopped_at"] is not None:
        lines.append(f"  the game could not be followed past position {report['stopped_at']}")
    return "\n".join(lines)


def _replay_lines(origin: str, replay: dict[str, Any]) -> list[str]:
    lines = []
    diverged = replay["diverged_at"]
    if origin == "imported":
        lines.append("  replay: an imported record; today's verdict is compared with the one at import")
    elif diverged is None:
        lines.append("  replay: today's rules engine makes the same events of the same commands")
    else:
        lines.append(f"  replay: DIVERGED at position {diverged['position']}")
        lines.append(f"    stored:          {_event_text(diverged['stored'])}")
        lines.append(f"    today's engine:  {_event_text(diverged['replayed'])}")
    if replay["outcome_differs"]:
        lines.append("  outcome differs from today's replay:")
        lines.append(f"    stored:   {_outcome(replay['stored'])}")
        lines.append(f"    replayed: {_outcome(replay['replayed'])}")
    else:
        lines.append("  outcome: the stored outcome is today's replay's")
    return lines


def _seed_lines(seed: dict[str, Any]) -> list[str]:
    if seed["status"] == "none":
        return ["  seed: none recorded; the cards are as the log says"]
    status = {"secret": "secret", "revealed": f"revealed at position {seed['revealed_at']}"}.get(
        seed["status"], seed["status"]
    )
    commitment = {
        True: "commitment holds",
        False: "COMMITMENT BROKEN (the seed does not hash to the committed SHA-256)",
        None: "no commitment to check",
    }[seed["commitment_ok"]]
    lines = [f"  seed: {status}; {commitment}; cards re-derived through position {seed['checked_to']}"]
    if seed.get("committed"):
        lines.append(f"    committed SHA-256: {seed['committed']}")
    if seed.get("seed"):
        lines.append(f"    seed: {seed['seed']}")
    for mismatch in seed["mismatches"]:
        lines.append(f"    position {mismatch['position']}: DEALING MISMATCH: {mismatch['message']}")
    return lines


def _first_problem(report: dict[str, Any]) -> str | None:
    """The first thing wrong with a stored game's report, as one line (``None`` when there is none)."""
    if "error" in report:
        return str(report["error"])
    for finding in report["chain"]["findings"]:
        return f"position {finding['position']}: chain {finding['kind']}: {finding['message']}"
    unreadable = report.get("unreadable")
    if unreadable is not None:
        return f"position {unreadable['position']}: unreadable: {unreadable['message']}"
    seed = report["seed"] or {"commitment_ok": None, "mismatches": []}
    if seed["commitment_ok"] is False:
        return "the seed does not match its commitment"
    for mismatch in seed["mismatches"]:
        return f"position {mismatch['position']}: {mismatch['message']}"
    replay = report["replay"] or {"diverged_at": None, "outcome_differs": False}
    diverged = replay["diverged_at"]
    if diverged is not None:
        stored, replayed = diverged["stored"], diverged["replayed"]
        return (
            f"position {diverged['position']}: stored {stored['type'] if stored else 'nothing'}, "
            f"today's engine {replayed['type'] if replayed else 'nothing'}"
        )
    for violation in report["violations"]:
        return f"position {violation['position']}: {violation['rule']}: {violation['message']}"
    if replay["outcome_differs"]:
        return "the stored outcome differs from today's replay"
    for problem in (report.get("projections") or {}).get("problems", []):
        return f"read models: {problem}"
    return None


def _summary(report: dict[str, Any]) -> dict[str, Any]:
    """One row of ``verify --all``: a game's report in brief."""
    chain = report.get("chain")  # none when the auditor refused the game (``error``)
    replay = report.get("replay")  # none as well when the log cannot be read back as a record
    diverged = None if replay is None else replay["diverged_at"]
    return {
        "game_id": report["game_id"],
        "origin": report.get("origin"),
        "version": report.get("version"),
        "valid": bool(report["valid"]),
        "chain": None if chain is None else chain["valid"],
        "diverged_at": None if diverged is None else diverged["position"],
        "outcome_differs": None if replay is None else replay["outcome_differs"],
        "first_problem": _first_problem(report),
    }


async def _verify_every(auditor: Auditor, args: argparse.Namespace) -> int:
    from tqdm import tqdm

    total = await auditor.count_games()
    rows: list[dict[str, Any]] = []
    differs: list[tuple[str, dict[str, Any]]] = []
    with tqdm(total=total, desc="verifying", unit="game", file=sys.stderr, dynamic_ncols=True) as bar:
        async for report in auditor.verify_all(check_projections=not args.no_projections):
            rows.append(_summary(report))
            replay = report.get("replay")
            if replay is not None and replay["outcome_differs"]:
                differs.append((report["game_id"], replay))
            bar.update(1)
    invalid = [row["game_id"] for row in rows if not row["valid"]]
    if args.json:
        _print_json(
            {
                "games": len(rows),
                "invalid": invalid,
                "outcome_differs": [game_id for game_id, _ in differs],
                "reports": rows,
            }
        )
    else:
        print(_human_summary(rows, invalid, differs))
    return EXIT_INVALID if invalid else EXIT_OK


def _human_summary(
    rows: list[dict[str, Any]], invalid: list[str], differs: list[tuple[str, dict[str, Any]]]
) -> str:
    if not rows:
        return "no games stored"

    def cell(value: Any, yes: str, no: str) -> str:
        return "?" if value is None else (yes if value else no)

    header = ("GAME", "ORIGIN", "VERSION", "VALID", "CHAIN", "DIVERGED AT", "OUTCOME", "FIRST PROBLEM")
    table = [header] + [
        (
            row["game_id"],
            row["origin"] or "?",
            "?" if row["version"] is None else str(row["version"]),
            cell(row["valid"], "yes", "NO"),
            cell(row["chain"], "ok", "TAMPERED"),
            "-" if row["diverged_at"] is None else str(row["diverged_at"]),
            cell(row["outcome_differs"], "DIFFERS", "same"),
            row["first_problem"] or "-",
        )
        for row in rows
    ]
    widths = [max(len(line[column]) for line in table) for column in range(len(header) - 1)]
    lines = [
        "  ".join(value.ljust(width) for value, width in zip(line, widths, strict=False)) + "  " + line[-1]
        for line in table
    ]
    lines.append("")
    lines.append(
        f"{_count(len(rows), 'game')}: {len(rows) - len(invalid)} valid, {len(invalid)} invalid; "
        f"outcome differs from today's replay in {len(differs)}"
    )
    if invalid:
        lines.append("invalid: " + ", ".join(invalid))
    if differs:
        lines.append("outcome differs (the stored outcome is not what today's rules engine replays):")
        for game_id, replay in differs:
            diverged = replay["diverged_at"]
            where = "" if diverged is None else f"; diverged at position {diverged['position']}"
            lines.append(f"  {game_id}{where}")
            lines.append(f"    stored:   {_outcome(replay['stored'])}")
            lines.append(f"    replayed: {_outcome(replay['replayed'])}")
    return "\n".join(lines)


def adjudicate(args: argparse.Namespace) -> int:
    kind = DISPUTE_KINDS[args.kind]

    async def work(auditor: Auditor) -> int:
        found = await auditor.adjudicate(args.game, kind, args.position, by=args.by, target=args.target)
        if args.json:
            _print_json(
                {
                    "game_id": args.game,
                    "kind": kind.value,
                    "position": found.position,
                    "recorded": found.recorded,
                    "mismatch": found.mismatch,
                    "ruling": found.ruling,
                }
            )
        else:
            print(_human_adjudication(args.game, found))
        return EXIT_OK

    return _on_auditor(args, work)


def _human_adjudication(game_id: str, found: Adjudication) -> str:
    """The ruling as text: which catch or challenge was judged (the recorded one, or the one described),
    where what ``--by``/``--target`` named differs from it, the verdict and the evidence."""
    ruling = found.ruling
    why = f" ({ruling['reason']})" if ruling.get("reason") else ""
    lines = [f"game {game_id}: {_judged(ruling['kind'], found.position, found.recorded)}"]
    if found.mismatch is not None:
        lines.append(f"  NOT AS NAMED: {found.mismatch}")
    lines += [
        f"  verdict: {ruling['verdict']}{why}",
        f"  rule: {ruling['rule']}",
        f"  by {ruling['by'] or '-'} against {ruling['against'] or '-'}",
        "  evidence:",
        *_evidence_lines(ruling["evidence"], "    "),
    ]
    if found.recorded:
        lines.append(f"  {_TABLE_SAID.get(ruling.get('applied_ok'), '')}")
    return "\n".join(lines)


def export(args: argparse.Namespace) -> int:
    async def work(auditor: Auditor) -> int:
        command_id = _new_id() if args.reveal_seed else None
        text = await auditor.export(args.game, reveal_seed=args.reveal_seed, command_id=command_id)
        if args.json:
            sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
            _print_json({"game_id": args.game, "sha256": sha256, "record": text})
        else:
            _write_exactly(text)
        return EXIT_OK

    return _on_auditor(args, work)


def _write_exactly(text: str) -> None:
    """``text`` on standard output as UTF-8, byte for byte: no newline added or translated."""
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        buffer.write(text.encode("utf-8"))
        buffer.flush()


def import_record(args: argparse.Namespace) -> int:
    from service.api.auth import new_token, token_hash
    from service.audit.auditor import Refused

    name = "standard input" if str(args.file) == "-" else str(args.file)
    try:
        data = sys.stdin.buffer.read() if str(args.file) == "-" else args.file.read_bytes()
    except OSError as error:
        print(f"uno-audit import: cannot read {name}: {error.strerror or error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        print(f"uno-audit import: {name}: line {line}: not UTF-8: {error.reason}", file=sys.stderr)
        return EXIT_USAGE
    tokens: list[str] = []

    def hashes(count: int) -> list[bytes]:
        tokens[:] = [new_token() for _ in range(count)]
        return [token_hash(token) for token in tokens]

    async def work(auditor: Auditor) -> int:
        try:
            imported = await auditor.import_record(
                text,
                tournament_id=args.tournament,
                seat_token_hashes=hashes,
                command_id=_new_id(),
                request_hash=hashlib.sha256(b"ImportRecord\0" + text.encode("utf-8")).digest(),
            )
        except Refused as refused:
            if refused.field == "record":
                raise _Stop(f"{name}: {refused.message}") from None
            raise
        report = imported.report
        seats = [
            {"seat": seat, "player": player, "token": token}
            for seat, (player, token) in enumerate(zip(imported.players, tokens, strict=False))
        ]
        if args.json:
            _print_json(
                {
                    "game_id": imported.game_id,
                    "version": imported.version,
                    "duplicate": imported.duplicate,
                    "seats": seats,
                    "valid": report["valid"],
                    "violations": len(report["violations"]),
                    "report": report,
                }
            )
        else:
            print(_human_import(name, imported.game_id, imported.version, seats, report, imported.duplicate))
        return EXIT_OK

    return _on_auditor(args, work)


def _count(number: int, thing: str) -> str:
    return f"{number} {thing}" if number == 1 else f"{number} {thing}s"


def _human_import(
    name: str,
    game_id: str,
    version: int,
    seats: list[dict[str, Any]],
    report: dict[str, Any],
    duplicate: bool,
) -> str:
    lines = [
        f"imported {name} as game {game_id}: {report['variant']}, {len(report['scores'])} players, "
        f"version {version}"
    ]
    if duplicate or not seats:
        lines.append("the record was imported before; its seat tokens were shown then, not again")
    else:
        lines.append("seat tokens (shown once: only their hashes are stored; hand each player theirs now):")
        lines.extend(f"  seat {s['seat']} {s['player']}: {s['token']}" for s in seats)
    rulings = _count(len(report["rulings"]), "ruling")
    if report["valid"]:
        lines.append(f"verdict at import: VALID ({rulings})")
    else:
        violations = _count(len(report["violations"]), "violation")
        lines.append(f"verdict at import: INVALID: {violations} ({rulings})")
        for violation in report["violations"]:
            lines.append(f"  line {violation['line']}: {violation['rule']}: {violation['message']}")
    return "\n".join(lines)
