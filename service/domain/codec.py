"""Domain values as plain JSON values, and back: the one value codec of stored rows and wire payloads.

Cards become their tokens (``"R7"``), enums their values, options their JSON object, bytes lowercase hex,
tuples lists, so a payload follows its dataclass's fields one to one (a field added to a stored type with
``LEFT_OUT_AT_DEFAULT`` is left out while it holds its default); :func:`decoder` reads it back, driven by
the type hints. Which stored name is which dataclass is :mod:`service.domain.catalogue`'s to say; the
bytes the store hashes are :mod:`service.store.canonical`'s. docs/DESIGN.md ("Stored types and their
versions").
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from service.rules.cards import Card
from service.rules.events import LEFT_OUT_AT_DEFAULT
from service.rules.options import Options, options_from_json


class CodecError(ValueError):
    """A payload that does not describe its dataclass (a missing or unknown field, a wrong value)."""


def to_json(value: Any) -> Any:
    """The JSON value of a domain value (event, command, card, enum, options, bytes, tuple…)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, Card):
        return value.token
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Options):
        return value.to_json()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, tuple | list):
        return [to_json(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): to_json(item) for key, item in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for name, optional, default in _written_fields(type(value)):
            item = getattr(value, name)
            if not (optional and item == default):
                out[name] = to_json(item)
        return out
    raise TypeError(f"no JSON form for {type(value).__name__}")


@cache
def _written_fields(cls: type) -> tuple[tuple[str, bool, Any], ...]:
    """Each field of dataclass ``cls``: its name, whether it is left out of the JSON while it holds its
    default (:data:`~service.rules.events.LEFT_OUT_AT_DEFAULT`), and that default."""
    return tuple(
        (f.name, bool(f.metadata.get(LEFT_OUT_AT_DEFAULT)), f.default) for f in dataclasses.fields(cls)
    )


# --- decoding, driven by the dataclasses' type hints --------------------------------------------------

Decoder = Callable[[Any], Any]


def required_fields(cls: type) -> frozenset[str]:
    """The fields of dataclass ``cls`` that a stored payload must hold: those without a default.

    The backward-compatible rule for every stored form: a field added to a stored type later gets a
    default, and a payload written before it existed, which lacks it, decodes as that default. Nothing
    else is loosened: a missing field without a default, or a field the type does not have, is refused.
    """
    return frozenset(
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )


@cache
def decoder(cls: type) -> Decoder:
    """The function that reads a payload back into dataclass ``cls`` (raises :class:`CodecError`)."""
    hints = typing.get_type_hints(cls)
    required = required_fields(cls)
    fields = [(f.name, _for(hints[f.name]), f.name in required) for f in dataclasses.fields(cls)]
    names = frozenset(name for name, _, _ in fields)

    def decode(payload: Any) -> Any:
        if type(payload) is not dict and not isinstance(payload, Mapping):  # a dict: no ABC check
            raise CodecError(f"{cls.__name__} needs an object, not {type(payload).__name__}")
        if not names.issuperset(payload):
            unknown = set(payload) - names
            raise CodecError(f"{cls.__name__} has no field {sorted(unknown)[0]!r}")
        values = {}
        for name, convert, required in fields:
            if name in payload:
                try:
                    values[name] = convert(payload[name])
                except (ValueError, TypeError, KeyError) as error:
                    raise CodecError(f"{cls.__name__}.{name}: {error}") from None
            elif required:
                raise CodecError(f"{cls.__name__} lacks {name!r}")
        return cls(**values)

    return decode


def _for(hint: Any) -> Decoder:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        decoders = [_for(a) for a in inner]
        if len(decoders) == 1:
            only = decoders[0]
            return lambda v: None if v is None else only(v)
        return lambda v: _first_fitting(decoders, v)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = _for(args[0])
            return lambda v: tuple(item(x) for x in _list(v))
        parts = [_for(a) for a in args]
        return lambda v: tuple(p(x) for p, x in zip(parts, _list(v, len(parts)), strict=True))
    if origin in (Mapping, dict) or hint is Mapping:
        key, item = (_for(args[0]), _for(args[1])) if args else (str, lambda x: x)
        return lambda v: {key(k): item(x) for k, x in dict(v).items()}
    if hint is Card:
        return lambda v: Card.parse(_str(v))
    if hint is Options:
        return options_from_json
    if hint is bytes:
        return lambda v: bytes.fromhex(_str(v))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint
    if hint is bool:
        return lambda v: v if isinstance(v, bool) else _wrong("a boolean", v)
    if hint is int:
        return lambda v: v if isinstance(v, int) and not isinstance(v, bool) else _wrong("a whole number", v)
    if hint is str:
        return _str
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return decoder(hint)
    if hint is Any:
        return _json_value
    raise TypeError(f"no decoder for {hint!r}")


def _json_value(value: Any) -> Any:
    """A free-form JSON value (an audit entry's evidence or outcome), kept as it is."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, list):
        return [_json_value(item) for item in value]
    if isinstance(value, Mapping):
        return {_str(key): _json_value(item) for key, item in value.items()}
    raise TypeError(f"{type(value).__name__} is not a JSON value here")


def _first_fitting(decoders: list[Decoder], value: Any) -> Any:
    for decode in decoders:
        try:
            return decode(value)
        except (ValueError, TypeError):
            continue
    raise ValueError(f"{value!r} fits none of the allowed types")


def _list(value: Any, length: int | None = None) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise TypeError(f"expected a list, not {type(value).__name__}")
    if length is not None and len(value) != length:
        raise ValueError(f"expected {length} items, not {len(value)}")
    return list(value)


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, not {type(value).__name__}")
    return value


def _wrong(what: str, value: Any) -> Any:
    raise TypeError(f"expected {what}, not {value!r}")
