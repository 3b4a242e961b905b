"""``uno-audit simulate``: complete games in every rule set, its JSON summary, records and bad input."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.cli.main import main
from service.records.record import read_record_file
from service.records.verify import verify_record
from service.rules.options import make_options


@pytest.mark.parametrize("variant", ["classic", "sonic", "attack", "mario-kart"])
@pytest.mark.parametrize("players", [2, 4, 7, 10])
def test_simulate_finishes_games_with_invariants_holding(
    variant: str, players: int, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "simulate",
            "--variant",
            variant,
            "--players",
            str(players),
            "--games",
            "2",
            "--seed",
            "11",
            "--json",
        ]
    )
    summary = json.loads(capsys.readouterr().out)
    assert code == 0
    assert summary["games"] == 2
    assert summary["variant"] == variant and summary["players"] == players
    assert summary["rounds"] >= 2  # every game plays at least one round
    assert summary["moves"] > summary["rounds"]
    assert summary["events"] > summary["moves"]
    assert summary["moves_per_second"] > 0
    assert summary["invariants"] == "held"


def test_simulate_writes_records_that_verify_as_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            ["simulate", "--variant", "attack", "--players", "3", "--games", "3", "--records", str(tmp_path)]
        )
        == 0
    )
    files = sorted(tmp_path.iterdir())
    assert len(files) == 3
    for path in files:
        report = verify_record(read_record_file(path))
        assert report.valid, report.to_json()["violations"]
        assert report.to_json()["winner"] is not None


@pytest.mark.parametrize("mode", ["seed", "deck", "hands"])
def test_simulate_writes_records_in_each_mode_that_verify_alike(
    mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["simulate", "--variant", "classic", "--players", "8", "--games", "2", "--seed", "5"]
    assert main([*args, "--records", str(tmp_path), "--record-mode", mode]) == 0
    for path in sorted(tmp_path.iterdir()):
        text = path.read_text(encoding="utf-8")
        header = json.loads(text.splitlines()[0])
        assert ("seed" in header) == (mode == "seed")
        assert ('"deck"' in text) == (mode != "hands")
        report = verify_record(read_record_file(path))
        assert report.valid, report.to_json()["violations"]


def test_simulate_is_deterministic_per_seed(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "--variant", "mario-kart", "--players", "5", "--games", "2", "--seed", "3", "--json"]
    main(args)
    first = json.loads(capsys.readouterr().out)
    main(args)
    second = json.loads(capsys.readouterr().out)
    for key in ("rounds", "moves", "events"):
        assert first[key] == second[key]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--variant", "uno-flip"], "unknown variant 'uno-flip'"),
        (["--variant", "classic", "--players", "11"], "11 is not between 2 and 10"),
        (["--variant", "classic", "--players", "two"], "'two' is not a whole number"),
        (["--variant", "classic", "--games", "0"], "0 is not between 1 and 1000000"),
        (["--variant", "classic", "--record-mode", "pgn"], "invalid choice: 'pgn'"),
    ],
)
def test_simulate_rejects_bad_arguments_with_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", *args])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_every_house_rule_combination_of_attack_plays_and_its_records_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # UNO Attack supports stacking (4 modes), jump-in and seven-o: 16 combinations, at 2 to 10 players.
    code = main(
        [
            "simulate",
            "--variant",
            "attack",
            "--every-house-rule",
            "--games",
            "1",
            "--json",
            "--records",
            str(tmp_path),
        ]
    )
    summary = json.loads(capsys.readouterr().out)
    assert code == 0
    assert (summary["games"], summary["house_rule_combinations"], summary["players"]) == (16 * 9, 16, "2-10")
    records = sorted(tmp_path.glob("*.jsonl"))
    assert len(records) == 16 * 9
    seen = set()
    for path in records:
        record = read_record_file(path)
        seen.add(
            json.dumps(
                make_options(record.header.variant, record.header.options).house_rules(), sort_keys=True
            )
        )
        report = verify_record(record)
        assert report.valid, (path.name, [v.to_json() for v in report.violations][:3])
    assert len(seen) == 16


@pytest.mark.parametrize(
    ("variant", "options"),
    [
        (
            "classic",
            ["stacking=any", "jump_in=true", "seven_o=true", "draw_to_match=true", "force_play=true"],
        ),
        ("sonic", ["stacking=draw-four", "wd4_any_time=true", "jump_in=true"]),
        ("mario-kart", ["stacking=draw-two", "seven_o=true", "draw_to_match=true"]),
    ],
)
def test_house_rules_given_as_options_are_played_and_recorded(
    variant: str, options: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "simulate",
        "--variant",
        variant,
        "--players",
        "5",
        "--games",
        "2",
        "--json",
        "--records",
        str(tmp_path),
    ]
    for option in options:
        argv += ["--option", option]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["house_rule_combinations"] == 1
    for path in tmp_path.glob("*.jsonl"):
        record = read_record_file(path)
        on = make_options(record.header.variant, record.header.options).house_rules()
        assert {f"{k}={str(v).lower()}" for k, v in on.items()} == set(options)
        assert verify_record(record).valid


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--variant", "attack", "--option", "force_play=true"], "setup.options: option force_play"),
        (["--variant", "classic", "--option", "stacking=sideways"], "setup.options: option stacking"),
        (["--variant", "classic", "--option", "no_such_rule=1"], "unknown option 'no_such_rule'"),
        (["--variant", "classic", "--option", "stacking"], "is not NAME=VALUE"),
    ],
)
def test_a_bad_option_is_refused_naming_it(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) if "NAME=VALUE" in message else _no_exit():
        assert main(["simulate", *argv]) == 2
    assert message in capsys.readouterr().err


@contextlib.contextmanager
def _no_exit() -> Iterator[None]:
    yield
