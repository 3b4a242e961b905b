"""``uno-audit backup`` and ``uno-audit restore``: the embedded database and its signing key, in one file.

``backup`` runs the embedded server's own pg_dump (its major version) in one snapshot, while ``serve``
runs or not. ``restore`` checks the file whole, restores it into a new database beside the current one,
migrates that, and swaps the two; it refuses while another process uses the folder. A server's database
is refused: docs/OPERATIONS.md ("Backups") says how to back one up, and why the key is in the file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from service.cli.admin import migrate_database
from service.cli.checkpoints import SERVE_KEY_FILE
from service.cli.exits import EXIT_INVALID, EXIT_OK, Refused, one_line
from service.cli.options import installed_version, stored_games_database
from service.ops.backup import FORMAT, BackupFileError, DamagedBackup, Header, read_backup, write_backup

if TYPE_CHECKING:
    import psycopg

    from service.checkpoints import Signer

#: The databases a restore makes beside the embedded one (then renamed), and the one it replaces (then
#: dropped); followed by the process id. A restore that was killed leaves them: the next one drops them.
RESTORING, REPLACED = "uno_audit_restoring_", "uno_audit_replaced_"
#: The database a restore connects to while it makes, renames and drops the others: never the service's,
#: since PostgreSQL renames no database anyone is connected to.
MAINTENANCE = "template1"
DOCS = 'docs/OPERATIONS.md, "Backups"'


def register(commands: Any) -> None:
    """The ``backup`` and ``restore`` commands."""
    backup = commands.add_parser(
        "backup", help="the embedded database and its signing key, into one file (while serve runs or not)"
    )
    backup.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="FILE",
        help="the backup file (mode 0600: it is as secret as the signing key it holds)",
    )
    backup.add_argument("--force", action="store_true", help="replace FILE if it exists")
    stored_games_database(backup)
    backup.set_defaults(run=backup_command)
    restore = commands.add_parser(
        "restore", help="replace the embedded database and its signing key with a backup's (serve stopped)"
    )
    restore.add_argument("file", type=Path, metavar="FILE", help="a file `uno-audit backup` made")
    restore.add_argument(
        "--check", action="store_true", help="only check FILE whole and print what it holds; restore nothing"
    )
    stored_games_database(restore)
    restore.set_defaults(run=restore_command)


# --- backup ---------------------------------------------------------------------------------------------


def backup_command(args: argparse.Namespace) -> int:
    """Write the backup; print what it holds as one JSON object."""
    import psycopg

    from service.ops.embedded import embedded_database, server_tool

    _embedded_only(args)
    data_dir, out = args.data_dir, args.out
    if not (data_dir / "PG_VERSION").is_file():
        raise Refused(f"no database in {data_dir}: nothing to back up (`uno-audit serve` keeps one there)")
    if out.is_dir():
        raise Refused(f"{out} is a folder: give the backup file's name")
    if out.exists() and not args.force:
        raise Refused(f"{out} exists (--force replaces it)")
    if not out.parent.is_dir():
        raise Refused(f"no folder {out.parent} to write {out.name} in")
    key, verifier = _kept_key(data_dir)
    started = time.monotonic()
    try:
        url, server = embedded_database(data_dir)  # joins a running serve's server, or starts it
        try:
            # The archive waits beside the backup file (the same file system), in a folder only its
            # owner reads: it holds every unfinished game's seed.
            with tempfile.TemporaryDirectory(prefix=f".{out.name}.dump-", dir=out.parent) as work:
                dump = Path(work) / "database.dump"
                header = _dump(url, server_tool(server, "pg_dump"), dump, key, verifier)
                size = write_backup(out, header, dump, key, force=args.force)
        finally:
            server.cleanup()  # stops the server only if no other process (a serve) uses it
    except FileExistsError:
        raise Refused(f"{out} exists (--force replaces it)") from None
    except psycopg.Error as error:
        raise Refused(f"database: {one_line(error)}") from None
    except OSError as error:
        raise Refused(f"cannot write {out}: {error.strerror or one_line(error)}") from None
    if verifier is None:
        print(
            f"uno-audit backup: {data_dir / SERVE_KEY_FILE} does not exist: the backup holds no signing key "
            "(keep the key serve signs with apart)",
            file=sys.stderr,
        )
    done = {"backup": str(out), "bytes": size, "games": header.games, "events": header.events}
    print(json.dumps({**done, "key": verifier, "seconds": round(time.monotonic() - started, 2)}))
    return EXIT_OK


def _kept_key(data_dir: Path) -> tuple[bytes, str | None]:
    """The bytes of the key file ``serve`` keeps in ``data_dir`` and its public verifier key, or
    ``(b"", None)`` when there is none; :class:`Refused` for a file that holds no key."""
    from service.checkpoints import KeyFormatError, load_signer

    path = data_dir / SERVE_KEY_FILE
    if not path.exists():
        return b"", None
    try:
        return path.read_bytes(), load_signer(path).verifier.encode()
    except (OSError, KeyFormatError) as error:
        raise Refused(f"the signing key: {error}") from None


def _dump(url: str, pg_dump: Path, dump: Path, key: bytes, verifier: str | None) -> Header:
    """pg_dump the database at ``url`` into ``dump``; the backup's header, its counts and migrations read
    in the very snapshot pg_dump takes (exported by a transaction held open until it is done)."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    url = make_conninfo(url, application_name="uno-audit backup")
    with psycopg.connect(url) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        snapshot = _scalar(conn, "SELECT pg_export_snapshot()")
        if _scalar(conn, "SELECT to_regclass('schema_migrations') IS NULL"):
            raise Refused("the embedded database holds no uno-audit store (never served): nothing to back up")
        migrations = {"store": _names(conn, "schema_migrations"), "projections": []}
        if not _scalar(conn, "SELECT to_regclass('projection_migrations') IS NULL"):
            migrations["projections"] = _names(conn, "projection_migrations")
        header = Header(
            created=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            uno_audit=installed_version(),
            postgres=str(_scalar(conn, "SHOW server_version")).split()[0],
            postgres_major=conn.info.server_version // 10000,
            games=int(_scalar(conn, "SELECT count(*) FROM games")),
            events=int(_scalar(conn, "SELECT count(*) FROM events")),
            migrations=migrations,
            dump_bytes=0,
            key_bytes=len(key),
            key=verifier,
        )
        # --lock-wait-timeout: a rebuild swapping read models in holds them exclusively for a moment; a
        # longer wait is refused rather than hung on.
        _run(pg_dump, "--format=custom", f"--snapshot={snapshot}", "--lock-wait-timeout=60s",
             "--no-password", f"--file={dump}", f"--dbname={url}")  # fmt: skip
    return dataclasses.replace(header, dump_bytes=dump.stat().st_size)


def _scalar(conn: psycopg.Connection[Any], query: str) -> Any:
    row = conn.execute(query.encode()).fetchone()
    assert row is not None  # every query here returns one row
    return row[0]


def _names(conn: psycopg.Connection[Any], table: str) -> list[str]:
    return [name for (name,) in conn.execute(f"SELECT name FROM {table} ORDER BY name".encode())]


# --- restore --------------------------------------------------------------------------------------------


def restore_command(args: argparse.Namespace) -> int:
    """Check the file; with ``--check`` print what it holds, else restore it and print what was done."""
    import psycopg

    from service.store import StoreError

    if args.check:  # reads the file alone: no database, whichever is named
        header, _ = _checked(args.file, None)
        shown = {"backup": str(args.file), "format": FORMAT, "bytes": args.file.stat().st_size}
        print(json.dumps({**shown, **_held(header), "migrations": header.migrations, "key": header.key}))
        return EXIT_OK
    _embedded_only(args)
    data_dir: Path = args.data_dir
    _refuse_users(data_dir)
    started = time.monotonic()
    parent = data_dir.resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        # The archive waits beside the data folder (the same file system, room like the database's),
        # in a folder only its owner reads (mkdtemp's 0700): it holds every unfinished game's seed.
        work = Path(tempfile.mkdtemp(prefix=f".{data_dir.resolve().name}.restore-", dir=parent))
    except OSError as error:
        raise Refused(f"cannot make a folder in {parent}: {error.strerror or one_line(error)}") from None
    try:
        dump = work / "database.dump"
        with dump.open("wb") as file:
            header, key = _checked(args.file, file)
        _compatible(args.file, header)
        signer = _backup_signer(args.file, key)
        applied = _restore_database(data_dir, dump, header)
        replaced = None if signer is None else _put_key(data_dir, signer)
    except (psycopg.Error, StoreError) as error:
        raise Refused(f"database: {one_line(error)}") from None
    except OSError as error:
        raise Refused(one_line(error)) from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    done = {"restored": str(args.file), "data_dir": str(data_dir)}
    print(
        json.dumps(
            {
                **done,
                **_held(header),
                "migrations_applied": applied,
                "key": header.key,
                "key_replaced": replaced,
                "seconds": round(time.monotonic() - started, 2),
            }
        )
    )
    return EXIT_OK


def _held(header: Header) -> dict[str, Any]:
    return {"created": header.created, "uno_audit": header.uno_audit, "postgres": header.postgres,
            "games": header.games, "events": header.events}  # fmt: skip


def _checked(path: Path, dump_to: IO[bytes] | None) -> tuple[Header, bytes]:
    """The backup's header and key, the file checked whole; :class:`Refused` naming what is wrong: exit 1
    for a backup cut short or changed, 2 for a file that is none."""
    try:
        return read_backup(path, dump_to)
    except DamagedBackup as damaged:
        raise Refused(f"{path}: a damaged backup: {damaged}", EXIT_INVALID) from None
    except BackupFileError as error:
        raise Refused(f"{path}: {error}") from None


def _compatible(path: Path, header: Header) -> None:
    """Refuse a backup whose database this uno-audit could not run: migrations it does not know (a newer
    release's: older ones are applied after the restore)."""
    from projections.migrate import migrations as projection_migrations
    from service.store.migrate import migrations as store_migrations

    known = {
        "store": {migration.name for migration in store_migrations()},
        "projections": {migration.name for migration in projection_migrations()},
    }
    unknown = [
        name
        for ledger, names in header.migrations.items()
        for name in names
        if name not in known.get(ledger, ())
    ]
    if unknown:
        raise Refused(
            f"{path} was made by a newer uno-audit ({header.uno_audit}), whose migrations this one does "
            f"not know ({', '.join(unknown)}): install that release or a later one, then restore"
        )


def _backup_signer(path: Path, key: bytes) -> Signer | None:
    """The backup's signing key, or ``None`` when it holds none; :class:`Refused` if it is no key (a
    backup with a right checksum whose key is not one was not made by ``backup``)."""
    from service.checkpoints import KeyFormatError, Signer

    if not key:
        return None
    try:
        return Signer.parse(key.decode("utf-8"))
    except (UnicodeDecodeError, KeyFormatError):
        raise Refused(f"{path}: its signing key is not a key") from None


def _refuse_users(data_dir: Path, *, locked: bool = False) -> None:
    """:class:`Refused` while another process (a ``serve``) uses the embedded server of ``data_dir``;
    ``locked``: the caller holds the library's lock already (it is not reentrant)."""
    from service.ops.embedded import describe_process, other_users
    from service.ops.embedded_users import library_lock

    with contextlib.nullcontext() if locked else library_lock():
        users = other_users(data_dir)
    if users:
        raise Refused(
            f"{data_dir} is in use by {describe_process(users[0])}: stop `uno-audit serve` (and any other "
            "command on that folder), then restore"
        )


def _restore_database(data_dir: Path, dump: Path, header: Header) -> list[str]:
    """Restore ``dump`` into a new database of ``data_dir``'s embedded server (made first if there is none),
    migrate it, then swap it for the service's database; the migrations applied to it.

    The service's database is never half restored: pg_restore runs in one transaction into the new
    database, and the two are renamed in another (:func:`_swap`). A failure or Ctrl-C before that drops
    the new database; after it, the old one is dropped (or left for the next restore to drop)."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from service.ops.embedded import embedded_database, major_version, server_tool

    here = major_version(data_dir)
    if header.postgres_major > here:
        raise Refused(
            f"the backup is of PostgreSQL {header.postgres_major}, the embedded server here is {here}: "
            f"restore it with a uno-audit whose embedded server is {header.postgres_major} or later"
        )
    url, server = embedded_database(data_dir)
    try:
        _refuse_users(data_dir)  # again: one may have started meanwhile (two restores at once refuse both)
        target = str(conninfo_to_dict(url).get("dbname") or "postgres")
        fresh, old = f"{RESTORING}{os.getpid()}", f"{REPLACED}{os.getpid()}"
        owner = make_conninfo(url, dbname=MAINTENANCE, application_name="uno-audit restore")
        restoring = make_conninfo(url, dbname=fresh, application_name="uno-audit restore")
        with psycopg.connect(owner, autocommit=True) as conn:
            _drop_leftovers(conn)
            _make_roles(conn)
            conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(fresh)))
        try:
            _run(server_tool(server, "pg_restore"), "--exit-on-error", "--single-transaction",
                 "--no-password", f"--dbname={restoring}", str(dump))  # fmt: skip
            applied = asyncio.run(migrate_database(restoring, None))  # an older backup brought up to date
            _swap(data_dir, owner, target, fresh, old)
        except BaseException:
            with contextlib.suppress(psycopg.Error), psycopg.connect(owner, autocommit=True) as conn:
                conn.execute(_drop(fresh, force=True))
            raise
        with psycopg.connect(owner, autocommit=True) as conn:
            conn.execute(_drop(old))
        return applied
    finally:
        server.cleanup()  # stops the server: no other process uses it


def _swap(data_dir: Path, owner: str, target: str, fresh: str, old: str) -> None:
    """Rename ``target`` (the service's database) to ``old`` and ``fresh`` to ``target``, in one
    transaction, under the lock every process takes to join the embedded server, and only while no other
    process uses it; PostgreSQL itself refuses to rename a database anyone is connected to."""
    import psycopg
    from psycopg import sql

    from service.ops.embedded_users import library_lock

    rename = sql.SQL("ALTER DATABASE {} RENAME TO {}")
    with library_lock(), psycopg.connect(owner, autocommit=True) as conn:
        _refuse_users(data_dir, locked=True)
        with conn.transaction():
            if _exists(conn, target):
                conn.execute(rename.format(sql.Identifier(target), sql.Identifier(old)))
            conn.execute(rename.format(sql.Identifier(fresh), sql.Identifier(target)))


def _drop(database: str, *, force: bool = False) -> Any:
    from psycopg import sql

    drop = "DROP DATABASE IF EXISTS {} WITH (FORCE)" if force else "DROP DATABASE IF EXISTS {}"
    return sql.SQL(drop).format(sql.Identifier(database))


def _exists(conn: psycopg.Connection[Any], database: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone() is not None


def _drop_leftovers(conn: psycopg.Connection[Any]) -> None:
    """Drop what a restore that was killed left: a half-restored database, or the one it replaced."""
    rows = conn.execute(
        "SELECT datname FROM pg_database WHERE starts_with(datname, %s) OR starts_with(datname, %s)",
        (RESTORING, REPLACED),
    ).fetchall()
    for (name,) in rows:
        conn.execute(_drop(name, force=True))


def _make_roles(conn: psycopg.Connection[Any]) -> None:
    """Make the service's two NOLOGIN roles if missing (a new data folder): the archive grants them their
    privileges, and roles belong to the server, not to the database a dump holds. ``migrate`` then makes
    the login, a member of both."""
    from psycopg import sql

    from service.store.migrate import APP_ROLE, PROJECTOR_ROLE

    for role in (APP_ROLE, PROJECTOR_ROLE):
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is None:
            conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role)))


def _put_key(data_dir: Path, signer: Signer) -> str | None:
    """Make the backup's key the one ``serve`` signs with in ``data_dir``; the name a different key found
    there was moved to (never deleted: receipts it signed need its public half), or ``None``."""
    from service.checkpoints import KeyFormatError, load_signer, write_signer

    path = data_dir / SERVE_KEY_FILE
    if path.exists():
        with contextlib.suppress(KeyFormatError):
            if load_signer(path).verifier == signer.verifier:
                return None
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
        aside = path.with_name(f"{SERVE_KEY_FILE}.replaced-{stamp}")
        os.link(path, aside)  # never over another: two restores in one second refuse the second
        write_signer(signer, path, force=True)
        return str(aside)
    write_signer(signer, path)
    return None


# --- both ----------------------------------------------------------------------------------------------


def _embedded_only(args: argparse.Namespace) -> None:
    """Refuse a database server's URL; send what the embedded module logs (as root: the folders it opens)
    to standard error, so that standard output is the command's one JSON object."""
    import structlog

    structlog.configure(logger_factory=lambda *_: structlog.PrintLogger(sys.stderr))
    if args.database_url is not None:
        raise Refused(
            "--database-url (or $DATABASE_URL) names a database server: backup and restore are for the "
            "embedded database of --data-dir; back a server up with its own pg_dump or pg_basebackup, "
            f"and its signing key apart ({DOCS})"
        )


def _run(program: Path, *arguments: str) -> None:
    """Run one of the embedded server's programs; :class:`Refused` with its first error line if it fails.

    Without the ``PG…`` variables of the caller's shell (a ``PGDATABASE`` or ``PGOPTIONS`` meant for
    another server), but for the connection timeout: the URL given says where to connect."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("PG") or name == "PGCONNECT_TIMEOUT"
    }
    done = subprocess.run(
        [str(program), *arguments],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=environment,
        check=False,
    )
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").splitlines()
        said = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "")
        raise Refused(f"{program.name} failed (status {done.returncode}): {' '.join(said.split())[:400]}")
