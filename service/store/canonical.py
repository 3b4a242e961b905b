"""Canonical JSON: the byte form the event store hashes into its chain (sorted keys, no spaces, UTF-8).

:func:`canonical_json` writes it, in C where orjson agrees with the standard library byte for byte;
:func:`load_canonical` reads a stored payload's JSON text into the value ``json.loads`` gives and its
canonical bytes, both at once (the verifier needs both of every row); :func:`json_text` writes the store's
``jsonb`` parameters.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import orjson


def canonical(kind: str, payload: Mapping[str, Any]) -> bytes:
    """The bytes the hash chain covers for one event: type and payload, canonical JSON."""
    return canonical_json({"type": kind, "payload": payload})


def canonical_json(value: Any) -> bytes:
    """``value`` as canonical JSON: what ``json.dumps(value, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False).encode()`` gives, byte for byte, for a value the store accepts
    (``service.store.model.check_json``) or ``json.loads`` reads (neither holds a NaN or an infinity).

    orjson writes it in C where the two agree (:func:`load_canonical` says where); a float, an integer
    beyond 64 bits, a lone surrogate or a subclass of a JSON type goes the standard library's way.
    """
    try:
        encoded = orjson.dumps(value, option=_STRICT)
    except TypeError:
        return _exact(value)
    return _exact(value) if _has_float(encoded) else encoded


def json_text(value: Any) -> bytes:
    """Compact JSON of ``value`` for a ``jsonb`` parameter (PostgreSQL parses it, so its bytes need not be
    canonical): orjson's, or the standard library's for what orjson refuses (an integer beyond 64 bits)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False).encode()


def _exact(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


#: orjson's options for canonical JSON: keys sorted, and a subclass of a JSON type, a datetime or a
#: dataclass refused (TypeError) rather than written orjson's own way, which ``json.dumps`` does not share.
_STRICT = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
)

#: A number with a fraction or an exponent in orjson's compact output, once every string is emptied: every
#: value there starts the text or follows ``:``, ``,`` or ``[``, and every float is written with a ``.``
#: or an ``e+``/``e-`` after its first digits.
_FLOAT_TOKEN = re.compile(rb"(?:^|[:,\[])-?[0-9]+[.eE]")
#: A JSON string in orjson's output (escapes included), emptied before looking for a float: a time such as
#: ``"07:30:00.500000+00:00"`` holds text that looks like one.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')


def _has_float(encoded: bytes) -> bool:
    """Whether orjson's ``encoded`` holds a float (most payloads have no ``.``, ``e+`` or ``e-`` at all,
    and skip the slower search)."""
    if b"." not in encoded and b"e+" not in encoded and b"e-" not in encoded:
        return False
    return _FLOAT_TOKEN.search(_STRING.sub(b'""', encoded)) is not None


def load_canonical(kind: str, text: str | bytes) -> tuple[Any, bytes]:
    """A stored payload's JSON ``text``, parsed, and :func:`canonical` of ``(kind, payload)``: exactly what
    ``json.loads`` and :func:`canonical` give, the chain's bytes included.

    orjson parses and writes the payload in C, which agrees byte for byte with the standard library on
    every JSON value without floats: strings (escapes, and keys sorted by code point, as UTF-8 bytes
    sort), 64-bit integers, ``true``/``false``/``null``, arrays and objects. It differs on floats
    (``1e-07`` against ``1e-7``) and reads an integer beyond 64 bits as a float; so a payload whose
    canonical bytes hold a float (:data:`_FLOAT_TOKEN`), or that orjson refuses (nested too deep), is read
    again with ``json.loads`` and written with :func:`canonical`. A payload the service wrote has no
    floats (the store refuses them, ``service.store.model.check_json``); an edited one still hashes as
    the verifier always hashed it.
    """
    try:
        payload = orjson.loads(text)
        encoded = orjson.dumps({"type": kind, "payload": payload}, option=orjson.OPT_SORT_KEYS)
    except (ValueError, TypeError):  # not UTF-8, nested too deep, an int beyond 64 bits
        pass
    else:
        if not _has_float(encoded):
            return payload, encoded
    payload = json.loads(text)
    return payload, _exact({"type": kind, "payload": payload})
