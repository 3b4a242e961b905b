"""Nothing of the embedded database outlives the process that started it, and Ctrl-C is one line always.

A ``serve`` killed with SIGKILL: its watchdog stops the server it leaves (no other user), and the next
``serve`` adopts one left running and stops it on a clean stop. A first start killed during initdb:
initdb is killed and its folder removed. Ctrl-C while ``uno-audit`` imports: one line, exit 130."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from service.cli.exits import quiet_interrupt
from service.ops.embedded_users import creating_folders
from tests import tiers

pytestmark = pytest.mark.timeout(240)
UNO_AUDIT = Path(sys.executable).with_name("uno-audit")
needs_script = pytest.mark.skipif(not UNO_AUDIT.exists(), reason="the uno-audit script is not installed")
WAIT = 90.0  # seconds: a bound only
#: The console script's own line, the one place before uno-audit's code a Ctrl-C can land in.
_BEFORE_ENTRY = "from service.cli.entry import main\nKeyboardInterrupt\n"


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "UNO_AUDIT_ADMIN_TOKEN")}


def _processes_of(folder: Path) -> list[psutil.Process]:
    """initdb and postgres processes working on ``folder``."""
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            if process.info["name"] in ("initdb", "postgres") and (
                str(folder) in (process.info["cmdline"] or [])
                or process.environ().get("PGDATA") == str(folder)
            ):
                found.append(process)
    return found


def _until(condition: object, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not callable(condition) or not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _serve(data_dir: Path) -> subprocess.Popen[str]:
    serve = subprocess.Popen(
        [str(UNO_AUDIT), "serve", "--listen", "127.0.0.1:0", "--data-dir", str(data_dir), "--workers", "1"],
        env=_environment(), start_new_session=True, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert serve.stdout is not None
    for line in serve.stdout:
        if '"serving"' in line:
            return serve
    raise AssertionError("serve ended before it served")


def _kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@needs_script
def test_a_killed_serve_leaves_no_server_behind(embedded_dir: Path) -> None:
    tiers.full_only("a killed serve, then two embedded starts and stops")
    data_dir = (embedded_dir / "data").resolve()
    killed = _serve(data_dir)
    _kill_group(killed)  # SIGKILL: serve and its worker, no clean-up of theirs
    try:
        # Its watchdog stops the server it left (no one else uses it) ...
        _until(lambda: not _processes_of(data_dir), "the killed serve's PostgreSQL is still running")
        # ... and a server left running all the same (its watchdog killed too) is adopted, then stopped.
        second = _serve(data_dir)
        second.send_signal(signal.SIGTERM)
        assert second.wait(WAIT) == 0
        _until(lambda: not _processes_of(data_dir), "PostgreSQL outlived the clean stop")
        assert not (data_dir / "postmaster.pid").exists()
    finally:
        for process in _processes_of(data_dir):
            process.kill()


def test_a_stale_user_is_pruned_so_the_last_user_stops_the_server(embedded_dir: Path) -> None:
    """What a killed user (and a killed watchdog) leave: its id in the list, its server running."""
    from service.ops import embedded

    data_dir = (embedded_dir / "data").resolve()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _, server = embedded.embedded_database(data_dir, lambda _: None)
    try:
        (data_dir / ".handle_pids.json").write_text(f"[{dead.pid}, {os.getpid()}]")
        server.cleanup()  # leaves the server running: the dead user still listed
        assert _processes_of(data_dir)
        # Another process (this one's handle is cached by the library): prunes the id, adopts the server.
        code = (
            "import pathlib, service.ops.embedded as e\n"
            f"e.embedded_database(pathlib.Path({str(data_dir)!r}))[1].cleanup()"
        )
        subprocess.run([sys.executable, "-c", code], check=True, timeout=WAIT, capture_output=True)
        assert not _processes_of(data_dir), "the last live user did not stop the server"
    finally:
        for process in _processes_of(data_dir):
            process.kill()


def test_a_first_start_killed_during_initdb_leaves_nothing_running(embedded_dir: Path) -> None:
    tiers.full_only("a first start killed during initdb")
    data_dir = (embedded_dir / "data").resolve()
    code = f"import pathlib, service.ops.embedded as e; e.embedded_database(pathlib.Path({str(data_dir)!r}))"
    # Not its group: SIGKILL to the starting process alone, as `kill -9 PID` does; initdb is left.
    first = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        _until(lambda: any(_processes_of(folder) for folder in creating_folders(data_dir)), "no initdb")
    finally:
        first.kill()
        first.wait()
    _until(lambda: creating_folders(data_dir) == [], "the half-made folder was left")
    assert not _processes_of(data_dir) and not [
        p for f in creating_folders(data_dir) for p in _processes_of(f)
    ]


@needs_script
def test_ctrl_c_while_importing_is_one_line() -> None:
    """Ctrl-C at delays spanning Python's start, the imports and the command's start, 12 times."""
    delays = [0.05 * step for step in range(2, 14)]
    outcomes = []
    for delay in delays:
        process = subprocess.Popen(
            [str(UNO_AUDIT), "health", "--server", "127.0.0.1:9"], start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(delay)
        os.killpg(process.pid, signal.SIGINT)
        _, err = process.communicate(timeout=WAIT)
        # Still in the script's own import of service.cli.entry (module level, before its handler):
        # the window docs/cli.md names, like Python's start-up.
        in_entry_import = (
            err.endswith("KeyboardInterrupt\n") and "service/cli/entry.py" in err and ", in main\n" not in err
        )
        if (
            process.returncode == 0
            or "init_import_site" in err
            or err.endswith(_BEFORE_ENTRY)
            or in_entry_import
        ):
            # Done before the signal, or still in Python's start-up (its site module) or the installer's
            # script finding service.cli.entry, before any line of uno-audit ran (docs/cli.md).
            continue
        outcomes.append((delay, process.returncode, err))
        # Never a traceback, at most one line: "interrupted" (exit 130; before the command's name is
        # known, as "uno-audit: interrupted"), or the command's own answer when the signal came as it
        # ended, or nothing when the signal beat Python's handler.
        assert "Traceback" not in err and len(err.splitlines()) <= 1, (delay, err)
        if process.returncode == 130:
            assert err.splitlines() in (["uno-audit health: interrupted"], ["uno-audit: interrupted"]), err
    assert outcomes, "every run ended before its Ctrl-C"


def test_the_interrupt_path_silences_psycopg_only_then() -> None:
    for name in ("psycopg", "psycopg.pool"):
        assert logging.getLogger(name).isEnabledFor(logging.WARNING)
    try:
        quiet_interrupt()
        assert not logging.getLogger("psycopg").isEnabledFor(logging.CRITICAL)
        assert not logging.getLogger("psycopg.pool").isEnabledFor(logging.CRITICAL)
    finally:
        logging.getLogger("psycopg").setLevel(logging.NOTSET)
        logging.getLogger("psycopg_pool").setLevel(logging.NOTSET)


def test_asyncio_ctrl_c_silences_psycopg_before_cancelling() -> None:
    code = (
        "import asyncio, logging, os, signal\n"
        "from service.cli import entry\n"
        "entry._quiet_asyncio_interrupts()\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)  # as main() leaves it\n"
        "async def main():\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    try:\n"
        "        await asyncio.sleep(30)\n"
        "    finally:\n"
        "        print(logging.getLogger('psycopg').isEnabledFor(logging.WARNING))\n"
        "try:\n"
        "    asyncio.run(main())\n"
        "except KeyboardInterrupt:\n"
        "    pass\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=WAIT)
    assert done.stdout.strip() == "False", done.stderr
