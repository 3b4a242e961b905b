"""Read models rebuilt from the event log: hands, tables, scores, tournament standings, player stats.

* :mod:`projections.views` — each read model as a pure fold (initial value + ``evolve``) and its rows;
* :mod:`projections.projector` — the checkpointed projector (exactly once, several processes safe, lag);
* :mod:`projections.rebuild` — rebuild from zero into fresh tables and swap them in atomically;
* :mod:`projections.quarantine` — games that cannot be folded, set aside and reported while the rest
  projects;
* :mod:`projections.queries` — reads that can wait for a client's own write;
* :mod:`projections.check` — one game's views against a fold of its events through the rules engine;
* :mod:`projections.migrate` — the projection tables' migrations (this package owns them).

See ``docs/DESIGN.md`` ("Projections").
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
