"""``uno-audit clients add|list|revoke``: the operator's keys for client applications.

A key is shown once, when it is made; the database keeps its SHA-256 (``service/store/clients.py``).
These commands run as the database's owner, like ``migrate`` (whose migrations they apply first).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from service.cli.database import database_url
from service.cli.exits import EXIT_OK, EXIT_USAGE
from service.cli.options import stored_games_database


def register(commands: Any) -> None:  # argparse's sub-parsers action: its type is private to typeshed
    """The ``clients`` command and its three actions."""
    clients = commands.add_parser("clients", help="issue, list and revoke client applications' keys")
    action = clients.add_subparsers(dest="action", required=True, metavar="{add,list,revoke}")
    add = action.add_parser("add", help="issue a key to a new client; the key is shown once")
    add.add_argument("name", help="the client's name: 1-64 of a-z 0-9 . _ -")
    listed = action.add_parser("list", help="every client: name, issued, revoked")
    revoke = action.add_parser("revoke", help="revoke a client's key (its games keep its name)")
    revoke.add_argument("name")
    for parser in (add, listed, revoke):
        stored_games_database(parser)
        parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """One action on the database (the owner's login); its exit status."""
    import psycopg

    from service.store.clients import ClientExists

    try:
        with database_url(args) as url:
            return asyncio.run(_run(args, url))
    except (ClientExists, ValueError) as refused:
        print(f"uno-audit clients {args.action}: {refused}", file=sys.stderr)
        return EXIT_USAGE
    except psycopg.Error as error:
        print(f"uno-audit clients {args.action}: {str(error).strip().splitlines()[0]}", file=sys.stderr)
        return EXIT_USAGE


async def _run(args: argparse.Namespace, url: str) -> int:
    import psycopg

    from service.api.access import new_client_key
    from service.domain.auth import token_hash
    from service.store.clients import add_client, list_clients, revoke_client
    from service.store.migrate import apply_migrations

    await apply_migrations(url)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        if args.action == "add":
            key = new_client_key()
            await add_client(conn, args.name, token_hash(key))
            shown = {"client": args.name, "key": key, "shown": "once: the server keeps only its SHA-256"}
            print(json.dumps(shown))
            return EXIT_OK
        if args.action == "revoke":
            if not await revoke_client(conn, args.name):
                print(f"uno-audit clients revoke: no client {args.name!r} with a live key", file=sys.stderr)
                return EXIT_USAGE
            print(json.dumps({"client": args.name, "revoked": True}))
            return EXIT_OK
        for row in await list_clients(conn):
            revoked = None if row.revoked_at is None else row.revoked_at.isoformat()
            print(json.dumps({"client": row.name, "issued": row.created_at.isoformat(), "revoked": revoked}))
        return EXIT_OK
