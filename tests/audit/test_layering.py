"""The audit package stands below the read models and beside the server: ``service/audit`` imports no
``projections`` module (whoever wires the auditor passes the read models' check in), and the audit
command line takes the embedded database from the module it shares with ``serve``, not from the server.
"""

from __future__ import annotations

import ast
from pathlib import Path

from service.audit.auditor import Auditor
from service.audit.game_report import ProjectionCheck
from service.rules.options import Variant
from service.store import EventStore, StoredEvent

from .support import store_simulated

SERVICE = Path(__file__).parent.parent.parent / "service"


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in it (a function's lazy imports too), by absolute name."""
    package = ".".join(path.relative_to(SERVICE.parent).with_suffix("").parts[:-1])
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module) if part)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def test_the_audit_package_imports_no_read_model() -> None:
    for path in sorted((SERVICE / "audit").glob("*.py")):
        found = {name for name in imported(path) if name.split(".")[0] == "projections"}
        assert not found, f"{path.name} imports {found}"


def test_the_audit_command_line_and_serve_take_the_embedded_database_from_one_module() -> None:
    audit, serve = imported(SERVICE / "cli_audit.py"), imported(SERVICE / "cli.py")

    assert not {name for name in audit if name.startswith("service.api.server")}
    assert "service.embedded.embedded_database" in audit & serve


async def test_the_auditor_reports_the_read_model_check_it_is_given(store: EventStore) -> None:
    game = await store_simulated(store, Variant.CLASSIC, seed=3)
    asked: list[str] = []

    async def check(
        checked: EventStore, game_id: str, *, stream: list[StoredEvent] | None = None, decode: object = None
    ) -> list[str]:
        assert checked is store
        # The stream the auditor read, not a second read of it.
        assert stream is not None and [row.version for row in stream] == list(range(1, len(stream) + 1))
        asked.append(game_id)
        return ["tables: turn is 0 in the view, 1 by the rules"]

    checked = await Auditor(store, check).verify(game)
    skipped = await Auditor(store, check).verify(game, check_projections=False)
    unchecked = await Auditor(store).verify(game)

    assert asked == [game]
    assert checked.projections == ProjectionCheck(("tables: turn is 0 in the view, 1 by the rules",))
    assert (
        not checked.valid
        and checked.first_problem() == "read models: tables: turn is 0 in the view, 1 by the rules"
    )
    assert skipped.projections is None and unchecked.projections is None
    assert skipped.valid and unchecked.valid
