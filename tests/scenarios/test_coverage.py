"""Every rule id of the digest has a scenario, and the digest and the ``Rule`` enum name the same ids."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from service.rules import Rule

from .support import COVERED

HERE = Path(__file__).parent
DIGEST = HERE.parents[1] / "docs" / "RULES.md"
RULE_ID = re.compile(r"`([a-z0-9-]+(?:\.[a-z0-9-]+)+)`")


def _load_all_scenarios() -> dict[str, list[str]]:
    for path in sorted(HERE.glob("test_*.py")):
        if path.stem != "test_coverage":
            importlib.import_module(f"{__package__}.{path.stem}")
    return COVERED


def test_every_rule_id_has_a_scenario() -> None:
    covered = _load_all_scenarios()
    missing = sorted(rule.value for rule in Rule if not covered.get(rule.value))
    assert not missing, f"rule ids without a scenario: {', '.join(missing)}"


def test_scenarios_name_only_known_rule_ids() -> None:
    covered = _load_all_scenarios()
    known = {rule.value for rule in Rule}
    assert set(covered) <= known, sorted(set(covered) - known)


def test_the_digest_and_the_rule_enum_name_the_same_ids() -> None:
    ids = set(RULE_ID.findall(DIGEST.read_text(encoding="utf-8")))
    enum = {rule.value for rule in Rule}
    assert sorted(ids - enum) == [], "in the digest but not the Rule enum"
    assert sorted(enum - ids) == [], "in the Rule enum but not the digest"
    assert len(enum) == 56
