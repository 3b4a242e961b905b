"""Read models rebuilt from the event log: hands, tables, scores, tournament standings, player stats.

Folds (:mod:`projections.views`, :mod:`projections.fold`), the checkpointed projector
(:mod:`projections.projector`), the rebuild (:mod:`projections.rebuild`), quarantined games
(:mod:`projections.quarantine`), reads that can wait for a write (:mod:`projections.queries`), the
consistency check (:mod:`projections.check`) and this package's own migrations (:mod:`projections.migrate`).
See docs/DESIGN.md ("Projections").
"""

from projections.check import check_game
from projections.migrate import apply_migrations, migrate
from projections.projector import DEFAULT_SET, Lag, Projector, read_lag, run_projector
from projections.quarantine import ProjectionHealth, Quarantined, read_health
from projections.queries import ProjectionLag, hand, scores, standings
from projections.rebuild import RebuildBusy, RebuildReport, rebuild
from projections.source import ProjectionError
from projections.views import VIEW_NAMES

__all__ = [
    "DEFAULT_SET",
    "VIEW_NAMES",
    "Lag",
    "ProjectionError",
    "ProjectionHealth",
    "ProjectionLag",
    "Projector",
    "Quarantined",
    "RebuildBusy",
    "RebuildReport",
    "apply_migrations",
    "check_game",
    "hand",
    "migrate",
    "read_health",
    "read_lag",
    "rebuild",
    "run_projector",
    "scores",
    "standings",
]
