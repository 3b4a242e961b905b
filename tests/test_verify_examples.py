"""The example records in ``tests/data/records/`` verify to the facts of their ``NAME.expected.json``.

Every ``NAME.jsonl`` with a ``NAME.expected.json`` beside it is checked, so an example dropped into the
folder is tested too. The keys (``shared/records/README.md``): ``exit`` (the exit code of
``uno-audit verify --record FILE --json``), ``valid``, ``rulings`` (by line: ``kind``, ``verdict`` and a
card that ``evidence.matching`` must contain, ``matching_contains``), ``hand_sizes``, ``turn`` and
``top`` (of ``final``), ``rounds``, ``winner``. Beyond the README, ``violations`` (a list of
``{"line", "rule"}``, all of them, in order) and ``stopped_at`` are compared when given.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from service.cli.main import main

DATA = Path(__file__).parent / "data" / "records"
EXAMPLES = sorted(path.name.removesuffix(".expected.json") for path in DATA.glob("*.expected.json"))
KNOWN_KEYS = {
    "exit",
    "valid",
    "rulings",
    "hand_sizes",
    "turn",
    "top",
    "rounds",
    "winner",
    "violations",
    "stopped_at",
}


def test_the_shared_examples_are_here() -> None:
    assert {"classic_wd4_upheld", "sonic_scoring_230"} <= set(EXAMPLES)


@pytest.mark.parametrize("name", EXAMPLES)
def test_an_example_verifies_to_its_expected_facts(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    expected: dict[str, Any] = json.loads((DATA / f"{name}.expected.json").read_text(encoding="utf-8"))
    assert set(expected) <= KNOWN_KEYS, f"unknown keys in {name}.expected.json: {set(expected) - KNOWN_KEYS}"

    code = main(["verify", "--record", str(DATA / f"{name}.jsonl"), "--json"])
    out, err = capsys.readouterr()
    report = json.loads(out)

    assert err == ""
    assert code == expected.get("exit", code)
    assert report["valid"] is expected.get("valid", report["valid"])
    assert code == (0 if report["valid"] else 1)
    rulings = {ruling["line"]: ruling for ruling in report["rulings"]}
    for want in expected.get("rulings", []):
        assert want["line"] in rulings, f"no ruling at line {want['line']}: {report['rulings']}"
        got = rulings[want["line"]]
        for key in ("kind", "verdict", "by", "against", "rule", "applied_ok"):
            if key in want:
                assert got[key] == want[key], (want["line"], key)
        if "matching_contains" in want:
            assert want["matching_contains"] in got["evidence"]["matching"]
    final = report["final"]
    if "hand_sizes" in expected:
        assert {name: len(hand) for name, hand in final["hands"].items()} == expected["hand_sizes"]
    for key in ("turn", "top"):
        if key in expected:
            assert final[key] == expected[key]
    for key in ("rounds", "winner", "stopped_at"):
        if key in expected:
            assert report[key] == expected[key]
    if "violations" in expected:
        assert [{"line": v["line"], "rule": v["rule"]} for v in report["violations"]] == expected[
            "violations"
        ]
