"""``uno-audit simulate``: complete games in every rule set, its JSON summary, records and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.audit.record import read_record_file
from service.audit.verify import verify_record
from service.cli import main


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
