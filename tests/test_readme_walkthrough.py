"""The README's arbiter walk-through runs as written: its ``uno-audit`` commands, in order, on the record it
ships (``docs/examples/disputed.jsonl``), print what the README shows.

The expected lines are read from the README itself, so the two cannot drift: every line the README shows
under a command must appear in that command's output, in order (a word ending in ``…`` stands for a value
that differs from run to run — the game id, tokens, the chain's head — and a line of ``…`` alone for
lines left out).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from service.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def walkthrough() -> list[tuple[list[str], list[str]]]:
    """``(command words, expected lines)`` of each ``uno-audit`` command of the walk-through's first block."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Ruling on a disputed game") :]
    block = section[
        section.index("```sh\n") + len("```sh\n") : section.index("```\n", section.index("```sh\n") + 6)
    ]
    steps: list[tuple[list[str], list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            words = line[2:].split("#")[0].split()
            steps.append((words, []))
        elif steps:
            steps[-1][1].append(line)
    return [(words[1:], lines) for words, lines in steps if words[0] == "uno-audit"]


def pattern(line: str) -> re.Pattern[str]:
    """A README line as a pattern: a word ending in ``…`` (``459951ef-…``, ``DxewbM0d…``) is any value."""
    return re.compile(".*".join(re.escape(part) for part in re.sub(r"\S*…", "…", line).split("…")) + "$")


def follows(expected: list[str], printed: list[str]) -> list[str]:
    """The README lines that do not appear in ``printed`` in order (none: all do)."""
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


def test_the_walkthrough_has_the_commands_it_describes() -> None:
    commands = [words[0] for words, _ in walkthrough()]
    assert commands == ["migrate", "import", "verify", "adjudicate"]
    assert (ROOT / "docs" / "examples" / "disputed.jsonl").is_file()


async def test_the_walkthrough_prints_what_the_readme_shows(
    database_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # the README's paths are the repository's
    monkeypatch.setenv("DATABASE_URL", database_url)
    game_id = ""
    for words, expected in walkthrough():
        args = [game_id if word == "459951ef-…" else word for word in words]
        code = await asyncio.to_thread(main, args)
        printed = capsys.readouterr().out.splitlines()
        assert code in (0, 1), (args, printed)
        if words[0] == "import":
            game_id = printed[0].split(" as game ")[1].split(":")[0]
        assert follows(expected, printed) == [], f"{' '.join(args)} printed:\n" + "\n".join(printed)


def test_the_offline_verification_prints_what_the_readme_shows(capsys: pytest.CaptureFixture[str]) -> None:
    """Every ``uno-audit verify --record`` the README shows, on the record it names (shipped)."""
    text = README.read_text(encoding="utf-8")
    shown = re.findall(r"\$ uno-audit verify --record (\S+)\n((?:[^$`].*\n)*)", text)
    assert shown, "the README shows an offline verification"
    for path, output in shown:
        assert (ROOT / path).is_file(), f"the README verifies {path}, which is not shipped"
        assert main(["verify", "--record", str(ROOT / path)]) in (0, 1)
        printed = capsys.readouterr().out.splitlines()
        assert follows(output.splitlines(), printed) == [], "\n".join(printed)


def test_the_comparison_can_fail() -> None:
    assert follows(["  verdict: penalty"], ["  verdict: no-penalty (window closed)"]) == [
        "  verdict: penalty"
    ]
    assert follows(["b", "a"], ["a", "b"]) == ["a"]
    assert follows(["game 459951ef-…: INVALID", "  …"], ["game 1234: INVALID"]) == []


def readme_commands() -> list[list[str]]:
    """The words of every ``uno-audit`` command in the README's shell blocks (continuation lines joined,
    a ``$ ``, ``.venv/bin/`` or ``VAR=… `` before it and a ``# comment`` after it left off)."""
    text = README.read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            words = line.split("#")[0].split()
            while words and (words[0] == "$" or "=" in words[0]):
                words = words[1:]
            if words and words[0].endswith("uno-audit"):
                commands.append(words[1:])
    return commands


def test_every_command_the_readme_shows_is_one_the_command_line_takes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A flag renamed or dropped shows up here, not in a reader's terminal."""
    monkeypatch.setenv("DATABASE_URL", "postgresql://uno@localhost/uno")
    commands = readme_commands()
    assert {words[0] for words in commands} >= {"serve", "bots", "simulate", "migrate", "import", "replay"}
    parser = build_parser()
    for words in commands:
        args = [re.sub(r"\S*…", "x", word) for word in words]
        try:
            parser.parse_args(args)
        except SystemExit:
            pytest.fail(f"the README shows `uno-audit {' '.join(words)}`, which the command line refuses")
