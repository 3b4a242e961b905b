"""What the commands write for a person or a program: progress bars, JSON lines, exact bytes."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from tqdm import tqdm


def progress_bar(total: int, desc: str, unit: str) -> tqdm[NoReturn]:
    """A progress bar on standard error, drawn only when standard error is a terminal: it is for a person
    watching; piped or logged, standard error gets nothing but errors."""
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        file=sys.stderr,
        dynamic_ncols=True,
        disable=not sys.stderr.isatty(),
    )


def print_json(value: object) -> None:
    """``value`` as one line of JSON, non-ASCII text kept as it is."""
    print(json.dumps(value, ensure_ascii=False))


def write_exactly(text: str) -> None:
    """``text`` on standard output as UTF-8, byte for byte: no newline added or translated."""
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        buffer.write(text.encode("utf-8"))
        buffer.flush()
