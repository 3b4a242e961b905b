"""docs/quickstart.md runs as written, and the README's set-up commands are the ones that work.

The quick start's lines are run by bash, in a fresh folder, with the virtual environment this suite runs
in on ``PATH`` (what ``. .venv/bin/activate`` does): ``serve`` as a real process on its embedded database
in ``./uno-audit-data``, then bots, ``verify --all`` and ``replay`` on that same database. Only the address
is a free port instead of 50051, and the game id the one ``verify`` printed. The set-up line (pip) is not
run again — this suite runs in its result — but must be the README's, which must be the one CI's pip
follows.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal
import socket
import sys
import tomllib
from pathlib import Path

import pytest

from service.cli.main import build_parser
from tests import tiers
from tests.doc_commands import DOCS, README, ROOT, follows, steps

pytestmark = pytest.mark.timeout(240)

BIN = Path(sys.executable).parent
QUICKSTART = DOCS / "quickstart.md"
INSTALL = "python3 -m venv .venv && .venv/bin/pip install '.[dev]'"


def _quickstart() -> list[tuple[str, list[str]]]:
    """``(line, expected output)`` of each ``$`` line of the quick start, as written."""
    text = QUICKSTART.read_text(encoding="utf-8")
    block = text[text.index("```sh\n") + 6 :]
    block = block[: block.index("```\n")]
    lines = [line[2:] for line in block.splitlines() if line.startswith("$ ")]
    return [(line, expected) for line, (_, expected) in zip(lines, steps(block), strict=True)]


def _sh_blocks(path: Path) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.DOTALL)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_quick_start_is_short_and_starts_from_the_readmes_set_up() -> None:
    assert len(QUICKSTART.read_text(encoding="utf-8").splitlines()) <= 20
    lines = [line for line, _ in _quickstart()]
    assert lines[0] == INSTALL and lines[1] == ". .venv/bin/activate"
    assert lines[2].startswith("uno-audit serve ")
    assert len(lines[3:]) <= 3  # at most three commands after the set-up
    assert all(line.startswith("uno-audit ") for line in lines[2:])  # the installed command, activated


def test_the_readmes_set_up_commands_are_the_ones_that_work() -> None:
    """The install line, the service's and the tests' are in the README as the rest of the project has them:
    the dev extra exists and brings pytest, the ``uno-audit`` script is installed, ``serve`` takes the
    README's options, and CI runs the README's test command (its full tier)."""
    install, serve, tests = (block.strip() for block in _sh_blocks(README)[:3])
    assert install == INSTALL
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert any(dep.startswith("pytest") for dep in project["optional-dependencies"]["dev"])
    assert project["scripts"]["uno-audit"].startswith("service.cli")
    assert (BIN / "uno-audit").exists()

    token_line, serve_line = serve.splitlines()
    assert token_line.split("#")[0].strip() == 'export UNO_AUDIT_ADMIN_TOKEN="$(openssl rand -hex 32)"'
    words = shlex.split(serve_line)
    assert words[0] == ".venv/bin/uno-audit"
    args = build_parser().parse_args(words[1:])
    assert args.listen == "127.0.0.1:50051"

    assert tests == ".venv/bin/python -m pytest"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert '"$VENV/bin/python" -m pip install ".[dev]"' in ci
    assert '"$VENV/bin/python" -m pytest --full' in ci
    assert ".venv/bin/python -m pytest --full" in _sh_blocks(README)[3]


def _stop_embedded_postgres(data_dir: Path) -> None:
    """If the server could not stop its PostgreSQL (the test failed), stop it by its process id."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        os.kill(int((data_dir / "postmaster.pid").read_text().splitlines()[0]), signal.SIGTERM)


async def _bash(line: str, cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        "bash", "-c", line, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 150)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.mark.skipif(not (BIN / "uno-audit").exists(), reason="the uno-audit script is not installed here")
async def test_the_quick_start_plays_verifies_and_replays_a_game(embedded_dir: Path) -> None:
    tiers.full_only("the quick start end to end, on a fresh embedded server")
    address = f"127.0.0.1:{_free_port()}"
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL" and not k.startswith("UNO_AUDIT_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # what activating the environment does
    folder = embedded_dir  # a folder the embedded server may use, even as root (tests/postgres.py)
    (_, _), (_, _), (serve, _), *commands = _quickstart()
    assert serve.split("  #")[0].rstrip().endswith(" &")

    serve = serve.split("  #")[0].rstrip().replace("127.0.0.1:50051", address)
    code, pid, err = await _bash(f"{serve} echo $!", folder, env)
    assert code == 0, err
    try:
        game_id = ""
        for line, expected in commands:
            line = line.replace("127.0.0.1:50051", address).replace("7c9e…", game_id)
            code, out, err = await _bash(line, folder, env)
            assert code == 0, f"{line}\n{err}\nserve.log:\n{(folder / 'serve.log').read_text()[-3000:]}"
            printed = out.splitlines()
            assert follows(expected, printed) == [], f"{line} printed:\n{out}"
            if " verify --all" in line:  # the one game, in the table's first column
                (game_id,) = [row.split()[0] for row in printed[1:] if row.strip() and row[0] != " "][:1]
        assert game_id, "verify --all printed no game"
        page = (folder / "game.html").read_text(encoding="utf-8")
        assert "<html" in page.lower() and game_id in page
    finally:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid.strip()), signal.SIGTERM)
        for _ in range(150):  # serve stops its embedded PostgreSQL on the way out
            if not (folder / "uno-audit-data" / "postmaster.pid").exists():
                break
            await asyncio.sleep(0.2)
        _stop_embedded_postgres(folder / "uno-audit-data")
    assert (folder / "uno-audit-data").is_dir()  # the database verify and replay read: the server's
