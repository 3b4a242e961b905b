"""``load_canonical`` (orjson) reads a stored payload's text into exactly what ``json.loads`` and
``canonical`` give: the same value and the same chain bytes, for any JSON the store may hand back,
floats, integers beyond 64 bits and hostile strings included."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from service.domain.catalogue import encode
from service.play.simulate import play_game
from service.rules import Variant
from service.store.canonical import canonical, load_canonical
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


def _same(text: str, kind: str = "CardPlayed") -> None:
    expected = json.loads(text)
    payload, encoded = load_canonical(kind, text)
    assert encoded == canonical(kind, expected)
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
