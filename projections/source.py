"""Reading the log for the projections: the store's gap-free reader, and events decoded once per payload.

:data:`READER` is a :class:`service.store.global_order.GlobalReader` with a select list of its own: the
payload as text, decoded once per distinct text by :class:`Decoder`, and the tournament of
``GameCreated``. ``tests/projections/test_projector.py`` checks it returns exactly what ``read_all``
does. docs/DESIGN.md ("Reading and writing the views") says why.
"""

from __future__ import annotations

import json
import re
import select
from collections.abc import Iterator, Sequence
from typing import Any, TypeAlias

import psycopg
import structlog
from psycopg import pq

from service.domain.catalogue import AUDIT_TYPES, GAME_TYPES, decode_event
from service.domain.codec import CodecError
from service.rules.events import Event
from service.store import Cursor
from service.store.global_order import Connection as Connection
from service.store.global_order import GlobalReader

_log = structlog.get_logger(__name__)

#: One event as the projections read it: xid (as text: only a batch's last one is ever converted),
#: position, game id, version, type, payload text and the tournament (``GameCreated`` only, else
#: ``None``). The recorded time is not read per event; the checkpoint looks up its last event's.
EventRow: TypeAlias = tuple[str, int, str, int, str, str, "str | None"]

#: An event of a game's stream as :func:`read_prefixes` returns it: game id, version, type, payload text
#: and the tournament (``GameCreated`` only).
PrefixRow: TypeAlias = tuple[str, int, str, str, "str | None"]

_TOURNAMENT = (
    "CASE WHEN e.type = 'GameCreated' THEN coalesce(e.metadata->>'tournament_id', "
    "(SELECT g.tournament_id FROM games g WHERE g.game_id = e.game_id)) END"
)
#: The columns of every read, in :data:`EventRow` order (the rebuild's COPY and the benchmark's raw read
#: ceiling select exactly these too).
COLUMNS = f"e.xid, e.position, e.game_id, e.version, e.type, e.payload::text, {_TOURNAMENT}"

READER = GlobalReader(COLUMNS)
"""The projections' reader of the gap-free order; its pages are lists of :data:`EventRow`."""

# The events of some games below a version each: re-folding games the projector has no view of.
READ_PREFIXES = (
    f"SELECT e.game_id, e.version, e.type, e.payload::text, {_TOURNAMENT} FROM events e "
    "JOIN unnest(%s::text[], %s::int[]) AS m(game_id, below) "
    "ON e.game_id = m.game_id AND e.version < m.below "
    "ORDER BY e.game_id, e.version"
)


async def connect(dsn: str) -> Connection:
    """A connection for projecting: autocommit (batches open their own transactions), JIT off.

    PostgreSQL's JIT compiler judges the bulk read by its cost estimate, which the per-row tournament
    lookup inflates, and then spends longer compiling than the read takes (a rebuild of 200,000 events
    read 2.5 times slower with it); none of the projections' statements gains from it.
    """
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    await conn.execute("SET jit = off")
    return conn


def copy_out(conn: psycopg.Connection[Any], statement: bytes) -> Iterator[memoryview]:
    """The rows of ``COPY (...) TO STDOUT`` (text format, newline included), one at a time.

    Straight through psycopg's libpq layer (:mod:`psycopg.pq`, ``PQgetCopyData``): per row that costs
    half the client time of ``Cursor.copy()``'s generator machinery, which matters when the rows come at
    half a million a second. Rows already received are taken without blocking; only when libpq has none
    does it wait for the socket, in ``select`` (which lets other threads run: a blocking
    ``PQgetCopyData`` would hold the GIL while the server works). ``conn`` must be idle; it is idle
    again when the iterator is exhausted. A server error raises :class:`psycopg.OperationalError`.
    """
    pgconn = conn.pgconn
    pgconn.send_query(statement)
    socket = [pgconn.socket]
    _wait_for_result(pgconn, socket)
    result = pgconn.get_result()
    if result is None or result.status != pq.ExecStatus.COPY_OUT:
        message = "" if result is None else (result.error_message or b"").decode(errors="replace")
        _drain(pgconn)
        raise psycopg.OperationalError(f"COPY did not start: {message}")
    get = pgconn.get_copy_data
    while True:
        size, data = get(1)
        if size > 0:
            yield data
        elif size == 0:  # nothing complete received yet
            select.select(socket, [], [])
            pgconn.consume_input()
        else:
            break
    problem = pgconn.error_message.decode(errors="replace") if size == -2 else ""
    problem = _drain(pgconn) or problem
    if problem:
        raise psycopg.OperationalError(f"COPY failed: {problem}")


def _wait_for_result(pgconn: pq.abc.PGconn, socket: list[int]) -> None:
    """Wait, in ``select`` (GIL released), until ``get_result`` would not block."""
    pgconn.consume_input()
    while pgconn.is_busy():
        select.select(socket, [], [])
        pgconn.consume_input()


def _drain(pgconn: pq.abc.PGconn) -> str:
    """Consume a query's remaining results; the first error message, if any."""
    problem = ""
    socket = [pgconn.socket]
    while True:
        _wait_for_result(pgconn, socket)
        result = pgconn.get_result()
        if result is None:
            break
        if result.status not in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.COPY_OUT) and not problem:
            problem = (result.error_message or b"").decode(errors="replace")
    return problem


class ProjectionError(Exception):
    """The log cannot be projected as it is (a payload that does not decode, a stream with a hole)."""


async def read_prefixes(conn: Connection, below: dict[str, int]) -> list[PrefixRow]:
    """``(game_id, version, type, payload, tournament)`` of each game's events with versions below
    ``below[game_id]``, by game and version: one query for all the games a batch has to re-fold."""
    if not below:
        return []
    games = list(below)
    cursor = await conn.execute(READ_PREFIXES, (games, [below[g] for g in games]))
    return await cursor.fetchall()


# --- decoding -------------------------------------------------------------------------------------------

_COPY_ESCAPES = {b"b": b"\b", b"f": b"\f", b"n": b"\n", b"r": b"\r", b"t": b"\t", b"v": b"\v"}
_COPY_ESCAPE = re.compile(rb"\\(.)")


def copy_unescape(field: bytes) -> bytes:
    """A field of ``COPY ... TO STDOUT`` text format as it was (backslash escapes undone)."""
    if b"\\" not in field:
        return field
    return _COPY_ESCAPE.sub(lambda m: _COPY_ESCAPES.get(m.group(1), m.group(1)), field)


MAX_CACHED_PAYLOAD = 256
"""Longer payloads are decoded every time: a deal's deck, a round's final hands or a reshuffled pile
never recur, and keeping them would only fill the cache (and memory) and push out the ones that do."""

MISSING: Any = object()
"""What ``Decoder.cache.get(key, MISSING)`` returns for a payload not decoded yet."""


class Decoder:
    """Events decoded from ``(type, payload text)``, each distinct text decoded once.

    Decoding is a pure function of the type and the payload, and events are immutable, so one decoded
    object can stand for every occurrence. The cache is bounded: payloads longer than
    :data:`MAX_CACHED_PAYLOAD` are not kept, and when it holds ``max_size`` entries it starts over
    (simpler and cheaper per lookup than an LRU; the recurring payloads come back at once). Keys may
    be ``str`` (a query's text) or ``bytes`` (a COPY stream's raw field, unescaped only on a miss). An
    event type this build does not know decodes to ``None`` (logged once per type), and so do the audit
    trail's entries (quietly); a known type whose payload does not fit raises :class:`ProjectionError`.
    """

    def __init__(self, max_size: int = 200_000) -> None:
        self.max_size = max_size
        #: ``(type, payload) → event``; a hot loop may look up here first (with :data:`MISSING` as the
        #: default) and call the decoder only on a miss.
        self.cache: dict[tuple[str | bytes, str | bytes], Event | None] = {}
        self._unknown: set[str] = set()

    def __call__(self, kind: str | bytes, payload: str | bytes) -> Event | None:
        key = (kind, payload)
        event = self.cache.get(key, MISSING)
        if event is not MISSING:
            return event  # type: ignore[no-any-return]
        event = self._decode(kind, payload)
        if len(payload) <= MAX_CACHED_PAYLOAD:
            if len(self.cache) >= self.max_size:
                self.cache.clear()
            self.cache[key] = event
        return event

    def _decode(self, kind: str | bytes, payload: str | bytes) -> Event | None:
        name = kind.decode() if isinstance(kind, bytes) else kind
        if name not in GAME_TYPES:
            if name in AUDIT_TYPES:
                return None  # disputes, rulings and imported records are the log's, not a game's
            if name not in self._unknown:
                self._unknown.add(name)
                _log.warning("projections.unknown_event_type", type=name)
            return None
        text = copy_unescape(payload) if isinstance(payload, bytes) else payload
        try:
            return decode_event(name, json.loads(text))
        except (CodecError, ValueError) as error:
            raise ProjectionError(f"a {name} event does not decode: {error}") from None


def last_cursor(rows: Sequence[EventRow]) -> Cursor:
    """The cursor just after the last of ``rows``."""
    row = rows[-1]
    return Cursor(int(row[0]), row[1])
