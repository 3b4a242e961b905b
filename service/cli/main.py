"""The ``uno-audit`` command line: the parser, assembled from each command's module, and ``main``.

Each command module registers its parser and sets ``run``, the function ``main`` calls with the parsed
arguments; docs/DESIGN.md, "The command line", gives the reasoning behind its conventions.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from service.cli import (
    admin,
    audit,
    backup,
    checkpoints,
    clients,
    disputes,
    health,
    play,
    publish,
    records,
    serve,
    tournaments,
)
from service.cli.exits import EXIT_INTERRUPTED, EXIT_INVALID, EXIT_USAGE, Refused, quiet_interrupt
from service.cli.options import Parser, installed_version
from service.ops.embedded import EmbeddedError
from service.rules.engine_kind import engine_kind

#: The commands in the order ``uno-audit --help`` lists them.
COMMANDS = (
    play.register_simulate,
    records.register_verify,
    serve.register,
    admin.register_migrate,
    backup.register,
    clients.register,
    admin.register_read_models,
    play.register_bots,
    health.register,
    audit.register_adjudicate,
    disputes.register,
    records.register_export,
    records.register_import,
    records.register_replay,
    checkpoints.register_keygen,
    checkpoints.register,
    tournaments.register,
    publish.register,
)


def build_parser() -> argparse.ArgumentParser:
    """``uno-audit`` and every command's parser."""
    parser = Parser(prog="uno-audit", description="Rules-audit backend for UNO-family card games.")
    parser.add_argument(
        "--version",
        action="version",
        # The engine too: an install without a C compiler, or an editable one, runs the pure engine silently.
        version=f"%(prog)s {installed_version()} (rules engine: {engine_kind()})",
        help="print the installed version and the rules engine it runs (compiled or pure), and exit",
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for register in COMMANDS:
        register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit code. A reader that stops early (``| head``) ends the output quietly."""
    # Every command's first connection gives up on a database that does not answer after this many
    # seconds (libpq reads it; serve's --database-timeout sets its own), instead of waiting for TCP.
    os.environ.setdefault("PGCONNECT_TIMEOUT", "10")
    command = "uno-audit"
    try:
        args = build_parser().parse_args(argv)
        command = f"uno-audit {args.command}"
        code: int = args.run(args)
        sys.stdout.flush()  # here, not at exit, so that a closed pipe is caught below
    except BrokenPipeError:
        # Python would complain again while flushing at exit: point stdout at nothing first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_INVALID
    except KeyboardInterrupt:
        return _interrupted(command)
    except Refused as refused:
        print(f"{command}: {refused}", file=sys.stderr)
        return refused.code
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
    quiet_interrupt()  # connections closed at exit: psycopg's warnings about them are no news now
    try:
        sys.stdout.flush()  # what was printed before (bots' partial summary) goes first
    except OSError:  # a reader gone (| head): Python would complain while flushing at exit, as above
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    print(f"{command}: interrupted", file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
