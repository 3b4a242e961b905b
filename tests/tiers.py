"""The suite's two tiers: fast by default, full with ``pytest --full``.

Both run every test, property and sweep; a tier sets only how many examples or games each one draws.
A property or sweep names its full-tier count through :func:`examples`; the fast tier draws a tenth
of it, at least :data:`FAST_FLOOR` (and never more than the full tier). Hypothesis has no deadline in
either: a busy machine is slow, not wrong.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

FAST_SHARE = 10
FAST_FLOOR = 4

#: Set by ``tests/conftest.py`` from ``--full`` before any test module is imported.
full = False

_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow], "print_blob": True}
settings.register_profile("fast", max_examples=20, **_COMMON)  # type: ignore[arg-type]
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
