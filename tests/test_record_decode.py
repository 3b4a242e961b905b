"""The record reader's line decoder (the JSON decoder's C scanner called directly) gives what
``JSONDecoder.decode`` gives: the same value, or the same error at the same place."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from service.records.record import _DECODER, _decode


def _outcome(decode: Any, line: str) -> tuple[object, ...]:
    try:
        return ("value", decode(line))
    except json.JSONDecodeError as error:
        return ("error", error.msg, error.pos, error.colno)
    except ValueError as error:  # a duplicate key, a constant (the reader's hooks)
        return ("refused", type(error).__name__, str(error))


_PIECES = st.sampled_from(
    ['{"by": "ann", "play": "R7"}', "[1, 2]", " ", "\t", "\r", "\n", "\u00a0", "x", "{", "}"]
)


@given(st.lists(_PIECES, max_size=5).map("".join) | st.text(max_size=20))
def test_the_line_decoder_is_json_decoder_decode(line: str) -> None:
    assert _outcome(_decode, line) == _outcome(_DECODER.decode, line)


def test_tricky_lines() -> None:
    for line in ('{"a": 1} x', "", "   ", '{"a":', '{"a": 1}\t\n', '{"a": 1, "a": 2}', '{"a": NaN}', "[1] 2"):
        assert _outcome(_decode, line) == _outcome(_DECODER.decode, line)
