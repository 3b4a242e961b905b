"""``uno-audit verify --record FILE [--json]``: exit 0 valid, 1 violations, 2 unreadable; no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from service.cli.main import main

DATA = Path(__file__).parent / "data" / "records"
HEADER = '{"record": "uno-game-record/1", "variant": "classic", "players": ["ann", "bob"], "options": {}}'
ROUND = (
    '{"round": 1, "dealer": "bob", "hands": {"ann": ["R1", "G7", "B5", "Y2", "RS", "W", "W+4"], '
    '"bob": ["R3", "G5", "B1", "Y9", "G2", "B7", "Y6"]}, "first": ["R9"]}'
)


def write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "game.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def run(capsys: pytest.CaptureFixture[str], path: Path, *flags: str) -> tuple[int, str, str]:
    code = main(["verify", "--record", str(path), *flags])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_valid_record_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, DATA / "classic_wd4_upheld.jsonl", "--json")

    assert code == 0
    assert err == ""
    report = json.loads(out)
    assert report["valid"] is True
    assert out.count("\n") == 1  # one JSON object on one line


def test_a_record_with_violations_exits_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, HEADER, ROUND, '{"by": "ann", "play": "G7"}')

    code, out, err = run(capsys, path, "--json")

    assert code == 1
    assert err == ""
    assert json.loads(out)["violations"] == [
        {"line": 3, "rule": "play.match", "message": "G7 does not match R9 (active colour R)"}
    ]


def test_the_human_report_names_violations_and_rulings(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = write(tmp_path, HEADER, ROUND, '{"by": "ann", "play": "G7"}', '{"by": "ann", "catch": "bob"}')

    code, out, _ = run(capsys, path)

    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "classic game: INVALID"
    assert "  line 3: play.match: G7 does not match R9 (active colour R)" in lines
    assert any(line.startswith("  line 4: uno-catch by ann against bob: no-penalty") for line in lines)


def test_a_stopped_replay_says_where(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, HEADER, ROUND, '{"by": "ann", "play": "G9"}')

    code, out, _ = run(capsys, path)

    assert code == 1
    assert "the record could not be followed past line 3" in out


UNREADABLE = [
    ("unknown-card", [HEADER, ROUND, '{"by": "ann", "play": "R10"}'], 3, "unknown card token 'R10'"),
    ("unknown-card-in-hands", [HEADER, ROUND.replace('"Y2"', '"Y22"')], 2, "unknown card token 'Y22'"),
    ("unknown-variant", [HEADER.replace("classic", "uno-flip"), ROUND], 1, "unknown variant 'uno-flip'"),
    (
        "unknown-option",
        [HEADER.replace("{}", '{"stack_sevens": true}'), ROUND],
        1,
        "unknown option 'stack_sevens'",
    ),
    (
        "unsupported-house-rule",
        [HEADER.replace('"classic"', '"attack"').replace("{}", '{"force_play": true}'), ROUND],
        1,
        "force_play",
    ),
    ("bad-option-value", [HEADER.replace("{}", '{"target_score": -5}'), ROUND], 1, "target_score"),
    ("malformed-json", [HEADER, ROUND, '{"by": "ann", "play": "R1"'], 3, "invalid JSON"),
    ("not-an-object", [HEADER, ROUND, '"play R1"'], 3, "expected a JSON object"),
    ("unknown-player", [HEADER, ROUND, '{"by": "dan", "play": "R1"}'], 3, "'by' must name a player"),
    ("no-action", [HEADER, ROUND, '{"by": "ann"}'], 3, "exactly one action key"),
    ("no-header", [ROUND], 1, "the first line must be the header"),
    ("press-without-fired", [HEADER, ROUND, '{"by": "ann", "press": true}'], 3, "needs 'fired'"),
]


@pytest.mark.parametrize(
    ("lines", "line", "fragment"), [case[1:] for case in UNREADABLE], ids=[case[0] for case in UNREADABLE]
)
def test_an_unreadable_record_exits_2_with_one_line_naming_the_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, lines: list[str], line: int, fragment: str
) -> None:
    path = write(tmp_path, *lines)

    code, out, err = run(capsys, path, "--json")

    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"uno-audit verify: {path}: line {line}: ")
    assert fragment in err
    assert "Traceback" not in err


def test_a_missing_file_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, tmp_path / "nope.jsonl")

    assert code == 2
    assert out == ""
    assert err.startswith("uno-audit verify: cannot read ")
    assert err.count("\n") == 1


def test_bytes_that_are_not_utf8_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "game.jsonl"
    path.write_bytes((HEADER + "\n" + ROUND + "\n").encode() + b'{"by": "ann", "play": "\xff"}\n')

    code, _, err = run(capsys, path)

    assert code == 2
    assert f"{path}: line 3: not UTF-8" in err


def test_bad_usage_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["verify"])

    assert exited.value.code == 2
    assert "--record" in capsys.readouterr().err


def test_the_command_runs_as_a_program(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER, ROUND, '{"by": "ann", "play": "Q1"}')
    program = [sys.executable, "-m", "service.cli", "verify", "--record"]
    root = Path(__file__).parent.parent

    bad = subprocess.run([*program, str(path)], capture_output=True, text=True, cwd=root, check=False)
    good = subprocess.run(
        [*program, str(DATA / "sonic_scoring_230.jsonl"), "--json"],
        capture_output=True,
        text=True,
        cwd=root,
        check=False,
    )

    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr == f"uno-audit verify: {path}: line 3: unknown card token 'Q1' in 'play'\n"
    assert good.returncode == 0
    assert json.loads(good.stdout)["winner"] == "ann"
