"""The one catalogue of stored types: every game event and audit entry a stream may hold, registered once.

Every consumer (the command handler, the read models, their check, the stored-game reader, the redaction)
decodes a row here, with the one decoder of :mod:`service.domain.codec`. A stored type changes shape only
by a new schema version: its :class:`StoredType` names the current one and an upcaster per older version;
a row of version 2 on carries :data:`VERSION_KEY`. A row of an unknown type or a newer version is refused
(:class:`CatalogueError`). docs/DESIGN.md ("Stored types and their versions") says why and when a field
needs a new version.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from service.domain import entries as audit_entries
from service.domain.codec import CodecError, decoder, to_json
from service.domain.entries import Entry
from service.rules import events as game_events
from service.rules.events import Event

#: The payload key that carries a row's schema version when it is above 1.
VERSION_KEY = "_version"

#: Turns a payload of one version into the next version's payload.
Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


class CatalogueError(CodecError):
    """A stored row that cannot be read: an unknown type, a version from the future, a bad payload."""


class Group(enum.Enum):
    """What a stored type is to the game: one of its events, or an entry of its audit trail."""

    GAME = "game"
    AUDIT = "audit"


@dataclass(frozen=True, slots=True)
class StoredType:
    """One registered type: its stored name, its class, its group, its schema version and upcasters.

    ``upcasters[k]`` turns a payload of version ``k + 1`` into one of version ``k + 2``; so there are
    ``version - 1`` of them.
    """

    name: str
    cls: type
    group: Group
    version: int = 1
    upcasters: tuple[Upcaster, ...] = ()

    def __post_init__(self) -> None:
        if self.version < 1 or len(self.upcasters) != self.version - 1:
            raise ValueError(f"{self.name} v{self.version} needs {self.version - 1} upcasters")


class Row(Protocol):
    """What the catalogue reads of a stored row (a :class:`service.store.StoredEvent`, a fixture)."""

    @property
    def type(self) -> str: ...

    @property
    def payload(self) -> Mapping[str, Any]: ...


R = typing.TypeVar("R", bound=Row)


@dataclass(frozen=True, slots=True)
class Split(typing.Generic[R]):
    """A stream split into the game's events and the audit trail's entries, each with its row."""

    game: list[tuple[R, Event]]
    audit: list[tuple[R, Entry]]


class Catalogue:
    """The registered stored types (see the module docstring); :data:`CATALOGUE` is the service's."""

    def __init__(self, types: Iterable[StoredType]) -> None:
        self._by_name: dict[str, StoredType] = {}
        self._by_class: dict[type, StoredType] = {}
        for stored in types:
            if stored.name in self._by_name or stored.cls in self._by_class:
                raise ValueError(f"{stored.name} is registered twice")
            self._by_name[stored.name] = stored
            self._by_class[stored.cls] = stored

    def __getitem__(self, name: str) -> StoredType:
        return self._by_name[name]

    def names(self, group: Group) -> frozenset[str]:
        """The stored names of one group's types."""
        return frozenset(name for name, stored in self._by_name.items() if stored.group is group)

    def group(self, name: str) -> Group | None:
        """The group of stored type ``name``, or ``None`` when the catalogue does not know it."""
        stored = self._by_name.get(name)
        return stored.group if stored is not None else None

    def name_of(self, cls: type) -> str:
        """The stored name of registered class ``cls`` (so that no consumer spells one as a literal)."""
        return self._by_class[cls].name

    def with_type(self, stored: StoredType) -> Catalogue:
        """This catalogue with ``stored`` in place of the type of the same name (a new version)."""
        return Catalogue([*(t for t in self._by_name.values() if t.name != stored.name), stored])

    # --- writing --------------------------------------------------------------------------------------

    def encode(self, item: Event | Entry) -> tuple[str, dict[str, Any]]:
        """``(stored name, payload)`` of a game event or audit entry, at its type's current version."""
        stored = self._by_class.get(type(item))
        if stored is None:
            raise CatalogueError(f"{type(item).__name__} is not a stored type")
        payload = to_json(item)
        assert isinstance(payload, dict)
        if stored.version > 1:
            payload[VERSION_KEY] = stored.version
        return stored.name, payload

    # --- reading --------------------------------------------------------------------------------------

    def decode(self, name: str, payload: Mapping[str, Any]) -> Event | Entry:
        """Today's event or entry for a stored row, upcast from the version it was written at."""
        stored = self._by_name.get(name)
        if stored is None:
            raise CatalogueError(f"unknown stored type {name!r}")
        if not isinstance(payload, Mapping):
            raise CatalogueError(f"{name} needs an object, not {type(payload).__name__}")
        version = payload.get(VERSION_KEY, 1)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise CatalogueError(f"{name}: {VERSION_KEY} must be a version number, not {version!r}")
        if version > stored.version:
            raise CatalogueError(
                f"{name} version {version} was written by a newer uno-audit (this one reads up to "
                f"version {stored.version})"
            )
        body = {key: value for key, value in payload.items() if key != VERSION_KEY}
        for upcast in stored.upcasters[version - 1 :]:
            body = upcast(body)
        try:
            decoded: Event | Entry = decoder(stored.cls)(body)
        except CodecError as error:  # the codec's error, as the catalogue's (callers catch either)
            raise CatalogueError(str(error)) from None
        return decoded

    def decode_event(self, name: str, payload: Mapping[str, Any]) -> Event:
        """:meth:`decode` for a row that must be a game event."""
        group = self.group(name)
        if group is None:
            raise CatalogueError(f"unknown event type {name!r}")
        if group is not Group.GAME:
            raise CatalogueError(f"{name!r} is an audit entry, not a game event")
        return typing.cast(Event, self.decode(name, payload))

    def decode_entry(self, name: str, payload: Mapping[str, Any]) -> Entry:
        """:meth:`decode` for a row that must be an audit entry."""
        if self.group(name) is not Group.AUDIT:
            raise CatalogueError(f"{name!r} is not an audit entry")
        return typing.cast(Entry, self.decode(name, payload))

    def split(self, rows: Iterable[R]) -> Split[R]:
        """A stream's rows decoded and split into game events and audit entries, in stream order.

        Raises :class:`CatalogueError` at the first row that cannot be read.
        """
        game: list[tuple[R, Event]] = []
        audit: list[tuple[R, Entry]] = []
        for row in rows:
            decoded = self.decode(row.type, row.payload)
            if self._by_name[row.type].group is Group.GAME:
                game.append((row, typing.cast(Event, decoded)))
            else:
                audit.append((row, typing.cast(Entry, decoded)))
        return Split(game, audit)


def _registered(module: Any, group: Group) -> list[StoredType]:
    """Every frozen dataclass defined in ``module``, as a version 1 stored type of ``group``."""
    return [
        StoredType(cls.__name__, cls, group)
        for cls in vars(module).values()
        if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == module.__name__
    ]


#: The service's catalogue. To change a stored type's shape, register its next version here:
#: ``StoredType("CardPlayed", CardPlayed, Group.GAME, version=2, upcasters=(v1_to_v2,))``.
CATALOGUE = Catalogue([*_registered(game_events, Group.GAME), *_registered(audit_entries, Group.AUDIT)])

#: The stored names of the game's events and of the audit trail's entries.
GAME_TYPES = CATALOGUE.names(Group.GAME)
AUDIT_TYPES = CATALOGUE.names(Group.AUDIT)

encode = CATALOGUE.encode
decode = CATALOGUE.decode
decode_event = CATALOGUE.decode_event
decode_entry = CATALOGUE.decode_entry
split = CATALOGUE.split
type_name = CATALOGUE.name_of


__all__ = [
    "AUDIT_TYPES",
    "CATALOGUE",
    "GAME_TYPES",
    "VERSION_KEY",
    "Catalogue",
    "CatalogueError",
    "Group",
    "Split",
    "StoredType",
    "Upcaster",
    "decode",
    "decode_entry",
    "decode_event",
    "encode",
    "split",
    "type_name",
]
