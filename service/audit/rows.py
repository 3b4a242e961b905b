"""A game's stream read once for the verifier: each payload parsed once, with the bytes its hash covers.

The rows come as JSON text (:meth:`~service.store.streams.PostgresStreams.read_stream_text`) and
:func:`service.store.canonical.load_canonical` makes both forms of each payload at once, the value and
the canonical bytes, exactly as the standard library would. docs/DESIGN.md ("A stored game, read and
checked") says why.
"""

from __future__ import annotations

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
    for row in raw:
        position, game_id, version, kind, payload_text, metadata_text = row[:6]
        recorded_at, xid, prev, digest, hash_version = row[6:]
        found = parsed.get((kind, payload_text))
        if found is None:
            found = parsed[kind, payload_text] = load_canonical(kind, payload_text)
        payload, encoded = found
        known = flat.get(metadata_text)
        metadata = dict(known) if known is not None else _metadata(metadata_text, flat)
        rows.append(
            StoredEvent(
                position,
                game_id,
                version,
                kind,
                payload,
                metadata,
                recorded_at,
                xid,
                bytes(prev),
                bytes(digest),
                hash_version,
            )
        )
        canonical.append(encoded)
    return StreamRows(rows, canonical)


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
