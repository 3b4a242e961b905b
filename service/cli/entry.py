"""The ``uno-audit`` console script: Ctrl-C is one line and exit 130 from its first moment, imports too.

The command line imports gRPC, psycopg and the rules engine before it can catch anything. This module
imports nothing heavy and takes SIGINT first thing, so a Ctrl-C during those imports ends the process
with the same line; then Python's own handling is back for the command. It also has asyncio's Ctrl-C
(which cancels a command's task) silence psycopg first (:func:`service.cli.exits.quiet_interrupt`).
"""

import os
import signal
import sys
from types import FrameType


def _interrupted_early(signum: int, frame: FrameType | None) -> None:
    """Ctrl-C before the command runs: nothing started yet, nothing to clean up, so exit at once."""
    words = [word for word in sys.argv[1:] if not word.startswith("-")]
    # The command's name as main() says it (`uno-audit serve: interrupted`), read before the parser exists.
    named = f"uno-audit {words[0]}" if words and words[0].replace("-", "").isalnum() else "uno-audit"
    os.write(2, f"{named}: interrupted\n".encode())
    os._exit(130)


if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not an ignored SIGINT (nohup, &)
    signal.signal(signal.SIGINT, _interrupted_early)


def main() -> int:
    """Import the command line and run it; Ctrl-C at any moment: one line, 130."""
    from service.cli import main as command_line

    _quiet_asyncio_interrupts()
    if signal.getsignal(signal.SIGINT) is _interrupted_early:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # KeyboardInterrupt: main() handles it
    return command_line.main()


def _quiet_asyncio_interrupts() -> None:
    """asyncio.run's Ctrl-C handler cancels the command's task, and psycopg logs as that unwinds: silence
    it first. asyncio offers no hook but its runner's handler; without one (a later Python), the command
    still ends in one line, psycopg's warnings aside."""
    import asyncio

    from service.cli.exits import quiet_interrupt

    original = getattr(asyncio.Runner, "_on_sigint", None)
    if original is None:
        return

    def on_sigint(self: asyncio.Runner, *args: object, **kwargs: object) -> object:
        quiet_interrupt()
        return original(self, *args, **kwargs)

    asyncio.Runner._on_sigint = on_sigint  # type: ignore[attr-defined]


if __name__ == "__main__":
    sys.exit(main())
