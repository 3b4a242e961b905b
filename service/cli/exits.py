"""The exit statuses of every ``uno-audit`` command, its one refusal, and how Ctrl-C ends a command."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVarTuple, Unpack

#: Done (valid), invalid, bad usage or refused, and interrupted (128 + SIGINT).
EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
_Ts = TypeVarTuple("_Ts")  # a signal handler's arguments


class Refused(Exception):
    """A command that cannot go on: ``main`` prints ``uno-audit COMMAND: message`` on standard error and
    exits with ``code`` (bad usage, an unknown game, a refusal: 2)."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def quiet_interrupt() -> None:
    """Silence what psycopg and its pool log while an interrupted command unwinds (a query cancelled, a
    connection discarded): the command says it was interrupted, in one line. Only on this path: the same
    warnings mean something while a command runs."""
    import logging

    for name in ("psycopg", "psycopg_pool"):  # the pool logs as psycopg.pool, psycopg_pool in old releases
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def one_line(error: BaseException) -> str:
    """An error's text on one line (a server's message may span several), or its type's name."""
    return " ".join(str(error).split()) or type(error).__name__


def stopped_by_sigint(main: Coroutine[Any, Any, None]) -> bool:
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
