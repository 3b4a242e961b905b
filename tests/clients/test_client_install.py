"""``uno-audit-client`` installs alone: into a fresh virtual environment, without the server's dependencies
(no psycopg, no ``service``), and plays a whole game against a real server from there.

Slow (a venv and an install): in the full tier only (``pytest --full``, tests/tiers.py).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import tiers
from tests.api.shared_server import shared_address, shared_server  # noqa: F401

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "python"
NAIVE = Path(__file__).with_name("naive.py")


def _run(venv_python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python args`` in the venv, from ``cwd`` (outside the repository: nothing of it on the path)."""
    return subprocess.run(
        [str(venv_python), *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


async def test_the_client_package_installs_alone_and_plays_a_game(address: str, tmp_path: Path) -> None:
    tiers.full_only("a fresh venv and an install")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # A copy of the package's folder, so that the build leaves nothing in the repository.
    source = shutil.copytree(
        CLIENT, tmp_path / "client", ignore=shutil.ignore_patterns("build", "*.egg-info")
    )
    installed = await asyncio.to_thread(
        _run, python, "-m", "pip", "install", "--quiet", str(source), cwd=tmp_path
    )
    assert installed.returncode == 0, installed.stderr

    # The server's dependencies and code are not there; the client's are.
    for module in ("psycopg", "service", "projections", "tenacity"):
        missing = _run(python, "-c", f"import {module}", cwd=tmp_path)
        assert missing.returncode != 0 and "ModuleNotFoundError" in missing.stderr, module
    found = _run(python, "-c", "import uno_audit_client, sys; print(uno_audit_client.__file__)", cwd=tmp_path)
    assert found.returncode == 0 and str(venv) in found.stdout, found.stderr
    typed = _run(
        python, "-c", "import importlib.resources as r; print(r.files('uno_audit_client'))", cwd=tmp_path
    )
    assert (Path(typed.stdout.strip()) / "py.typed").is_file()

    # A whole game from that venv: created, played, watched live, every receipt checked.
    script = shutil.copy(NAIVE, tmp_path / "naive.py")
    played = await asyncio.to_thread(_run, python, str(script), address, cwd=tmp_path)
    assert played.returncode == 0, played.stdout + played.stderr
    summary = json.loads(played.stdout.strip().splitlines()[-1])
    assert summary["awaiting"] == "game-over" and summary["winner"] >= 0
    assert summary["receipts"] == sum(summary["commands"].values()) + 1
    assert summary["receipts_checked"] and summary["watched"]
