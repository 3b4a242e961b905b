"""Hostile records: valid game records mutated at random (lines dropped, duplicated or swapped, characters
flipped, JSON nested deep, numbers too large to read, NUL, invalid UTF-8) through ``uno-audit verify
--record FILE``. Whatever the bytes, the command ends with 0 (valid), 1 (violations) or 2 (unreadable, in
exactly one line on standard error), never with a traceback.

Most examples call the command's ``main`` in this process, with standard output and error as a real
process has them (UTF-8; strict on stdout, ``backslashreplace`` on stderr, so a report that could not be
printed fails here as it would there); a few run it as a program, since that is what users see.
:func:`record_texts` also feeds the ImportRecord fuzz of ``tests/api/test_hostile_fuzz.py``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.cli.main import main
from service.records.record import RecordError, read_record
from tests.tiers import examples

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = (ROOT / "tests" / "data" / "records", ROOT.parent / "shared" / "records")
#: The example records of the repository (and of the shared folder beside it, when there is one).
SOURCES: tuple[str, ...] = tuple(
    sorted({path.read_text(encoding="utf-8") for folder in FOLDERS for path in folder.glob("*.jsonl")})
)
EXIT_CODES = {0, 1, 2}

#: Fragments inserted anywhere: JSON punctuation, escapes a reader must refuse or keep (NUL, lone
#: surrogates), constants JSON does not have, line and format characters, a second header.
FRAGMENTS = (
    "{", "}", "[", "]", '"', ",", ":", "\\", "\x00", "\\u0000", "\\ud800", "\\udfff", "null", "NaN",
    "Infinity", "-Infinity", "1e999", "-0", "\u2028", "\u202e", "\u200b", "\ufeff", "\r", "\n", "\t",
    "#", " ", '"x": 1, ', '"by": "ann", ', '"round": 2, ', '{"record": "uno-game-record/1"}',
)  # fmt: skip
#: Numbers that replace one in the text: out of every range, not finite once read, or with more digits
#: than Python converts to an int by default (4,300).
NUMBERS = (
    "9" * 4301, "-" + "7" * 20_000, "9" * 4300, "1e999", "-1e999", "18446744073709551616", "1" + "0" * 40,
    "0", "-1", "-0", "1.5", "2e-400",
)  # fmt: skip
#: JSON values put in place of a line's value.
VALUES = (
    "null", "true", "false", "0", "-1", "7", "1e999", '""', '"ann"', '"W+4"', '"R"', "[]", "{}", '[""]',
    '{"ann": []}', '["W+4", "W+4"]', '"\\u0000"', '"\\ud800"', '"a\\u202eb"', '"' + "x" * 5000 + '"',
)  # fmt: skip
#: How deep a value is nested: about the reader's bound (16), far past it, far past Python's recursion.
DEPTHS = (100_000, 17, 16, 15, 200, 2)
#: Bytes that are not UTF-8 (a stray continuation, a truncated sequence, an overlong slash, an encoded
#: surrogate, a code point past U+10FFFF), and a NUL and a byte-order mark, which are.
BAD_BYTES = (b"\xff", b"\xfe", b"\x80", b"\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x00")
BOM = b"\xef\xbb\xbf"

#: The mutations, the ones that reach deeper into the reader twice as often.
MUTATIONS = (
    "number", "nest", "value", "insert", "flip", "number", "nest", "value", "insert", "flip", "drop",
    "duplicate", "swap", "truncate", "crlf",
)  # fmt: skip

#: A JSON number (after a colon, a bracket or a comma: not the digits of a card token such as "R7").
_NUMBER = re.compile(r"[:\[,]\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)")
_SLOT = "\x00slot"  # a placeholder string no record holds


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _replace_value(draw: st.DrawFn, text: str, value: Callable[[], str]) -> str:
    """``text`` with one value of one line (that is still a JSON object) replaced by ``value()``'s text."""
    lines = _lines(text)
    at = draw(st.integers(0, len(lines) - 1))
    try:
        obj = json.loads(lines[at])
    except (ValueError, RecursionError):  # a line an earlier mutation broke or nested deep
        obj = None
    if not isinstance(obj, dict) or not obj:
        lines[at] = value()
        return "\n".join(lines)
    key = draw(st.sampled_from(sorted(obj)))
    obj[key] = _SLOT
    lines[at] = json.dumps(obj).replace(json.dumps(_SLOT), value(), 1)
    return "\n".join(lines)


@st.composite
def _mutated(draw: st.DrawFn, text: str) -> str:
    """``text`` after one mutation."""
    lines = _lines(text)
    at = draw(st.integers(0, len(lines) - 1))
    pos = draw(st.integers(0, len(text)))
    kind = draw(st.sampled_from(MUTATIONS))
    if kind == "drop":
        del lines[at]
    elif kind == "duplicate":
        lines.insert(at, lines[at])
    elif kind == "swap":
        other = draw(st.integers(0, len(lines) - 1))
        lines[at], lines[other] = lines[other], lines[at]
    elif kind == "flip" and text:
        pos = min(pos, len(text) - 1)
        return text[:pos] + draw(st.characters(codec="utf-8")) + text[pos + 1 :]
    elif kind == "insert":
        fragment = draw(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)))
        return text[:pos] + fragment + text[pos:]
    elif kind == "truncate":
        return text[:pos]
    elif kind == "nest":
        depth = draw(st.sampled_from(DEPTHS))
        inner = draw(st.sampled_from(VALUES))
        opening, closing = draw(st.sampled_from([("[", "]"), ('{"k": ', "}")]))
        return _replace_value(draw, text, lambda: opening * depth + inner + closing * depth)
    elif kind == "number":
        number = draw(st.sampled_from(NUMBERS))
        found = list(_NUMBER.finditer(text))
        if not found:
            return _replace_value(draw, text, lambda: number)
        match = draw(st.sampled_from(found))
        return text[: match.start(1)] + number + text[match.end(1) :]
    elif kind == "value":
        chosen = draw(st.sampled_from(VALUES))
        return _replace_value(draw, text, lambda: chosen)
    elif kind == "crlf":
        return text.replace("\n", "\r\n")
    return "\n".join(lines)


@st.composite
def record_texts(draw: st.DrawFn) -> str:
    """An example record after one to four mutations (text: what a protobuf string can carry)."""
    text = draw(st.sampled_from(SOURCES))
    for _ in range(draw(st.integers(1, 4))):
        text = draw(_mutated(text))
    return text


@st.composite
def record_files(draw: st.DrawFn) -> bytes:
    """A record file's bytes: a mutated text, and then, sometimes, bytes that are not UTF-8 put anywhere,
    a byte-order mark, or the whole text in UTF-16."""
    data = draw(record_texts()).encode("utf-8")
    kind = draw(st.sampled_from(["utf-8", "utf-8", "bad bytes", "bom", "utf-16"]))
    if kind == "bad bytes":
        pos = draw(st.integers(0, len(data)))
        data = data[:pos] + draw(st.sampled_from(BAD_BYTES)) + data[pos:]
    elif kind == "bom":
        data = BOM + data
    elif kind == "utf-16":
        data = data.decode("utf-8").encode("utf-16")
    return data


def verify_in_process(path: Path, *flags: str) -> tuple[int, str, str]:
    """``uno-audit verify --record path`` through ``main``, with stdout and stderr encoded as a process's
    are; its exit status and what it wrote. An exception escaping ``main`` is the traceback a user would
    see: it propagates and fails the test."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", newline="\n")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace", newline="\n")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["verify", "--record", str(path), *flags])
    out.flush()
    err.flush()
    return code, _written(out), _written(err)


def _written(stream: io.TextIOWrapper) -> str:
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("utf-8")


def assert_one_outcome(code: int, out: str, err: str) -> None:
    """Exit 0 or 1 with a report on stdout and nothing on stderr, or 2 with one line on stderr."""
    assert code in EXIT_CODES, f"exit {code}: {err[-2000:]}"
    assert "Traceback" not in err, err[-2000:]
    if code == 2:
        assert err.endswith("\n") and len(err.splitlines()) == 1, f"not one line on stderr: {err!r}"
        assert out == ""
    else:
        assert out.strip(), "a verdict without a report"
        assert err == "", err[-2000:]


@settings(
    max_examples=examples(250),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=record_files(), as_json=st.booleans())
def test_verify_record_answers_any_bytes_with_a_verdict_or_one_line(data: bytes, as_json: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "game.jsonl"
        path.write_bytes(data)
        assert_one_outcome(*verify_in_process(path, *(["--json"] if as_json else [])))


def test_the_mutations_reach_every_outcome() -> None:
    """The fuzz above is worth something only if its records are sometimes still valid, sometimes judged
    with violations and sometimes unreadable: count the outcomes of a fixed sample."""
    seen: set[int] = set()

    @settings(max_examples=120, deadline=None, derandomize=True, database=None)
    @given(record_texts())
    def sample(text: str) -> None:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "game.jsonl"
            path.write_text(text, encoding="utf-8")
            seen.add(verify_in_process(path)[0])

    sample()
    assert seen == EXIT_CODES


def _valid() -> bytes:
    return (FOLDERS[0] / "classic_uno_catch.jsonl").read_bytes()


#: Files run as a real ``uno-audit verify --record`` (a few: each costs a Python start-up).
PROGRAM_CASES: dict[str, bytes] = {
    "not UTF-8 on line 3": b"\n".join(
        [*_valid().split(b"\n")[:2], b'{"by": "ann", "play": "R\xff"}', *_valid().split(b"\n")[3:]]
    ),
    "a number of 5,000 digits": _valid().replace(b'"options": {}', b'"options": {"x": ' + b"9" * 5000 + b"}"),
    "nested 100,000 deep": _valid().replace(b'"options": {}', b'"options": ' + b"[" * 100_000),
    "UTF-16": _valid().decode("utf-8").encode("utf-16"),
    "NUL bytes": _valid().replace(b"ann", b"a\x00n"),
}


@pytest.mark.parametrize("name", sorted(PROGRAM_CASES))
def test_verify_record_as_a_program(name: str, tmp_path: Path) -> None:
    path = tmp_path / "game.jsonl"
    path.write_bytes(PROGRAM_CASES[name])
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "verify", "--record", str(path)],
        capture_output=True,
        cwd=ROOT,
        check=False,
        timeout=60,
    )
    err = done.stderr.decode("utf-8")
    assert done.returncode == 2, err
    assert err.startswith(f"uno-audit verify: {path}: line ")
    assert_one_outcome(done.returncode, done.stdout.decode("utf-8"), err)


def test_a_file_name_that_is_not_utf8(tmp_path: Path) -> None:
    """A path of bytes that are not UTF-8 (a Unix file name may be any bytes) is read, and named in the
    one line of a refusal with the bytes escaped."""
    if sys.platform == "win32":  # pragma: no cover
        pytest.skip("Windows file names are UTF-16")
    name = os.fsdecode(b"game-\xff.jsonl")
    (tmp_path / name).write_bytes(_valid())
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / name).write_bytes(_valid().replace(b'"play": "R1"', b'"play": "R99"'))
    program = [sys.executable, "-m", "service.cli", "verify", "--record"]
    good = subprocess.run([*program, str(tmp_path / name)], capture_output=True, cwd=ROOT, timeout=60)
    bad = subprocess.run([*program, str(tmp_path / "bad" / name)], capture_output=True, cwd=ROOT, timeout=60)
    assert good.returncode == 0, good.stderr
    assert_one_outcome(bad.returncode, bad.stdout.decode("utf-8"), bad.stderr.decode("utf-8"))
    assert bad.returncode == 2 and b"game-\\udcff.jsonl: line " in bad.stderr


def test_a_number_too_long_to_read_is_a_record_error() -> None:
    """Found by this fuzz: ``json`` reads a whole number through ``int()``, which refuses more than 4,300
    digits with a bare ValueError; it escaped the reader as a traceback (and INTERNAL from ImportRecord)."""
    text = (
        '{"record": "uno-game-record/1", "variant": "classic", "players": ["a", "b"], "x": '
        + "9" * 4301
        + "}"
    )
    with pytest.raises(RecordError) as refused:
        read_record(text)
    assert str(refused.value) == "line 1: invalid JSON: a number of more than 4300 digits"
