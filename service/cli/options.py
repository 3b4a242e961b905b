"""The command line's parser machinery: its parser class, the environment's defaults, the argument types
and the option groups several commands share."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from service.cli.exits import EXIT_USAGE
from service.rules.options import OptionError, Variant
from service.store.migrate import SERVICE_LOGIN

MAX_ID = 128  # the longest game or tournament id the service takes
MAX_SEAT = 9  # ten players at most
SERVICE_PASSWORD_ENV = "UNO_AUDIT_SERVICE_PASSWORD"
ENV_PREFIX = "UNO_AUDIT_"
LOG_FORMATS = ("json", "console")
LOG_LEVELS = ("debug", "info", "warning", "error")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
_FROM_ENVIRONMENT = object()
"""What a parser first puts in place of an option that has a variable set, so that it can tell after
parsing whether the command line gave the option (then the flag wins) or not (then the variable does)."""


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


class Parser(argparse.ArgumentParser):
    """``uno-audit``'s parsers: exit status 2 for bad usage, every default in the help, and the defaults
    of the options given to :func:`from_environment` taken from their variables."""

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


def from_environment(parser: Parser, special: dict[str, str]) -> None:
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


def parse_variant(name: str) -> Variant:
    try:
        return Variant.parse(name)
    except OptionError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def rule_option(text: str) -> tuple[str, Any]:
    """``NAME=VALUE``, a rule option: the value is read as JSON (``true``, ``500``, ``[1, 2]``), and as a
    plain string when it is not JSON (``stacking=any``). Whether the option exists is the rules' to say."""
    name, equals, value = text.partition("=")
    if not equals or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    try:
        return name, json.loads(value)
    except ValueError:
        return name, value


def bounded(low: int, high: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not between {low} and {high}")
        return value

    return parse


def host_port(text: str) -> str:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"HOST:PORT, not {text!r}")
    return text


def installed_version() -> str:
    try:
        return importlib.metadata.version("uno-audit")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "(not installed)"


def game_id(text: str) -> str:
    if not 1 <= len(text) <= MAX_ID or not text.isprintable():
        raise argparse.ArgumentTypeError(f"a game id is 1 to {MAX_ID} printable characters, not {text!r}")
    return text


def tournament_id(text: str) -> str:
    if len(text) > MAX_ID or not text.isprintable():
        raise argparse.ArgumentTypeError(f"a tournament id is at most {MAX_ID} printable characters")
    return text


def logging_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="json",
        help="json: one object a line, for a collector; console: aligned and coloured, for a person",
    )
    sub.add_argument("--log-level", choices=LOG_LEVELS, default="info", help="the least severe level logged")


def tls_client_options(sub: argparse.ArgumentParser) -> None:
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


def service_password_option(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--service-password-file",
        type=Path,
        metavar="PATH",
        help=f"set the password of the login {SERVICE_LOGIN} from this file; none: from "
        f"${SERVICE_PASSWORD_ENV} if set, else leave it as it is",
    )


def stored_games_database(sub: argparse.ArgumentParser) -> None:
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
