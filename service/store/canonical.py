"""Canonical JSON: the byte form the event store hashes into its chain (sorted keys, no spaces, UTF-8).

:func:`load_canonical` reads a stored payload's JSON text into the value ``json.loads`` gives and the bytes
:func:`canonical` gives of it, both at once and several times faster (the verifier needs both of every row).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import orjson


def canonical(kind: str, payload: Mapping[str, Any]) -> bytes:
    """The bytes the hash chain covers for one event: type and payload, canonical JSON."""
    return json.dumps(
        {"type": kind, "payload": payload}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode()


#: A number with a fraction or an exponent in orjson's compact output: every value there follows ``:``, ``,``
#: or ``[``, and every float is written with a ``.`` or an ``e+``/``e-`` after its first digits. A string
#: holding such text (``"at 10:30."``) matches too, which only sends its payload the exact, slower way.
_FLOAT_TOKEN = re.compile(rb"[:,\[]-?[0-9]+[.eE]")


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
        # orjson writes every float with a ".", an "e+" or an "e-": most payloads have none of them, and
        # skip the (slower) search.
        if (b"." not in encoded and b"e+" not in encoded and b"e-" not in encoded) or (
            _FLOAT_TOKEN.search(encoded) is None
        ):
            return payload, encoded
    payload = json.loads(text)
    return payload, canonical(kind, payload)
