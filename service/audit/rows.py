"""A game's stream read once for the verifier: each payload parsed once, with the bytes its hash covers.

The rows come as JSON text (:meth:`~service.store.streams.PostgresStreams.read_stream_text`) and
:func:`service.store.canonical.load_canonical` makes both forms of each payload at once, the value and
the canonical bytes, exactly as the standard library would. docs/DESIGN.md ("A stored game, read and
checked") says why.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from service.rules.events import Event
from service.store import EventStore, StoredEvent
from service.store.canonical import load_canonical

#: The most payloads (and events) a :class:`StreamCache` keeps; past it, it starts again empty.
CACHE_LIMIT = 50_000


class StreamCache:
    """Payloads parsed and events decoded, kept from one stream to the next while games are read together
    (:meth:`Auditor.verify_many <service.app.auditor.Auditor.verify_many>`). Games repeat their events,
    within a game and from one game to the next (the same prompts, the same cards drawn and played): a
    payload text met again is not parsed again (``payloads``: by type and text, the parsed payload and its
    canonical bytes), nor its event decoded again (``events``: by canonical bytes, which say exactly what
    the type and payload are). Nothing that reads a log changes a payload, and the catalogue's events are
    frozen, so games may share them. At most :data:`CACHE_LIMIT` of each are kept."""

    def __init__(self, limit: int = CACHE_LIMIT) -> None:
        self.limit = limit
        self.payloads: dict[tuple[str, str], tuple[Any, bytes]] = {}
        self.events: dict[bytes, Event] = {}

    def trim(self) -> None:
        """Start again empty when either holds more than the limit."""
        if len(self.payloads) > self.limit or len(self.events) > self.limit:
            self.payloads.clear()
            self.events.clear()


@dataclass(frozen=True, slots=True)
class StreamRows:
    """A game's stored events in version order, and the canonical bytes of each (``canonical[i]`` is
    :func:`service.store.canonical.canonical` of ``rows[i]``)."""

    rows: list[StoredEvent]
    canonical: list[bytes]


async def read_rows(store: EventStore, game_id: str, cache: StreamCache | None = None) -> StreamRows:
    """The game's whole stream, each payload parsed once (empty for an unknown game); ``cache``: the
    payloads parsed already, of the streams read before."""
    return parse_rows(await store.read_stream_text(game_id), cache)


def parse_rows(raw: Iterable[tuple[Any, ...]], cache: StreamCache | None = None) -> StreamRows:
    """Rows of :meth:`~service.store.streams.PostgresStreams.read_stream_text` as :class:`StreamRows`
    (``cache``: payloads parsed already, which this stream's join)."""
    rows: list[StoredEvent] = []
    canonical: list[bytes] = []
    # Games repeat their events (the same prompt, the same card drawn again): rows of the same type and
    # payload text share one parsed payload and its bytes, as the log's rows then share one decoded
    # event. Nothing that reads a log changes a payload.
    if cache is not None:
        cache.trim()
    parsed = {} if cache is None else cache.payloads
    # A command's events share their metadata (its command id): read once, each row its own copy.
    flat: dict[str, dict[str, str]] = {}
    add_row, add_canonical = rows.append, canonical.append
    for row in raw:
        position, game_id, version, kind, text, meta, recorded_at, xid, prev, digest, hash_version = row
        found = parsed.get((kind, text))
        if found is None:
            found = parsed[kind, text] = load_canonical(kind, text)
        known = flat.get(meta)
        metadata = dict(known) if known is not None else _metadata(meta, flat)
        event = _new(StoredEvent)
        _position(event, position)
        _game_id(event, game_id)
        _version(event, version)
        _type(event, kind)
        _payload(event, found[0])
        _metadata_of(event, metadata)
        _recorded_at(event, recorded_at)
        _xid(event, xid)
        _prev_hash(event, bytes(prev))
        _hash(event, bytes(digest))
        _hash_version(event, hash_version)
        add_row(event)
        add_canonical(found[1])
    return StreamRows(rows, canonical)


# A row is made as StoredEvent(...) makes it, field by field, without its __init__: a frozen dataclass's
# sets each field through object.__setattr__, a microsecond a row, 3 % of verifying a stored event on
# the compiled engine (bench/verify.py). Its fields, in the order of the stream's columns:
_new = object.__new__
(
    _position,
    _game_id,
    _version,
    _type,
    _payload,
    _metadata_of,
    _recorded_at,
    _xid,
    _prev_hash,
    _hash,
    _hash_version,
) = (getattr(StoredEvent, f.name).__set__ for f in dataclasses.fields(StoredEvent))
assert not hasattr(StoredEvent, "__post_init__"), "parse_rows skips StoredEvent.__init__"


def _metadata(text: str, flat: dict[str, dict[str, str]]) -> Any:
    """A row's metadata as ``json.loads`` reads it. The service writes an object of strings (command,
    command id, actor), which orjson reads alike, and which is kept in ``flat`` under its text; anything
    else (an edited row: a number, which orjson may read as another type) is read by the standard
    library."""
    try:
        value = orjson.loads(text)
    except ValueError:  # nested deeper than orjson reads
        return json.loads(text)
    if isinstance(value, dict) and all(type(item) is str for item in value.values()):
        flat[text] = value
        return dict(value)
    return json.loads(text)
