"""The backup file ``uno-audit-backup/1``: the embedded database's pg_dump archive and the signing key, in
one file an organiser can copy, checked whole before anything is restored from it.

A magic line, a header (one JSON line: what the backup holds, each part's length), the archive, the key
file's bytes, and a last line with the SHA-256 of every byte before it: a file cut short, edited or of
another kind is refused. docs/OPERATIONS.md ("Backups") gives the reasons.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

FORMAT = "uno-audit-backup/1"
MAGIC = f"{FORMAT}\n".encode()
#: A header is a few hundred bytes; anything much longer after the magic line is not one.
MAX_HEADER = 64 * 1024
_DIGEST = "sha256 "
TRAILER_BYTES = len(_DIGEST) + 64 + 1
_CHUNK = 1 << 20
#: What a PostgreSQL custom-format archive (``pg_dump -Fc``) starts with.
PG_DUMP_MAGIC = b"PGDMP"


class BackupFileError(Exception):
    """A file that is not a backup of this kind, or cannot be read or written (exit 2)."""


class DamagedBackup(BackupFileError):
    """A backup cut short or changed since it was made: its sizes or its checksum do not match (exit 1)."""


@dataclass(frozen=True, slots=True)
class Header:
    """What a backup holds: when and by what it was made, the database's size in games and events and
    its migrations (in pg_dump's snapshot), the parts' lengths, and the signing key's public half."""

    created: str
    uno_audit: str
    postgres: str
    postgres_major: int
    games: int
    events: int
    migrations: dict[str, list[str]]
    dump_bytes: int
    key_bytes: int = 0
    key: str | None = None
    format: str = field(default=FORMAT)

    def to_line(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":")).encode() + b"\n"

    @classmethod
    def from_json(cls, given: Any) -> Header:
        """The header of a decoded JSON object; :class:`DamagedBackup` naming what is wrong with it."""
        if not isinstance(given, dict):
            raise DamagedBackup("its header is not a JSON object")
        wanted: dict[str, tuple[type, ...]] = {
            "created": (str,), "uno_audit": (str,), "postgres": (str,), "postgres_major": (int,),
            "games": (int,), "events": (int,), "migrations": (dict,), "dump_bytes": (int,),
            "key_bytes": (int,), "key": (str, type(None)), "format": (str,),
        }  # fmt: skip
        for name, kinds in wanted.items():
            value = given.get(name)
            if name not in given or not isinstance(value, kinds) or isinstance(value, bool):
                raise DamagedBackup(f"its header's {name!r} is missing or of the wrong type")
            if isinstance(value, int) and value < 0:
                raise DamagedBackup(f"its header's {name!r} is negative")
        migrations = given["migrations"]
        if not all(
            isinstance(names, list) and all(isinstance(name, str) for name in names)
            for names in migrations.values()
        ):
            raise DamagedBackup("its header's migrations are not lists of names")
        if given["format"] != FORMAT:
            raise DamagedBackup(f"its header says {given['format']!r}, its first line {FORMAT!r}")
        return cls(**{name: given[name] for name in wanted})


def write_backup(out: Path, header: Header, dump: Path, key: bytes, *, force: bool = False) -> int:
    """Write the backup of ``header``, the archive in ``dump`` and the ``key`` file's bytes to ``out``
    (mode 0600: it holds the signing key and every unfinished game's seed); its size in bytes.

    Written to a hidden file beside ``out`` first, then linked into place, so that ``out`` is whole or
    absent, and an existing ``out`` is kept unless ``force`` (:class:`FileExistsError`)."""
    partial = out.with_name(f".{out.name}.partial-{os.getpid()}")
    try:
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            digest = hashlib.sha256()

            def put(data: bytes) -> None:
                digest.update(data)
                file.write(data)

            put(MAGIC)
            put(header.to_line())
            with dump.open("rb") as archive:
                while chunk := archive.read(_CHUNK):
                    put(chunk)
            put(key)
            file.write(f"{_DIGEST}{digest.hexdigest()}\n".encode())
            file.flush()
            os.fsync(file.fileno())
        if force:
            os.replace(partial, out)
        else:
            os.link(partial, out)  # fails if ``out`` exists, where a rename would replace it
        return out.stat().st_size
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()


def read_backup(path: Path, dump_to: IO[bytes] | None = None) -> tuple[Header, bytes]:
    """Check the backup at ``path`` whole (its kind, its sizes, its checksum); its header and its key
    file's bytes (empty: it holds no key). The archive is copied to ``dump_to`` meanwhile, if given: use
    it only once this returned, since its checksum is known only at the end.

    :class:`BackupFileError` for a file that is not a backup (or cannot be opened), :class:`DamagedBackup`
    for one cut short or changed since it was made; the messages do not name the file, the caller does.
    ``OSError`` for a file that fails while read, or ``dump_to`` while written."""
    try:
        file = path.open("rb")
    except OSError as error:
        raise BackupFileError(f"cannot be read: {error.strerror or error}") from None
    with file:
        return _read(file, os.fstat(file.fileno()).st_size, dump_to)


def _read(file: IO[bytes], size: int, dump_to: IO[bytes] | None) -> tuple[Header, bytes]:
    start = file.read(len(MAGIC))
    if start != MAGIC:
        if start.startswith(PG_DUMP_MAGIC):
            raise BackupFileError(
                "it is a pg_dump archive, not a uno-audit backup: a database server's dump is restored "
                'with that server\'s pg_restore (docs/OPERATIONS.md, "Backups")'
            )
        if start and MAGIC.startswith(start):
            raise DamagedBackup(f"it is cut short: {size} bytes, not even its first line")
        if start.startswith(b"uno-audit-backup/"):
            raise BackupFileError(f"it is a backup of another format: this uno-audit reads {FORMAT}")
        raise BackupFileError(f"it is not a uno-audit backup (its first line is not {FORMAT})")
    line = file.readline(MAX_HEADER + 1)
    if not line.endswith(b"\n"):
        raise DamagedBackup("it is cut short in its header" if len(line) <= MAX_HEADER else "no header")
    try:
        header = Header.from_json(json.loads(line))
    except ValueError:
        raise DamagedBackup("its header is not JSON") from None
    expected = len(MAGIC) + len(line) + header.dump_bytes + header.key_bytes + TRAILER_BYTES
    if size < expected:
        raise DamagedBackup(f"it is cut short: {size:,} bytes of {expected:,}")
    if size > expected:
        raise DamagedBackup(f"it has {size - expected:,} bytes more than its header says")
    digest = hashlib.sha256(MAGIC + line)
    for chunk in _chunks(file, header.dump_bytes):
        digest.update(chunk)
        if dump_to is not None:
            dump_to.write(chunk)
    key = file.read(header.key_bytes)
    digest.update(key)
    if file.read() != f"{_DIGEST}{digest.hexdigest()}\n".encode():
        raise DamagedBackup("its checksum does not match: it was changed or damaged after it was made")
    return header, key


def _chunks(file: IO[bytes], count: int) -> Iterator[bytes]:
    """The next ``count`` bytes of ``file``, a chunk at a time (the size was checked: they are there)."""
    while count > 0:
        chunk = file.read(min(count, _CHUNK))
        if not chunk:
            raise DamagedBackup("it is cut short")  # shrunk while being read
        count -= len(chunk)
        yield chunk
