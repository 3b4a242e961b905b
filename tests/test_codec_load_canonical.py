"""``load_canonical`` (orjson) reads a stored payload's text into exactly what ``json.loads`` and the
standard library's canonical JSON give, and ``canonical_json`` writes those bytes: the same value and the
same chain bytes, for any JSON the store may hand back or accept, floats, integers beyond 64 bits,
subclasses and hostile strings included."""

from __future__ import annotations

import enum
import json
from collections import OrderedDict
from datetime import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.domain.catalogue import encode
from service.play.simulate import play_game
from service.rules import Variant
from service.store.canonical import canonical, canonical_json, json_text, load_canonical
from service.store.model import row_facts, utc_text
from tests.tiers import examples

_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)  # no lone surrogates
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT
    | st.sampled_from(["10:30.", "a,1e5", "[3.", "wd4.accept", "3e4f", "\x00\x1f\x7f\u2028\U0001f600"])
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=20,
)


def _reference(value: Any) -> bytes:
    """Canonical JSON as the chain has always been written: the standard library's."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _same(text: str, kind: str = "CardPlayed") -> None:
    expected = json.loads(text)
    payload, encoded = load_canonical(kind, text)
    assert encoded == _reference({"type": kind, "payload": expected}) == canonical(kind, expected)
    assert json.dumps(payload) == json.dumps(expected)  # floats and ints kept apart, as json.loads keeps them
    assert load_canonical(kind, text.encode()) == (payload, encoded)


@settings(max_examples=examples(400))
@given(st.dictionaries(_TEXT, _JSON, max_size=6), st.booleans())
def test_load_canonical_is_json_loads_and_canonical(payload: dict[str, Any], spaced: bool) -> None:
    # PostgreSQL's jsonb text puts spaces after ":" and ","; either way the bytes are the standard library's.
    separators = (", ", ": ") if spaced else (",", ":")
    _same(json.dumps(payload, ensure_ascii=False, separators=separators))
    _same(json.dumps(payload, ensure_ascii=True))


@given(_JSON)
def test_any_json_value_even_an_edited_non_object(value: Any) -> None:
    _same(json.dumps(value))


def test_the_numbers_orjson_would_read_or_write_otherwise_take_the_exact_way() -> None:
    for text in (
        '{"a": 123456789012345678901234567890}',  # orjson reads a float
        '{"a": -9223372036854775809}',
        '{"a": 18446744073709551615}',  # 64 bits: orjson agrees
        '{"a": 1e-07, "b": 1.50, "c": 10000000000000000.0}',  # Python writes 1e-07, orjson 1e-7
        '{"a": "' + "[" * 2000 + '"}',
        "[" * 600 + "]" * 600,  # deeper than orjson writes
    ):
        _same(text)


def test_every_stored_form_of_simulated_games() -> None:
    for variant in Variant:
        for event in play_game(variant, 4, 5, checks=False).events:
            kind, payload = encode(event)
            _same(json.dumps(payload, separators=(", ", ": ")), kind)


class _Seat(enum.IntEnum):
    NORTH = 0


class _Colour(enum.StrEnum):
    RED = "red"


class _Row(dict[str, Any]):
    pass


_WRITTEN = st.recursive(
    _SCALARS | st.sampled_from([_Seat.NORTH, _Colour.RED, True, 2**64, -(2**63) - 1]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(_TEXT, inner, max_size=4)
        | st.dictionaries(_TEXT, inner, max_size=4).map(lambda d: OrderedDict(reversed(d.items())))
        | st.dictionaries(_TEXT, inner, max_size=4).map(_Row)
    ),
    max_leaves=20,
)


@settings(max_examples=examples(400))
@given(_WRITTEN)
def test_canonical_json_writes_the_standard_librarys_bytes(value: Any) -> None:
    # Tuples, subclasses (enums, an OrderedDict out of order), floats and integers beyond 64 bits: what
    # the store's writers may hand over and what json.loads may give back alike.
    assert canonical_json(value) == _reference(value)


@settings(max_examples=examples(200))
@given(_WRITTEN)
def test_json_text_is_the_same_value(value: Any) -> None:
    # A jsonb parameter's text needs only to parse back to the same value (PostgreSQL re-writes it).
    assert json.loads(json_text(value)) == json.loads(json.dumps(value))


def test_what_orjson_refuses_or_would_write_otherwise_takes_the_exact_way() -> None:
    deep: Any = []
    for _ in range(600):  # deeper than orjson writes
        deep = [deep]
    cases = (deep, {"a": 2**70}, {"a": 1e-07, "b": [1.5, -0.0]}, {"z": 1, "a": {"y": None, "b": "é"}})
    for value in (*cases, 1e-07, -5e-324, 1e16):  # a float alone, too: orjson writes 1e-7
        assert canonical_json(value) == _reference(value)
    for lone in ("\ud800", {"k": "a\udfff"}):  # no UTF-8 form: refused as before, not written otherwise
        with pytest.raises(UnicodeEncodeError):
            _reference(lone)
        with pytest.raises(UnicodeEncodeError):
            canonical_json(lone)


@settings(max_examples=examples(300))
@given(
    st.dictionaries(_TEXT, _WRITTEN, max_size=5),
    st.datetimes(timezones=st.timezones()),
)
def test_row_facts_are_the_canonical_json_of_the_facts(metadata: dict[str, Any], at: datetime) -> None:
    # Written key by key (the time's "." would send canonical_json the slow way): the bytes must still be
    # the standard library's canonical JSON of the facts object, floats and hostile keys included.
    expected = _reference({"hash_version": 2, "metadata": metadata, "recorded_at": utc_text(at)})
    assert row_facts(2, metadata, at) == expected
    assert row_facts(1, metadata, at) == b""
