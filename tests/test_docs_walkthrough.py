"""docs/arbiter.md's walk-through "Ruling on a disputed game" runs as written: its ``uno-audit`` commands,
in order, on the record it ships (``docs/examples/disputed.jsonl``), print what it shows — ``dispute
file`` with the seat token ``import`` printed, ``dispute list`` and ``dispute rule`` against a server on
the same database — and the report after it lists the dispute and the ruling. docs/grpc.md's Python
does the same over gRPC. Also: every ``verify --record`` the docs show, and every ``uno-audit`` command
line of the docs is one the command line takes.

The expected lines are read from the docs themselves (:mod:`tests.doc_commands`), so the two cannot
drift.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from service.api.config import ServeConfig
from service.api.server import start_server
from service.cli.main import build_parser, main
from tests.doc_commands import DOCS, README, ROOT, WRITTEN, follows, shell_block, steps, uno_audit_commands

if TYPE_CHECKING:  # the root conftest is not importable as a module of a package
    from tests.conftest import ServiceLogin

ARBITER = DOCS / "arbiter.md"
HEADING = "## Ruling on a disputed game"
ADMIN_TOKEN = "walkthrough-admin-token-0123456789"


GRPC = DOCS / "grpc.md"
GRPC_HEADING = "## A dispute over gRPC"
#: The doc's stand-ins for what differs from run to run: the game's id, ann's seat token, the dispute's id.
GAME, ANN_TOKEN, DISPUTE = "459951ef-…", "DxewbM0d…", "5126207e-…"


def python_block(path: Path, heading: str) -> str:
    text = path.read_text(encoding="utf-8")
    at = text.index("```python\n", text.index(heading)) + len("```python\n")
    return text[at : text.index("```\n", at)]


def section(path: Path, heading: str) -> str:
    text = path.read_text(encoding="utf-8")
    start = text.index(heading)
    return text[start : text.index("\n## ", start + len(heading))]


def command(words: list[str], values: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """A doc's ``$ `` line as the variables it sets for the command (``VAR=value uno-audit …``) and the
    command's arguments, the doc's stand-ins replaced by ``values``."""
    given = [values.get(word, word) for word in words]
    at = given.index("uno-audit")
    variables = dict(word.split("=", 1) for word in given[:at])
    return {name: values.get(value, value) for name, value in variables.items()}, given[at + 1 :]


def test_the_walkthrough_has_the_commands_it_describes() -> None:
    blocks = [
        [command(words, {})[1][:2] for words, _ in steps(shell_block(ARBITER, HEADING, n))] for n in range(3)
    ]
    assert [[words[0] for words in blocks[0]], blocks[1], [words[0] for words in blocks[2]]] == [
        ["import", "verify", "adjudicate"],
        [["dispute", "file"], ["dispute", "list"], ["dispute", "rule"]],
        ["verify"],
    ]
    assert (ROOT / "docs" / "examples" / "disputed.jsonl").is_file()
    # The walk-through works on the server's database, not on one of its own (a token from another
    # database is UNAUTHENTICATED at the server): no database made or named in it.
    block = shell_block(ARBITER, HEADING)
    assert "createdb" not in block and "DATABASE_URL" not in block and "--database-url" not in block
    # The arbiter works from the command line; the gRPC example is the guide's.
    assert "```python" not in section(ARBITER, HEADING)
    assert "FileDispute" in python_block(GRPC, GRPC_HEADING)


async def test_the_walkthrough_prints_what_the_docs_show(
    database_url: str,
    service_login: ServiceLogin,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The docs' commands find the server's database by its data folder; here, the server's database is
    # the test's, named to both the commands (DATABASE_URL, as the owner) and the server (its login).
    monkeypatch.chdir(ROOT)  # the docs' paths are the repository's
    monkeypatch.setenv("DATABASE_URL", database_url)
    values = await run_block(0, {}, capsys, monkeypatch)

    server = await start_server(
        ServeConfig(
            listen="127.0.0.1:0", database_url=await service_login.url(database_url), admin_token=ADMIN_TOKEN
        )
    )
    try:
        # As the walk-through has them: the server at its address, serve's admin token in the variable.
        monkeypatch.setenv("UNO_AUDIT_SERVER", f"127.0.0.1:{server.port}")
        monkeypatch.setenv("UNO_AUDIT_ADMIN_TOKEN", ADMIN_TOKEN)
        monkeypatch.delenv("UNO_AUDIT_SEAT_TOKEN", raising=False)
        values = await run_block(1, values, capsys, monkeypatch)
    finally:
        await server.stop(grace=2.0)
    assert DISPUTE in values

    await run_block(2, values, capsys, monkeypatch, exit_status=1)  # the game's own violations stay


async def run_block(
    nth: int,
    values: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    exit_status: int | None = None,
) -> dict[str, str]:
    """Run the ``nth`` shell block of the walk-through: each command prints its lines of the doc, in
    order. The stand-ins found on the way (the game's id, ann's token, the dispute's id) are added to
    ``values``, which is returned."""
    values = dict(values)
    for words, expected in steps(shell_block(ARBITER, HEADING, nth)):
        variables, args = command(words, values)
        with monkeypatch.context() as scoped:
            for name, value in variables.items():
                scoped.setenv(name, value)
            code = await asyncio.to_thread(main, args)
        printed = capsys.readouterr().out.splitlines()
        assert code in ((0, 1) if exit_status is None else (exit_status,)), (args, printed)
        if args[0] == "import":
            values[GAME] = printed[0].split(" as game ")[1].split(":")[0]
            values[ANN_TOKEN] = next(
                line.split(": ", 1)[1] for line in printed if line.startswith("  seat 0 ann: ")
            )
        if args[:2] == ["dispute", "file"]:
            assert code == 0, printed
            values[DISPUTE] = next(line for line in printed if line.startswith("dispute ")).split()[1]
        assert follows(expected, printed) == [], f"{' '.join(args)} printed:\n" + "\n".join(printed)
    return values


async def test_the_grpc_guides_dispute_runs_as_written(
    database_url: str,
    service_login: ServiceLogin,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/grpc.md's Python, on the record the walk-through imports, prints the line under it."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("DATABASE_URL", database_url)
    assert await asyncio.to_thread(main, ["import", "docs/examples/disputed.jsonl"]) == 0
    printed = capsys.readouterr().out.splitlines()
    game_id = printed[0].split(" as game ")[1].split(":")[0]
    ann_token = next(line.split(": ", 1)[1] for line in printed if line.startswith("  seat 0 ann: "))
    server = await start_server(
        ServeConfig(
            listen="127.0.0.1:0", database_url=await service_login.url(database_url), admin_token=ADMIN_TOKEN
        )
    )
    try:
        code = python_block(GRPC, GRPC_HEADING)
        expected = [line.removeprefix("# ") for line in code.splitlines() if line.startswith("# ")]
        code = code.replace(f'"{GAME}", "{ANN_TOKEN}"', f"{game_id!r}, {ann_token!r}")
        code = code.replace("127.0.0.1:50051", f"127.0.0.1:{server.port}")
        monkeypatch.setenv("UNO_AUDIT_ADMIN_TOKEN", ADMIN_TOKEN)
        out = io.StringIO()

        def run_snippet() -> None:
            with contextlib.redirect_stdout(out):
                exec(compile(code, str(GRPC), "exec"), {})  # the docs' own code, as a reader runs it

        await asyncio.to_thread(run_snippet)
        assert out.getvalue().splitlines() == expected
    finally:
        await server.stop(grace=2.0)


def test_the_offline_verification_prints_what_the_docs_show(capsys: pytest.CaptureFixture[str]) -> None:
    """Every ``uno-audit verify --record`` the README and docs show, on the record it names (shipped)."""
    shown = [
        found
        for path in WRITTEN
        for found in re.findall(
            r"\$ uno-audit verify --record (\S+)\n((?:[^$`].*\n)*)", path.read_text(encoding="utf-8")
        )
    ]
    assert shown, "the README shows an offline verification"
    for path, output in shown:
        assert (ROOT / path).is_file(), f"the docs verify {path}, which is not shipped"
        assert main(["verify", "--record", str(ROOT / path)]) in (0, 1)
        printed = capsys.readouterr().out.splitlines()
        assert follows(output.splitlines(), printed) == [], "\n".join(printed)


def test_the_comparison_can_fail() -> None:
    assert follows(["  verdict: penalty"], ["  verdict: no-penalty (window closed)"]) == [
        "  verdict: penalty"
    ]
    assert follows(["b", "a"], ["a", "b"]) == ["a"]
    assert follows(["game 459951ef-…: INVALID", "  …"], ["game 1234: INVALID"]) == []


@pytest.mark.parametrize("path", WRITTEN, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_command_the_docs_show_is_one_the_command_line_takes(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flag renamed or dropped shows up here, not in a reader's terminal."""
    monkeypatch.setenv("DATABASE_URL", "postgresql://uno@localhost/uno")
    parser = build_parser()
    for words in uno_audit_commands(path):
        args = [re.sub(r"\S*…", "x", word) for word in words]
        try:
            parser.parse_args(args)
        except SystemExit:
            pytest.fail(f"{path.name} shows `uno-audit {' '.join(words)}`, which the command line refuses")


def test_the_docs_show_every_command_they_describe() -> None:
    shown = {words[0] for path in WRITTEN for words in uno_audit_commands(path) if words}
    assert shown >= {"serve", "bots", "simulate", "migrate", "import", "replay", "verify", "keygen"}
    assert {words[0] for words in uno_audit_commands(README)} >= {"serve", "verify"}
