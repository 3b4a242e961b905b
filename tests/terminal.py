"""A pseudo-terminal for the tests of what commands show a person (progress bars on standard error)."""

from __future__ import annotations

import fcntl
import os
import struct
import termios


def open_terminal(columns: int = 100) -> tuple[int, int]:
    """``(our end, the child's end)`` of a new pseudo-terminal ``columns`` wide, as a person's would be (a
    fresh one has no size, and progress bars draw nothing on a terminal of no width)."""
    ours, childs = os.openpty()
    fcntl.ioctl(childs, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    return ours, childs


def read_until_closed(fd: int) -> bytes:
    """Everything shown on the terminal until the child's end is closed."""
    chunks = []
    while True:
        try:
            data = os.read(fd, 4096)
        except OSError:  # EIO: the child's end of the terminal is closed
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)
