"""The suite's two tiers: fast by default, full with ``pytest --full``.

Both run every test, property and sweep; a tier sets only how many examples or games each one draws,
except the few whole-system runs (an install, a cluster, a guide end to end) marked :func:`full_only`.
A property or sweep names its full-tier count through :func:`examples`; the fast tier draws a tenth
of it, at least :data:`FAST_FLOOR` (and never more than the full tier). Hypothesis has no deadline in
either: a busy machine is slow, not wrong.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, settings

T = TypeVar("T")

FAST_SHARE = 10
FAST_FLOOR = 4

#: Set by ``tests/conftest.py`` from ``--full`` before any test module is imported.
full = False

_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow], "print_blob": True}
settings.register_profile("fast", max_examples=10, **_COMMON)  # type: ignore[arg-type]
settings.register_profile("full", max_examples=100, **_COMMON)  # type: ignore[arg-type]


def choose(full_tier: bool) -> None:
    """Select the tier for this process: its hypothesis profile and :func:`examples`' scale."""
    global full
    full = full_tier
    settings.load_profile("full" if full_tier else "fast")


def examples(full_count: int, *, fast: int | None = None) -> int:
    """How many examples (or games) to draw of a property or sweep that draws ``full_count`` in the full
    tier; ``fast`` overrides the fast tier's share where a sweep must draw more to meet its class."""
    if full:
        return full_count
    if fast is not None:
        return fast
    return min(full_count, max(FAST_FLOOR, full_count // FAST_SHARE))


def sample(items: Sequence[T], *, fast: int) -> list[T]:
    """Every item in the full tier; in the fast tier ``fast`` of them drawn afresh each run, in order, so a
    sweep over a fixed list still reaches every item over a few runs."""
    if full or len(items) <= fast:
        return list(items)
    chosen = sorted(random.sample(range(len(items)), fast))
    return [items[i] for i in chosen]


def full_only(reason: str) -> None:
    """Skip the calling test outside the full tier, saying why (``reason``: what makes it slow)."""
    if not full:
        pytest.skip(f"{reason}: in the full tier only (pytest --full)")
