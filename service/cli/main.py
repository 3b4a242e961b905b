"""The ``uno-audit`` command line.

* ``uno-audit simulate --variant V --players N --games G --seed S [--option NAME=VALUE ...] [--json]
  [--records DIR] [--record-mode seed|deck|hands]``: bots play complete games in-process with the rules'
  invariants checked, and may write them as records in any of the three modes; exit 1 if an invariant
  breaks. ``--option`` sets a rule option (a house rule: ``stacking=any``, ``jump_in=true``; the value
  is read as JSON, else as a string); ``--every-house-rule`` plays every house-rule combination the rule
  set supports at every table size from 2 to 10, ``--games`` games each.
* ``uno-audit verify --record FILE|- [--json]``: replay and adjudicate a game record offline (``-``: read
  it from standard input); exit 0 when valid, 1 when it has violations, 2 when it cannot be read.
* ``uno-audit verify --game ID [--json] [--reveal-seed] [--no-projections] [--database-url DSN]``: a
  stored game's full report (hash chain, seed, today's replay, violations, rulings, disputes); exit 0
  when valid, 1 when not (a log that cannot be read back counts as not valid), 2 for an unknown game.
  ``--reveal-seed`` reveals (and records revealing) the seed of a game in progress.
* ``uno-audit verify --all [--json] [--no-projections] [--database-url DSN]``: every stored game through
  today's rules engine, with a progress bar on standard error (a terminal's), a summary table and the
  games whose stored outcome differs from today's replay; exit 1 if any game is invalid.
* ``uno-audit adjudicate catch|challenge --game ID --position N [--by SEAT] [--target SEAT] [--json]
  [--database-url DSN]``: the ruling on the UNO catch or Wild Draw Four challenge at a position of a
  stored game; exit 2 if it cannot be adjudicated as asked, or if nothing of its kind can be judged there
  (no Wild Draw Four waits for an answer; nobody to catch): one line says what the position holds.
* ``uno-audit export --game ID [--reveal-seed] [--json] [--database-url DSN]``: a stored game's
  ``uno-game-record/1`` text on standard output, byte for byte (``> game.jsonl``).
* ``uno-audit import FILE [--tournament T] [--json] [--database-url DSN]``: store a table game's record
  as an imported game; prints its id, the seat tokens (shown once) and the verdict at import.
* ``uno-audit replay --record FILE | --game ID [--as-seat N] [--out FILE] [--database-url DSN]``: the
  arbiter's replay, one self-contained HTML page to step through every position (the adjudicator's view,
  or only what seat N may see).
* ``uno-audit serve [--listen HOST:PORT] [--database-url DSN] [--migrate-url DSN] [--data-dir DIR]
  [--admin-token-file PATH] [--service-password-file PATH]``: the gRPC game service, logged in as its
  own restricted role (the URL's login; see "Credentials" below); without a database URL (flag or
  ``DATABASE_URL``) it starts an embedded PostgreSQL, migrates it and logs in as ``uno_audit_service``.
  ``--metrics-listen HOST:PORT`` serves Prometheus metrics over HTTP; ``--tls-cert`` and ``--tls-key``
  make the gRPC port TLS only, ``--tls-client-ca`` mutual TLS.
  ``--workers N`` runs N server processes on the one port (default: one per core; 1 with
  ``--metrics-listen``), supervised and restarted when they crash, see :mod:`service.api.workers`.
  Its logs are JSON lines (``--log-format console`` for a person) at ``--log-level`` (default info).
  Every option may come from the environment instead (below).
* ``uno-audit migrate [--database-url OWNER_DSN | --data-dir DIR] [--service-password-file PATH]``: the
  store's and the read models' migrations, as the owner, and the service's login ``uno_audit_service``.
* ``uno-audit clients add NAME | list | revoke NAME [--database-url OWNER_DSN | --data-dir DIR]``: client
  applications' keys (:mod:`service.cli.clients`); ``add`` shows the key once.
* ``uno-audit bots --server ADDR --games N --variant V --players P --concurrency C [--option NAME=VALUE]``:
  bots play complete games as gRPC clients of a running server, created with those rule options (the
  house rules among them, as for ``simulate``; repeatable); ``--tls-ca`` (and ``--tls-cert``/``--tls-key``
  for mutual TLS) to reach a TLS server, as for ``health``.
* ``uno-audit health [--server HOST:PORT] [--service NAME] [--timeout S]``: ask a running server's
  ``grpc.health.v1`` service; exit 0 when it answers SERVING, 1 otherwise or when it cannot be reached.
* ``uno-audit project [--database-url DSN | --data-dir DIR] [--log-format json|console] [--log-level L]``:
  the projector alone, keeping the read models current.
* ``uno-audit rebuild [--view NAME] [--database-url OWNER_DSN | --data-dir DIR]``: rebuild read models from
  zero and swap them in (it creates tables: the owner's login).

The commands on stored games talk to the database directly (``--database-url``, default
``$DATABASE_URL``; without one, the embedded database ``serve`` keeps in ``--data-dir``), migrating it
first, through :class:`service.app.auditor.Auditor` (:mod:`service.cli.audit`).

Credentials. The service logs in as a role that may only read and append the log and write the read
models (:mod:`service.store.migrate` describes the roles); ``serve`` refuses a login that could change
the events (one line, exit 2), and one whose schema is not current unless ``--migrate-url`` (or
``$UNO_AUDIT_MIGRATE_URL``) gives the owner's URL to migrate with first. The admin token comes from
``--admin-token-file`` or ``$UNO_AUDIT_ADMIN_TOKEN``, never from the command line (which ``ps`` shows);
an empty one, or one shorter than 16 characters, is refused; without one the admin actions are disabled,
with a warning. The service login's password, when ``migrate`` or ``serve --migrate-url`` sets it, comes
from ``--service-password-file`` or ``$UNO_AUDIT_SERVICE_PASSWORD`` and is sent to PostgreSQL only as a
SCRAM verifier.

Configuration by environment. Every ``serve`` option takes its default from ``UNO_AUDIT_<OPTION>``
(``--listen`` from ``UNO_AUDIT_LISTEN``, ``--no-projector`` from ``UNO_AUDIT_NO_PROJECTOR`` = 1/true/yes/on
or 0/false/no/off), except ``--database-url`` (``DATABASE_URL``, as every tool around PostgreSQL has it);
a flag on the command line wins. :func:`_from_environment` gives it to every option of the parser at once,
so an option added to ``serve`` later has its variable too: a container or a unit file configures the
service without a wrapper script. A variable's value is converted and checked exactly as the flag's
would be; a bad one is one line naming the variable, exit 2; an empty one counts as unset (``VAR=`` in a
compose file). The secrets themselves (``UNO_AUDIT_ADMIN_TOKEN``, ``UNO_AUDIT_SERVICE_PASSWORD``) are
not options, so that they never reach the command line (``ps`` shows it); ``--admin-token-file`` and
``--service-password-file`` (``UNO_AUDIT_ADMIN_TOKEN_FILE``, ``UNO_AUDIT_SERVICE_PASSWORD_FILE``) name a
file that holds one instead.

Progress bars (``simulate``, ``rebuild``, ``verify --all``, ``bots``) are drawn on standard error only
when it is a terminal: piped or logged, it gets nothing but errors.

Bad input (an unknown variant, option, card or game, a malformed record line, a request the auditor
refuses) gets a one-line message on standard error naming what and where, and exit status 2 — never a
traceback. Ctrl-C ends any command with one line, ``uno-audit COMMAND: interrupted``, and exit status 130
(``bots`` prints its summary so far first, marked ``"partial": true``; ``serve`` stops gracefully first).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import math
import os
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVarTuple, Unpack

from projections import VIEW_NAMES
from service.audit.render import render
from service.checkpoints import KEY_ENV
from service.cli import audit as cli_audit
from service.cli import checkpoints as cli_checkpoints
from service.cli import clients as cli_clients
from service.cli.audit import DISPUTE_KINDS, EXIT_INVALID, EXIT_OK, EXIT_USAGE, progress_bar
from service.ops.embedded import EmbeddedError
from service.play.simulate import STALL_REPEATS, InvariantError, house_rule_combinations, play_game
from service.records.export import RecordMode, record_from_game
from service.records.record import write_record
from service.records.verify import verify_record
from service.rules.options import OptionError, Variant, make_options
from service.store.migrate import SERVICE_LOGIN

if TYPE_CHECKING:  # the command line imports gRPC only in the commands that use it
    from service.api.access import Access
    from service.api.tls import ServerTLS
    from service.checkpoints.keyring import Keyring

EXIT_INTERRUPTED = 130  # 128 + SIGINT
MAX_ID = 128  # the longest game or tournament id the service takes
MAX_SEAT = 9  # ten players at most
ADMIN_TOKEN_ENV = "UNO_AUDIT_ADMIN_TOKEN"
MIN_ADMIN_TOKEN = 16  # characters: `openssl rand -hex 16` gives 32
SERVICE_PASSWORD_ENV = "UNO_AUDIT_SERVICE_PASSWORD"
ENV_PREFIX = "UNO_AUDIT_"
#: The ``serve`` options whose variable is not ``UNO_AUDIT_<OPTION>``, by destination.
SERVE_ENVIRONMENT = {"database_url": "DATABASE_URL"}
LOG_FORMATS = ("json", "console")
LOG_LEVELS = ("debug", "info", "warning", "error")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
_Ts = TypeVarTuple("_Ts")  # a signal handler's arguments
_FROM_ENVIRONMENT = object()
"""What a parser first puts in place of an option that has a variable set, so that it can tell after
parsing whether the command line gave the option (then the flag wins) or not (then the variable does)."""


class _Refused(Exception):
    """A credential or a database ``serve`` or ``migrate`` will not work with: a one-line message for
    standard error, exit status 2."""


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with its default, unless there is none to show (``None``; a flag's
    ``False``) or the help says it already (in words that fit better, or to keep a secret's value out)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default is None or action.default is False or action.default == argparse.SUPPRESS:
            return text
        if "default" in text:
            return text
        return f"{text} (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """``uno-audit``'s parsers: exit status 2 for bad usage, every default in the help, and the defaults
    of the options given to :func:`_from_environment` taken from their variables."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)
        self.environment: list[tuple[argparse.Action, str]] = []

    def error(self, message: str) -> NoReturn:  # argparse's own exit status for bad usage is 2 as well
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse ``args``, then give each option the command line left out its variable's value, if set.

        Only then, so that a flag given wins, ``--help`` shows the defaults and not the variables'
        values (a URL may hold a password), and a variable that a flag overrides is never read."""
        namespace = argparse.Namespace() if namespace is None else namespace
        pending: list[tuple[argparse.Action, str, str]] = []
        for action, variable in self.environment:
            text = os.environ.get(variable, "")
            if text and not hasattr(namespace, action.dest):
                setattr(namespace, action.dest, _FROM_ENVIRONMENT)
                pending.append((action, variable, text))
        _, extras = super().parse_known_args(args, namespace)  # fills ``namespace`` in place
        for action, variable, text in pending:
            if getattr(namespace, action.dest) is _FROM_ENVIRONMENT:
                setattr(namespace, action.dest, self._environment_value(action, variable, text))
        return namespace, extras

    def _environment_value(self, action: argparse.Action, variable: str, text: str) -> Any:
        """``text`` converted and checked as the option's own argument would be; bad: one line, exit 2."""
        try:
            if action.nargs == 0:  # a flag
                if text.lower() not in _TRUE + _FALSE:
                    raise argparse.ArgumentTypeError(
                        f"{text!r} is neither on ({', '.join(_TRUE)}) nor off ({', '.join(_FALSE)})"
                    )
                return action.const if text.lower() in _TRUE else action.default
            value = action.type(text) if callable(action.type) else text
        except argparse.ArgumentTypeError as error:
            self.error(f"${variable}: {error}")
        except (TypeError, ValueError):
            name = getattr(action.type, "__name__", repr(action.type))
            self.error(f"${variable}: invalid {name} value: {text!r}")
        if action.choices is not None and value not in action.choices:
            self.error(f"${variable}: {text!r} is not one of {', '.join(map(str, action.choices))}")
        return value


def _from_environment(parser: _Parser, special: dict[str, str]) -> None:
    """Give every option of ``parser`` (all of them, those added later to its block too: call this last)
    a default from the environment: ``UNO_AUDIT_<OPTION>``, or the variable ``special`` names for its
    destination. Its help names the variable. Hidden options (``--admin-token``) have none."""
    for action in parser._actions:
        if argparse.SUPPRESS in (action.help, action.default) or not action.option_strings:
            continue  # hidden, --help, or a positional argument
        if action.nargs not in (None, "?", 0):
            raise TypeError(
                f"{action.option_strings[0]}: a variable holds one value, not nargs={action.nargs}"
            )
        option = max(action.option_strings, key=len)
        variable = special.get(action.dest, ENV_PREFIX + option.lstrip("-").replace("-", "_").upper())
        shown = "off" if action.nargs == 0 else "none" if action.default is None else "%(default)s"
        named = f"${variable}=1 turns it on" if action.nargs == 0 else f"${variable}"
        text = action.help or ""
        action.help = f"{text} ({named})" if "default" in text else f"{text} (default: {shown}; {named})"
        parser.environment.append((action, variable))


def _variant(name: str) -> Variant:
    try:
        return Variant.parse(name)
    except OptionError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _option(text: str) -> tuple[str, Any]:
    """``NAME=VALUE``, a rule option: the value is read as JSON (``true``, ``500``, ``[1, 2]``), and as a
    plain string when it is not JSON (``stacking=any``). Whether the option exists is the rules' to say."""
    name, equals, value = text.partition("=")
    if not equals or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    try:
        return name, json.loads(value)
    except ValueError:
        return name, value


def _bounded(low: int, high: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not between {low} and {high}")
        return value

    return parse


def _host_port(text: str) -> str:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"HOST:PORT, not {text!r}")
    return text


def _installed_version() -> str:
    try:
        return importlib.metadata.version("uno-audit")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "(not installed)"


def _game_id(text: str) -> str:
    if not 1 <= len(text) <= MAX_ID or not text.isprintable():
        raise argparse.ArgumentTypeError(f"a game id is 1 to {MAX_ID} printable characters, not {text!r}")
    return text


def _tournament(text: str) -> str:
    if len(text) > MAX_ID or not text.isprintable():
        raise argparse.ArgumentTypeError(f"a tournament id is at most {MAX_ID} printable characters")
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="uno-audit", description="Rules-audit backend for UNO-family card games.")
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {_installed_version()}",
        help="print the installed version and exit",
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    simulate = commands.add_parser("simulate", help="bots play complete games with invariants checked")
    simulate.add_argument(
        "--variant", type=_variant, required=True, help="classic, sonic, attack, mario-kart"
    )
    simulate.add_argument("--players", type=_bounded(2, 10), default=4, help="players at each table (2-10)")
    simulate.add_argument("--games", type=_bounded(1, 1_000_000), default=1, help="games to play")
    simulate.add_argument(
        "--seed", type=_bounded(0, 2**63 - 1), default=0, help="the first game's seed (the next: +1, ...)"
    )
    simulate.add_argument(
        "--option",
        type=_option,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a rule option, e.g. stacking=any or jump_in=true (repeat for several)",
    )
    simulate.add_argument(
        "--every-house-rule",
        action="store_true",
        help="play every house-rule combination the rule set supports at 2 to 10 players, "
        "--games games each (--players is ignored)",
    )
    simulate.add_argument("--json", action="store_true", help="print one JSON object")
    simulate.add_argument("--records", type=Path, help="write each game as a game record into this folder")
    simulate.add_argument(
        "--record-mode",
        choices=[mode.value for mode in RecordMode],
        default=RecordMode.SEED.value,
        help="how the records give the cards: the seed, each round's deck and reshuffles, or the dealt "
        "hands with every card listed",
    )

    verify = commands.add_parser(
        "verify", help="replay and adjudicate a game record, a stored game or every stored game"
    )
    source = verify.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--record", type=Path, metavar="FILE", help="an uno-game-record/1 file, offline (- : stdin)"
    )
    source.add_argument("--game", type=_game_id, metavar="ID", help="a stored game")
    source.add_argument("--all", action="store_true", help="every stored game")
    verify.add_argument("--json", action="store_true", help="print the report as one JSON object")
    verify.add_argument(
        "--reveal-seed",
        action="store_true",
        help="with --game: reveal the seed of a game in progress (recorded in its log)",
    )
    verify.add_argument(
        "--no-projections",
        action="store_true",
        help="with --game or --all: do not cross-check the read models",
    )
    verify.add_argument(
        "--receipts",
        type=Path,
        metavar="FILE",
        help="with --game: a player's receipts (JSON Lines of signed checkpoints) to check the log against",
    )
    verify.add_argument(
        "--key",
        action="append",
        default=[],
        metavar="VKEY",
        help="with --receipts: the service's public key",
    )
    verify.add_argument(
        "--witness", action="append", default=[], metavar="VKEY", help="with --receipts: a trusted witness"
    )
    verify.add_argument(
        "--threshold", type=int, default=0, metavar="K", help="with --receipts: witness signatures required"
    )
    _stored_games_database(verify)

    serve = commands.add_parser("serve", help="run the gRPC game service")
    serve.add_argument(
        "--listen", type=_host_port, default="127.0.0.1:50051", metavar="HOST:PORT", help="where to listen"
    )
    serve.add_argument(
        "--database-url",
        metavar="DSN",
        help="the service's own login; none: an embedded PostgreSQL runs in --data-dir",
    )
    serve.add_argument("--migrate-url", metavar="OWNER_DSN", help="migrate with this owner's login first")
    serve.add_argument(
        "--data-dir",
        type=Path,
        default=Path("uno-audit-data"),
        metavar="DIR",
        help="the embedded database's folder (without --database-url)",
    )
    serve.add_argument(
        "--admin-token-file",
        type=Path,
        metavar="PATH",
        help=f"a file holding the adjudicator's token; none: ${ADMIN_TOKEN_ENV} holds it, or no admin",
    )
    # Refused with a message of its own: argparse would otherwise take it for an abbreviation of
    # --admin-token-file, or echo the token in its "unrecognized arguments" error.
    serve.add_argument("--admin-token", help=argparse.SUPPRESS)
    serve.add_argument(
        "--database-timeout",
        type=_bounded(1, 600),
        default=5,
        metavar="S",
        help="seconds to wait for the database: at start-up (then exit 2), and per call while it is away "
        "(then UNAVAILABLE)",
    )
    _service_password_option(serve)
    serve.add_argument(
        "--no-projector",
        action="store_true",
        help="do not run the projector (run `uno-audit project` instead)",
    )
    serve.add_argument(
        "--metrics-listen",
        type=_host_port,
        metavar="HOST:PORT",
        help="serve Prometheus metrics over HTTP here (GET /metrics); none: no metrics endpoint",
    )
    serve.add_argument(
        "--allow-anonymous",
        action="store_true",
        help="let callers without a client key create games on a non-loopback address (on 127.0.0.1 "
        "and ::1 they may anyway); see `uno-audit clients`",
    )
    for quota, default, text in (
        ("creations-per-minute", 60, "games a client may create per minute"),
        ("live-games", 200, "games of a client's in progress at once"),
        ("streams", 200, "WatchGame streams a client's callers (its games' seats) hold open at once"),
        ("spectators-per-game", 50, "WatchGame streams of spectators one game has open at once"),
    ):
        serve.add_argument(
            f"--quota-{quota}",
            type=_bounded(1, 1_000_000),
            default=default,
            metavar="N",
            help=f"{text}; the callers without a key count as one client",
        )
    serve.add_argument(
        "--workers",
        type=_bounded(1, 256),
        metavar="N",
        help="server processes sharing the port (SO_REUSEPORT), each with its own database pool and cache; "
        "none: the number of cores, or 1 with --metrics-listen",
    )
    serve.add_argument(
        "--tls-cert",
        type=Path,
        metavar="PATH",
        help="the server's certificate chain (PEM): with --tls-key, the gRPC port speaks TLS only",
    )
    serve.add_argument("--tls-key", type=Path, metavar="PATH", help="the server certificate's key (PEM)")
    serve.add_argument(
        "--tls-client-ca",
        type=Path,
        metavar="PATH",
        help="mutual TLS: every client must present a certificate this CA (PEM) issued",
    )
    serve.add_argument(
        "--checkpoint-key-file",
        type=Path,
        metavar="PATH",
        help=f"the key signing receipts (uno-audit keygen; ${KEY_ENV} holds one instead); default: "
        "DATA_DIR/checkpoint.key, made on first start",
    )
    serve.add_argument(
        "--checkpoint-old-keys",
        type=Path,
        metavar="PATH",
        help="the verifier keys the service signed with before a rotation, one per line, still published",
    )
    _logging_options(serve)

    migrate = commands.add_parser(
        "migrate", help="migrate the database as its owner and make the service's restricted login"
    )
    _stored_games_database(migrate)
    _service_password_option(migrate)
    cli_clients.add_parser(commands, _stored_games_database)

    for name, text in (
        ("project", "keep the read models current (the projector)"),
        ("rebuild", "rebuild read models from zero and swap them in"),
    ):
        sub = commands.add_parser(name, help=text)
        _stored_games_database(sub)
        if name == "project":
            _logging_options(sub)
        else:
            sub.add_argument("--view", choices=VIEW_NAMES, help="one read model (default: all)")

    bots = commands.add_parser("bots", help="bots play complete games against a running server")
    bots.add_argument("--server", default="127.0.0.1:50051", help="host:port of the server")
    bots.add_argument("--games", type=_bounded(1, 1_000_000), default=1, help="games to play")
    bots.add_argument("--variant", type=_variant, required=True, help="classic, sonic, attack, mario-kart")
    bots.add_argument("--players", type=_bounded(2, 10), default=4, help="players at each table (2-10)")
    bots.add_argument(
        "--concurrency", type=_bounded(1, 10_000), default=1, help="games played at the same time"
    )
    bots.add_argument(
        "--seed",
        type=_bounded(0, 2**63 - 1),
        default=0,
        help="seeds the bots' choices (each game's drawn from it)",
    )
    bots.add_argument("--target-score", type=_bounded(1, 1_000_000), help="play matches to this score")
    bots.add_argument(
        "--option",
        type=_option,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a rule option of the games created, e.g. stacking=any or jump_in=true (repeat for several)",
    )
    bots.add_argument(
        "--retry-for",
        type=_bounded(0, 86_400),
        default=60,
        metavar="S",
        help="retry an unavailable server for up to S seconds per call, with the same command id (0: never)",
    )
    bots.add_argument("--backoff-cap", type=_bounded(1, 3_600), default=5, metavar="S", help="longest wait")
    bots.add_argument("--call-timeout", type=_bounded(1, 3_600), default=30, metavar="S", help="per attempt")
    bots.add_argument(
        "--receipts",
        type=Path,
        metavar="FILE",
        help="keep every reply's receipt (a signed checkpoint), one JSON object per line, as players would",
    )
    _tls_client_options(bots)

    health = commands.add_parser("health", help="ask a running server's gRPC health service")
    health.add_argument("--server", default="127.0.0.1:50051", help="host:port (default 127.0.0.1:50051)")
    health.add_argument(
        "--service",
        default="",
        metavar="NAME",
        help="a service's health, e.g. uno.audit.v1.GameService (default: the whole server's)",
    )
    health.add_argument(
        "--timeout", type=_bounded(1, 600), default=5, metavar="S", help="give up after S seconds (default 5)"
    )
    _tls_client_options(health)

    adjudicate = commands.add_parser(
        "adjudicate", help="rule on the UNO catch or Wild Draw Four challenge at a position of a stored game"
    )
    adjudicate.add_argument("kind", choices=sorted(DISPUTE_KINDS), help="catch or challenge")
    adjudicate.add_argument("--game", type=_game_id, metavar="ID", required=True, help="a stored game")
    adjudicate.add_argument(
        "--position",
        type=_bounded(1, 2**31 - 1),
        metavar="N",
        required=True,
        help="the position in the game's log (line n of an imported record is position n + 1)",
    )
    adjudicate.add_argument(
        "--by",
        type=_bounded(0, MAX_SEAT),
        metavar="SEAT",
        help="the seat that catches or challenges, when none is recorded at the position (else compared)",
    )
    adjudicate.add_argument(
        "--target",
        type=_bounded(0, MAX_SEAT),
        metavar="SEAT",
        help="the seat caught, when no catch is recorded at the position (else only compared)",
    )
    adjudicate.add_argument("--json", action="store_true", help="print the ruling as one JSON object")
    _stored_games_database(adjudicate)

    export = commands.add_parser("export", help="write a stored game's record to standard output")
    export.add_argument("--game", type=_game_id, metavar="ID", required=True, help="a stored game")
    export.add_argument(
        "--reveal-seed",
        action="store_true",
        help="a game in progress: reveal its seed (recorded in its log) so that it can be exported",
    )
    export.add_argument(
        "--json", action="store_true", help="print {game_id, sha256, record} instead of the bare record"
    )
    _stored_games_database(export)

    imports = commands.add_parser("import", help="store a table game's record as an imported game")
    imports.add_argument("file", type=Path, metavar="FILE", help="an uno-game-record/1 file (- : stdin)")
    imports.add_argument(
        "--tournament", type=_tournament, default="", metavar="T", help="the tournament it belongs to"
    )
    imports.add_argument("--json", action="store_true", help="print one JSON object")
    _stored_games_database(imports)

    replay = commands.add_parser(
        "replay", help="the arbiter's replay of a record or a stored game: one self-contained HTML page"
    )
    replayed = replay.add_mutually_exclusive_group(required=True)
    replayed.add_argument("--record", type=Path, help="an uno-game-record/1 file (offline)")
    replayed.add_argument("--game", type=_game_id, metavar="ID", help="a stored game")
    replay.add_argument(
        "--out", type=Path, metavar="FILE", help="write the page here (default: standard output)"
    )
    replay.add_argument(
        "--as-seat",
        type=_bounded(0, MAX_SEAT),
        metavar="N",
        help="only what seat N may see: its own hand, the others' counts (default: every hand)",
    )
    _stored_games_database(replay)

    keygen = commands.add_parser("keygen", help="make a checkpoint signing key; print its public key")
    keygen.add_argument("--name", required=True, help="the key's name: the service's, as in its origins")
    keygen.add_argument("--out", type=Path, required=True, metavar="FILE", help="the private key (0600)")
    keygen.add_argument("--force", action="store_true", help="replace FILE if it exists")
    cli_checkpoints.add_commands(commands, _stored_games_database)
    _from_environment(serve, SERVE_ENVIRONMENT)  # last: the options added above, whoever adds them
    return parser


def _logging_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="json",
        help="json: one object a line, for a collector; console: aligned and coloured, for a person",
    )
    sub.add_argument("--log-level", choices=LOG_LEVELS, default="info", help="the least severe level logged")


def _tls_client_options(sub: argparse.ArgumentParser) -> None:
    """A gRPC client's TLS: the CA to trust, and a certificate of its own for a server that wants one."""
    sub.add_argument(
        "--tls-ca",
        type=Path,
        metavar="PATH",
        help="connect with TLS, trusting this CA (PEM); none: plaintext, unless --tls-cert is given "
        "(then the system's CAs)",
    )
    sub.add_argument(
        "--tls-cert", type=Path, metavar="PATH", help="mutual TLS: the client's certificate chain (PEM)"
    )
    sub.add_argument("--tls-key", type=Path, metavar="PATH", help="mutual TLS: the client certificate's key")


def _service_password_option(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--service-password-file",
        type=Path,
        metavar="PATH",
        help=f"set the password of the login {SERVICE_LOGIN} from this file; none: from "
        f"${SERVICE_PASSWORD_ENV} if set, else leave it as it is",
    )


def _stored_games_database(sub: argparse.ArgumentParser) -> None:
    """The options of the commands on stored games: a server's URL, else the embedded database that
    ``serve`` keeps in its data folder (shared with a running ``serve``)."""
    sub.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL"),
        metavar="DSN",
        help="PostgreSQL URL (default: $DATABASE_URL; without one, the embedded database in --data-dir)",
    )
    sub.add_argument(
        "--data-dir",
        type=Path,
        default=Path("uno-audit-data"),
        metavar="DIR",
        help="the folder of the embedded database `uno-audit serve` keeps (default: uno-audit-data)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit code. A reader that stops early (``| head``) ends the output quietly."""
    # Every command's first connection gives up on a database that does not answer after this many
    # seconds (libpq reads it; serve's --database-timeout sets its own), instead of waiting for TCP.
    os.environ.setdefault("PGCONNECT_TIMEOUT", "10")
    command = "uno-audit"
    try:
        args = build_parser().parse_args(argv)
        command = f"uno-audit {args.command}"
        code = _dispatch(args)
        sys.stdout.flush()  # here, not at exit, so that a closed pipe is caught below
    except BrokenPipeError:
        # Python would complain again while flushing at exit: point stdout at nothing first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_INVALID
    except KeyboardInterrupt:
        return _interrupted(command)
    except EmbeddedError as error:  # raised before any command's own error handling starts
        print(f"{command}: {error}", file=sys.stderr)
        return EXIT_USAGE
    return code


def _interrupted(command: str) -> int:
    """Ctrl-C (SIGINT): one line and exit status 130 (128 + SIGINT, as a shell reports a process the
    signal ended), whatever the command was doing; the commands' ``finally`` blocks have run by now."""
    import signal

    # A second Ctrl-C while exiting (a library's clean-up at exit) ends the process at once and quietly,
    # rather than with a traceback from inside that clean-up.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        sys.stdout.flush()  # what was printed before (bots' partial summary) goes first
    except OSError:  # a reader gone (| head): Python would complain while flushing at exit, as above
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    print(f"{command}: interrupted", file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "simulate":
        return _simulate(args)
    if args.command == "serve":
        return _serve(args)
    if args.command == "bots":
        return _bots(args)
    if args.command == "health":
        return _health(args)
    if args.command in ("migrate", "project", "rebuild", "clients"):
        run = {"migrate": _migrate, "project": _project, "rebuild": _rebuild, "clients": cli_clients.run}
        return _on_database(args, run[args.command])
    if args.command == "adjudicate":
        return cli_audit.adjudicate(args)
    if args.command == "export":
        return cli_audit.export(args)
    if args.command == "import":
        return cli_audit.import_record(args)
    if args.command == "replay":
        return cli_audit.replay(args)
    if args.command == "keygen":
        return _keygen(args)
    if args.command in ("checkpoint", "prove", "check-proof", "cosign"):
        return cli_checkpoints.run(args)
    if args.receipts is not None and args.game is None:
        print("uno-audit verify: --receipts goes with --game", file=sys.stderr)
        return EXIT_USAGE
    if args.game is not None or args.all:
        return cli_audit.verify_stored(args)
    for flag, given in (("--reveal-seed", args.reveal_seed), ("--no-projections", args.no_projections)):
        if given:
            print(f"uno-audit verify: {flag} goes with --game or --all, not --record", file=sys.stderr)
            return EXIT_USAGE
    return _verify(args)


def _keygen(args: argparse.Namespace) -> int:
    """Make an Ed25519 key for signing checkpoints, write it to ``--out`` (mode 0600; an existing file
    only with ``--force``) and print its public verifier key and key id, to publish, as one JSON object.
    """
    from service.checkpoints import KeyFormatError, Signer, write_signer

    try:
        signer = Signer.generate(args.name)
        write_signer(signer, args.out, force=args.force)
    except KeyFormatError as error:
        print(f"uno-audit keygen: {error}", file=sys.stderr)
        return EXIT_USAGE
    except FileExistsError:
        print(f"uno-audit keygen: {args.out} exists (--force replaces the key in it)", file=sys.stderr)
        return EXIT_USAGE
    except OSError as error:
        print(f"uno-audit keygen: cannot write {args.out}: {error.strerror or error}", file=sys.stderr)
        return EXIT_USAGE
    key = {"name": signer.name, "key_id": f"{signer.key_id:08x}", "verifier_key": signer.verifier.encode()}
    print(json.dumps({**key, "key_file": str(args.out)}))
    return EXIT_OK


def _on_database(args: argparse.Namespace, command: Callable[[argparse.Namespace], int]) -> int:
    """Run ``command`` on ``--database-url``, else on the embedded database ``serve`` keeps in
    ``--data-dir`` (as its owner: the quick start's migrations, projector and rebuilds need no URL)."""
    if args.database_url is not None:
        return command(args)
    if not args.data_dir.is_dir():
        print(
            f"uno-audit {args.command}: no database: give --database-url (or $DATABASE_URL), or run "
            f"`uno-audit serve` first, which keeps an embedded one in {args.data_dir}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    from service.ops.embedded import embedded_database

    args.database_url, embedded = embedded_database(args.data_dir)
    try:
        return command(args)
    finally:
        embedded.cleanup()  # stops it only if no other process (a running serve) uses it


def _project(args: argparse.Namespace) -> int:
    import signal

    import psycopg

    from projections.projector import run_projector
    from service.api.server import configure_logging
    from service.store import StoreError

    configure_logging(args.log_format, args.log_level)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run_projector(args.database_url, stop=stop)

    try:  # once it runs, the projector rides out outages itself; a start that fails is one line
        if _stopped_by_sigint(run()):
            raise KeyboardInterrupt  # stopped cleanly all the same: main() says so, exit 130
    except (psycopg.Error, StoreError) as error:
        print(f"uno-audit project: database: {_one_line(error)}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def _rebuild(args: argparse.Namespace) -> int:
    import psycopg

    from projections.rebuild import PHASES, RebuildBusy, rebuild
    from service.store import StoreError

    try:
        with progress_bar(len(PHASES), "rebuild", "phase") as bar:

            def phase_done(name: str) -> None:
                bar.set_postfix_str(f"{name} done")
                bar.update(1)

            report = asyncio.run(rebuild(args.database_url, args.view, on_phase=phase_done))
    except RebuildBusy as busy:
        print(f"uno-audit rebuild: {busy}", file=sys.stderr)
        return EXIT_INVALID
    except psycopg.errors.InsufficientPrivilege as error:
        print(
            f"uno-audit rebuild: {_one_line(error)}: a rebuild creates tables, give the owner's URL",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except (psycopg.Error, StoreError) as error:
        print(f"uno-audit rebuild: database: {_one_line(error)}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps(report.to_json()))
    return EXIT_OK


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _secret(kind: str, path: Path | None, env: str) -> str | None:
    """The secret in the file at ``path`` if given, else in the environment variable ``env``; ``None``
    when neither is set. Surrounding whitespace (a file's last newline) is not part of it; an empty one is
    :class:`_Refused`. Messages name where the secret was looked for, never the secret."""
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) and error.strerror else error
            raise _Refused(f"cannot read the {kind} file {path}: {reason}") from None
        where = str(path)
    else:
        found = os.environ.get(env)
        if found is None:
            return None
        text, where = found, f"${env}"
    secret = text.strip()
    if not secret:
        raise _Refused(f"the {kind} in {where} is empty")
    return secret


def _admin_token(args: argparse.Namespace) -> str | None:
    """The adjudicator's token, or ``None`` for none; :class:`_Refused` if given but unfit."""
    if args.admin_token is not None:
        raise _Refused(
            f"--admin-token is not accepted (every user of the machine sees it in `ps`): put the token in "
            f"${ADMIN_TOKEN_ENV} or in a file named by --admin-token-file"
        )
    token = _secret("admin token", args.admin_token_file, ADMIN_TOKEN_ENV)
    if token is None:
        return None
    where = args.admin_token_file or f"${ADMIN_TOKEN_ENV}"
    if len(token) < MIN_ADMIN_TOKEN:
        raise _Refused(
            f"the admin token in {where} is shorter than {MIN_ADMIN_TOKEN} characters "
            "(make one with `openssl rand -hex 32`)"
        )
    if not (token.isascii() and token.isprintable()):
        raise _Refused(f"the admin token in {where} must be printable ASCII (it travels in a gRPC header)")
    return token


def _stopped_by_sigint(main: Coroutine[Any, Any, None]) -> bool:
    """Run ``main`` as ``asyncio.run`` does; whether it stopped for a SIGINT that a handler of its own
    (``loop.add_signal_handler``: ``serve``'s and ``project``'s graceful stop) caught.

    Those handlers stop the service gently, and Ctrl-C then ends the command as it ends every other one
    (exit 130); SIGTERM, a supervisor's stop, still ends it with 0. The loop notes which signal came,
    so that the servers' own code need not report it."""
    import signal

    received: set[int] = set()

    class _Noting(asyncio.SelectorEventLoop):
        def add_signal_handler(
            self, sig: int, callback: Callable[[Unpack[_Ts]], object], *args: *_Ts
        ) -> None:
            def noted(*given: *_Ts) -> None:
                received.add(sig)
                callback(*given)

            super().add_signal_handler(sig, noted, *args)

    with asyncio.Runner(loop_factory=_Noting) as runner:
        runner.run(main)
    return signal.SIGINT in received


def _migrate(args: argparse.Namespace) -> int:
    import psycopg

    from service.store import StoreError

    try:
        password = _secret("service password", args.service_password_file, SERVICE_PASSWORD_ENV)
        applied = asyncio.run(_migrate_database(args.database_url, password))
    except _Refused as refused:
        print(f"uno-audit migrate: {refused}", file=sys.stderr)
        return EXIT_USAGE
    except (psycopg.Error, StoreError) as error:
        print(f"uno-audit migrate: {_one_line(error)}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps({"applied": applied, "login": SERVICE_LOGIN, "password_set": password is not None}))
    return EXIT_OK


async def _migrate_database(owner_url: str, password: str | None) -> list[str]:
    """Apply the store's and the read models' migrations as the owner, and make the service's login;
    return the names of the migrations applied."""
    from projections.migrate import apply_migrations as migrate_projections
    from service.store.migrate import apply_migrations as migrate_store
    from service.store.migrate import ensure_service_login

    applied = await migrate_store(owner_url)
    applied += await migrate_projections(owner_url)
    await ensure_service_login(owner_url, password)
    return applied


def _serve(args: argparse.Namespace) -> int:
    import psycopg
    import structlog
    from psycopg.conninfo import make_conninfo

    # gRPC's core writes its own lines to standard error (a failed bind, twice); the service says what
    # went wrong in one line. GRPC_VERBOSITY set by the operator still wins.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    from service.api.server import ListenError, configure_logging
    from service.api.tls import TLSError, server_tls
    from service.api.workers import WorkerError
    from service.ops.embedded import embedded_database
    from service.store import StoreError

    embedded = None
    try:
        token = _admin_token(args)
        password = _secret("service password", args.service_password_file, SERVICE_PASSWORD_ENV)
        if args.migrate_url is not None and args.database_url is None:
            raise _Refused("--migrate-url goes with --database-url, the service's own login")
        workers = _workers(args)
        tls = server_tls(args.tls_cert, args.tls_key, args.tls_client_ca)
        configure_logging(args.log_format, args.log_level)
        log = structlog.get_logger("uno_audit.server")
        if token is None:
            log.warning(
                "admin actions are disabled: no admin token",
                hint=f"set ${ADMIN_TOKEN_ENV} or --admin-token-file to enable the adjudicator",
            )
        service_url, migrate_url = args.database_url, args.migrate_url
        if service_url is None:
            # The quick start: the embedded server's superuser migrates, the service logs in as its own
            # role over the same socket (the embedded server trusts local connections).
            migrate_url, embedded = embedded_database(
                args.data_dir,
                lambda folder: log.info("first start: creating the database", data_dir=str(folder)),
            )
            log.info("embedded database started", data_dir=str(args.data_dir))
            service_url = make_conninfo(migrate_url, user=SERVICE_LOGIN)
        # After the embedded database: the default key file is in its folder, which initdb wants empty.
        keyring = _keyring(args)
        log.info("signing receipts", key=keyring.signer.verifier.encode(), published=len(keyring.published))
        service = _run_service(args, service_url, migrate_url, password, token, tls, keyring, workers)
        if _stopped_by_sigint(service):
            raise KeyboardInterrupt  # stopped gracefully all the same: main() says so, exit 130
    except (_Refused, StoreError, ListenError, TLSError) as refused:
        print(f"uno-audit serve: {refused}", file=sys.stderr)
        return EXIT_USAGE
    except WorkerError as failed:
        print(f"uno-audit serve: {failed}", file=sys.stderr)
        return failed.exit_code
    except psycopg.Error as error:
        print(f"uno-audit serve: database: {_one_line(error)}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as error:
        print(f"uno-audit serve: {error}", file=sys.stderr)
        return EXIT_INVALID
    finally:
        if embedded is not None:
            embedded.cleanup()
    return EXIT_OK


async def _run_service(
    args: argparse.Namespace,
    service_url: str,
    migrate_url: str | None,
    password: str | None,
    token: str | None,
    tls: ServerTLS | None,
    keyring: Keyring,
    workers: int = 1,
) -> None:
    """Migrate with ``migrate_url`` if given; refuse a login that is not restricted, or a schema that is
    not current; then serve as ``service_url``'s login until SIGTERM or SIGINT, in ``workers`` processes."""
    import psycopg

    from projections.migrate import PROJECTIONS
    from service.api.server import serve
    from service.store.migrate import STORE, SchemaNotCurrent, check_service_login, pending_migrations

    if migrate_url is not None:
        await _migrate_database(migrate_url, password)
    async with await psycopg.AsyncConnection.connect(
        service_url, autocommit=True, connect_timeout=max(1, math.ceil(args.database_timeout))
    ) as conn:
        await check_service_login(conn)
        pending = [name for ledger in (STORE, PROJECTIONS) for name in await pending_migrations(conn, ledger)]
    if pending:
        raise SchemaNotCurrent(
            f"the database's schema is not current ({', '.join(pending)} pending): run `uno-audit migrate "
            "--database-url OWNER_URL`, or give serve the owner's URL as --migrate-url"
        )
    await serve(
        listen=args.listen,
        database_url=service_url,
        admin_token=token,
        projector=not args.no_projector,
        database_timeout=args.database_timeout,
        metrics_listen=args.metrics_listen,
        tls=tls,
        keyring=keyring,
        workers=workers,
        log_format=args.log_format,
        log_level=args.log_level,
        access=_access(args),
        reload_keyring=lambda: _keyring(args),  # SIGHUP, with --workers: the key file read again
    )


def _access(args: argparse.Namespace) -> Access:
    """Who may create games (a client key, beyond loopback, unless ``--allow-anonymous``) and the quotas."""
    from service.api.access import Access, Quotas, is_loopback

    quotas = Quotas(
        creations_per_minute=args.quota_creations_per_minute,
        live_games=args.quota_live_games,
        streams=args.quota_streams,
        spectators_per_game=args.quota_spectators_per_game,
    )
    return Access(require_key=not (args.allow_anonymous or is_loopback(args.listen)), quotas=quotas)


def _workers(args: argparse.Namespace) -> int:
    """``--workers``, else one per core this process may run on; with ``--metrics-listen``, 1 unless
    asked (its deployments size a pod by one process: a node's cores are not the pod's)."""
    if args.metrics_listen is not None and args.workers is None:
        return 1
    if args.workers is not None:
        return int(args.workers)
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
    return max(1, len(cores))


def _keyring(args: argparse.Namespace) -> Keyring:
    """The receipts' keyring: ``$UNO_AUDIT_CHECKPOINT_KEY``, else ``--checkpoint-key-file``, else a key
    named ``uno-audit`` made once in the data folder and kept there."""
    from service.checkpoints import KeyFormatError
    from service.checkpoints.keyring import load_keyring

    path = args.checkpoint_key_file or args.data_dir / "checkpoint.key"
    create_as = None if args.checkpoint_key_file else "uno-audit"
    try:
        older = args.checkpoint_old_keys.read_text().split() if args.checkpoint_old_keys else []
        return load_keyring(path, older, create_as=create_as)
    except (OSError, KeyFormatError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise _Refused(f"the checkpoint key ({path}): {reason}") from None


def _bots(args: argparse.Namespace) -> int:
    import grpc

    from service.api.tls import TLSError, channel_credentials
    from service.client.bots import LoadSummary, Receipt, RetryPolicy, run_bots

    try:
        credentials = channel_credentials(args.tls_ca, args.tls_cert, args.tls_key)
    except TLSError as error:
        print(f"uno-audit bots: {error}", file=sys.stderr)
        return EXIT_USAGE

    options = dict(args.option)
    try:
        make_options(args.variant, options)
    except OptionError as error:
        print(f"uno-audit bots: setup.options: {error}", file=sys.stderr)
        return EXIT_USAGE
    policy = RetryPolicy(
        retry_for=args.retry_for, backoff_cap=args.backoff_cap, call_timeout=args.call_timeout
    )
    bar = progress_bar(args.games, "games", "game")

    def progress(summary: LoadSummary) -> None:
        bar.update(summary.games - bar.n)
        bar.set_postfix(retries=summary.retries)

    try:
        kept = contextlib.ExitStack()
        keep = None
        if args.receipts is not None:
            receipts = kept.enter_context(args.receipts.open("w", encoding="utf-8"))

            def keep(receipt: Receipt) -> None:
                receipts.write(json.dumps(receipt.to_json()) + "\n")

    except OSError as error:
        print(f"uno-audit bots: cannot write {args.receipts}: {error.strerror or error}", file=sys.stderr)
        return EXIT_USAGE
    summary = LoadSummary()
    try:
        with bar, kept:
            asyncio.run(
                run_bots(
                    args.server,
                    games=args.games,
                    variant=args.variant,
                    players=args.players,
                    concurrency=args.concurrency,
                    seed=args.seed,
                    target_score=args.target_score,
                    options=options,
                    policy=policy,
                    progress=progress,
                    credentials=credentials,
                    keep=keep,
                    summary=summary,
                )
            )
    except grpc.aio.AioRpcError as error:
        print(f"uno-audit bots: {error.code().name}: {error.details()}", file=sys.stderr)
        return EXIT_INVALID
    except KeyboardInterrupt:
        # What was done before Ctrl-C, marked partial (games in flight are not counted); main() then
        # says "interrupted" on standard error.
        print(json.dumps({**summary.to_json(), "partial": True}), flush=True)
        raise
    print(json.dumps(summary.to_json()))
    return EXIT_OK if summary.rejected == 0 else EXIT_INVALID


def _health(args: argparse.Namespace) -> int:
    """One line: the status the server's health service gives ``--service``; exit 0 only for SERVING.

    Container health checks (compose, ``docker run``) run a command in the container and read its exit
    status; this is that command (Kubernetes asks the same health service itself). A server that is
    stopping answers NOT_SERVING, an unknown service name is NOT_FOUND, a server that does not answer
    within ``--timeout`` is UNAVAILABLE or DEADLINE_EXCEEDED: all exit 1, so a check never passes by
    accident."""
    # gRPC's core would add its own lines about a refused connection: the one line here says it.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from service.api.tls import TLSError, channel_credentials

    try:
        credentials = channel_credentials(args.tls_ca, args.tls_cert, args.tls_key)
    except TLSError as error:
        print(f"uno-audit health: {error}", file=sys.stderr)
        return EXIT_USAGE
    name = args.service or "server"
    try:
        with (
            grpc.insecure_channel(args.server)
            if credentials is None
            else grpc.secure_channel(args.server, credentials)
        ) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=args.service), timeout=args.timeout
            )
    except grpc.RpcError as error:
        print(
            f"uno-audit health: {args.server} {name}: {error.code().name}: {error.details()}", file=sys.stderr
        )
        return EXIT_INVALID
    print(f"{args.server} {name}: {health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}")
    return EXIT_OK if reply.status == health_pb2.HealthCheckResponse.SERVING else EXIT_INVALID


def _simulate(args: argparse.Namespace) -> int:
    given = dict(args.option)
    tables = _tables(args.variant, args.players, given, args.every_house_rule)
    try:
        settings = [(players, make_options(args.variant, options)) for players, options in tables]
    except OptionError as error:
        print(f"uno-audit simulate: setup.options: {error}", file=sys.stderr)
        return EXIT_USAGE
    if args.records is not None:
        try:
            args.records.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            print(f"uno-audit simulate: cannot write records to {args.records}: {error}", file=sys.stderr)
            return EXIT_USAGE
    rounds = moves = events = 0
    stalled: list[int] = []
    total = args.games * len(settings)
    started = time.perf_counter()
    with progress_bar(total, "games", "game") as bar:
        for index in range(total):
            seed = args.seed + index
            players, options = settings[index % len(settings)]
            try:
                game = play_game(args.variant, players, seed, options=options)
            except InvariantError as error:
                bar.close()  # its line first, then the error on a line of its own
                house = json.dumps(options.house_rules())
                print(
                    f"uno-audit simulate: game {index + 1} (seed {seed}, {players} players, house rules "
                    f"{house}): {error}",
                    file=sys.stderr,
                )
                return EXIT_INVALID
            rounds += game.rounds
            moves += len(game.steps)
            events += len(game.events)
            if game.stalled:
                stalled.append(seed)
            if args.records is not None:
                name = f"{args.variant.value}-{players}p-seed{seed}.jsonl"
                record = record_from_game(game, RecordMode(args.record_mode))
                (args.records / name).write_text(write_record(record), encoding="utf-8")
            bar.update(1)
    seconds = time.perf_counter() - started
    summary = {
        "variant": args.variant.value,
        "players": args.players if not args.every_house_rule else "2-10",
        "games": total,
        "house_rule_combinations": len({json.dumps(o.house_rules(), sort_keys=True) for _, o in settings}),
        "rounds": rounds,
        "moves": moves,
        "events": events,
        "seconds": round(seconds, 3),
        "moves_per_second": round(moves / seconds) if seconds > 0 else None,
        "invariants": "held",
        "stalled_seeds": stalled,
    }
    if args.json:
        print(json.dumps(summary))
    else:
        combinations = summary["house_rule_combinations"]
        print(
            f"{total} {args.variant.value} games of {summary['players']} ({combinations} house-rule "
            f"combination{'s' if combinations != 1 else ''}): {rounds} rounds, {moves} moves, "
            f"{events} events in {seconds:.2f} s ({summary['moves_per_second']} moves/s); "
            "card conservation and fold(events) == state held throughout"
        )
        if stalled:
            seeds = ", ".join(str(seed) for seed in stalled)
            print(
                f"{len(stalled)} game{'s' if len(stalled) != 1 else ''} stopped in a cycle of positions "
                f"repeating {STALL_REPEATS} times, which the players could not leave (seeds {seeds})"
            )
    return EXIT_OK


def _tables(
    variant: Variant, players: int, given: dict[str, Any], every_house_rule: bool
) -> list[tuple[int, dict[str, Any]]]:
    """The (players, options) of the tables ``simulate`` plays in turn: one, or with
    ``every_house_rule`` every house-rule combination at every size from 2 to 10 (the given options
    apply to all of them; a house rule given is overridden by the combination)."""
    if not every_house_rule:
        return [(players, given)]
    return [
        (size, {**given, **combination})
        for combination in house_rule_combinations(variant)
        for size in range(2, 11)
    ]


def _verify(args: argparse.Namespace) -> int:
    record = cli_audit.load_record("verify", args.record)
    if record is None:
        return EXIT_USAGE
    report = verify_record(record)
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False))
    else:
        print(render(report))
    return EXIT_OK if report.valid else EXIT_INVALID


if __name__ == "__main__":
    sys.exit(main())
