"""Reading the commands the docs show, so that tests run them as written: a walk-through's ``$ command``
lines with the output under each, the expected lines matched in order (a word ending in ``…`` stands
for a value that differs from run to run — a game id, a token, a chain's head — and a line of ``…``
alone for lines left out), and every ``uno-audit`` command line of the docs' shell blocks. A command's
words are the shell's (``shlex``): a quoted argument is one word.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: The docs whose every ``uno-audit`` command line must be one the command line takes.
WRITTEN = (
    README,
    DOCS / "quickstart.md",
    DOCS / "cli.md",
    DOCS / "OPERATIONS.md",
    DOCS / "grpc.md",
    DOCS / "arbiter.md",
    DOCS / "rules-engine.md",
    DOCS / "read-models.md",
    DOCS / "versioning.md",
    ROOT / "bench" / "README.md",
)

Step = tuple[list[str], list[str]]


def shell_block(path: Path, heading: str, nth: int = 0) -> str:
    """The text of the ``nth`` shell block after ``heading`` in ``path``."""
    text = path.read_text(encoding="utf-8")
    at = text.index(heading)
    for _ in range(nth + 1):
        at = text.index("```sh\n", at) + len("```sh\n")
    return text[at : text.index("```\n", at)]


def steps(block: str) -> list[Step]:
    """``(words, expected lines)`` of each ``$ `` line of a block; a ``# comment`` is left off."""
    found: list[Step] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            found.append((shlex.split(line[2:].split("  #")[0]), []))
        elif found:
            found[-1][1].append(line)
    return found


def pattern(line: str) -> re.Pattern[str]:
    """A doc's line as a pattern: a word ending in ``…`` (``459951ef-…``, ``DxewbM0d…``) is any value."""
    return re.compile(".*".join(re.escape(part) for part in re.sub(r"\S*…", "…", line).split("…")) + "$")


def follows(expected: list[str], printed: list[str]) -> list[str]:
    """The doc's lines that do not appear in ``printed`` in order (none: all do)."""
    missing, at = [], 0
    for line in expected:
        if line.strip() == "…":
            continue
        wanted = pattern(line)
        found = next((i for i in range(at, len(printed)) if wanted.match(printed[i])), None)
        if found is None:
            missing.append(line)
        else:
            at = found + 1
    return missing


def uno_audit_commands(path: Path) -> list[list[str]]:
    """The words of every ``uno-audit`` command in ``path``'s shell blocks (continuation lines joined,
    a ``$ ``, ``.venv/bin/`` or ``VAR=… `` before it and a ``# comment`` or redirection after it left
    off)."""
    text = path.read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            if "uno-audit" not in line:
                continue  # output, or another command: its quotes need not be the shell's
            words = shlex.split(line, comments=True)
            while words and (words[0] == "$" or "=" in words[0]):
                words = words[1:]
            if words and words[0].endswith("uno-audit"):
                words = words[1 : next((i for i, w in enumerate(words) if w[0] in "&>|"), len(words))]
                commands.append(words)
    return commands
