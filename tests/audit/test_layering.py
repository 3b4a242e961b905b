"""The folder plan, enforced: each package imports only the layers below it, and no module imports
itself back through others. docs/DESIGN.md ("The layers") draws the same plan.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from service.app.auditor import Auditor
from service.audit.game_report import ProjectionCheck
from service.rules.options import Variant
from service.store import EventStore, StoredEvent

from .support import store_simulated

ROOT = Path(__file__).parent.parent.parent

#: Each package's layer. A module may import its own package and any package of a lower layer, never
#: one of its own layer or above. The generated protobuf code (``uno_audit_client.gen``, in the client
#: package ``clients/python``) is the wire contract: it imports nothing of the project, and the API and its
#: clients stand on it. The client package stands on it alone (:func:`test_the_client_package_imports_
#: nothing_of_the_server`), and the bots (``service.client``) on the client package.
LAYERS: dict[str, int] = {
    "service.rules": 0,
    "service.store": 0,
    "service.ops": 0,
    "uno_audit_client.gen": 0,
    "uno_audit_client": 1,
    "service.checkpoints": 1,
    "service.play": 1,
    "service.domain": 2,
    "service.records": 3,
    "service.audit": 4,
    "projections": 4,
    "service.app": 5,
    "service.api": 6,
    "service.client": 7,
    "service.cli": 8,
}


#: The project's top-level packages, each with the folder its dotted names are relative to.
TOPS = {"service": ROOT, "projections": ROOT, "uno_audit_client": ROOT / "clients" / "python" / "src"}
GENERATED = "uno_audit_client.gen"


def modules() -> dict[str, Path]:
    """Every module of ``service``, ``projections`` and the client package by its dotted name (generated
    code left out)."""
    found = {}
    for top, base in TOPS.items():
        for path in (base / top).rglob("*.py"):
            parts = path.relative_to(base).with_suffix("").parts
            if "gen" in parts or parts == ("service", "__init__"):  # generated code; an empty package
                continue
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def package_of(module: str) -> str:
    """The layer-table package ``module`` belongs to (the longest that prefixes it)."""
    owners = [name for name in LAYERS if module == name or module.startswith(name + ".")]
    assert owners, f"{module} is in no layer: add its package to LAYERS"
    return max(owners, key=len)


def imports(module: str, path: Path) -> Iterator[tuple[int, str]]:
    """The project modules ``module`` imports (lazily too), with the line of each import."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    known = modules()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            source = ".".join(part for part in (base, node.module) if part)
            submodules = [
                f"{source}.{alias.name}" for alias in node.names if f"{source}.{alias.name}" in known
            ]
            # ``from package import submodule`` imports the submodule, not the package's other names.
            names = submodules if len(submodules) == len(node.names) else [source, *submodules]
        else:
            continue
        for name in names:
            if name.split(".")[0] in TOPS:
                yield node.lineno, name


def owning_module(name: str, known: dict[str, Path]) -> str:
    if name == GENERATED or name.startswith(GENERATED + "."):
        return GENERATED  # one node: its modules are left out of ``known``
    while name not in known and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def test_no_module_imports_its_own_layer_or_above() -> None:
    known = modules()
    wrong = []
    for module, path in sorted(known.items()):
        mine = package_of(module)
        for line, name in imports(module, path):
            theirs = package_of(name)
            if theirs != mine and LAYERS[theirs] >= LAYERS[mine]:
                wrong.append(
                    f"{path.relative_to(ROOT)}:{line} imports {name} ({mine} may not import {theirs})"
                )
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle() -> None:
    known = modules()
    arrows = {
        module: {owning_module(name, known) for _, name in imports(module, path)} - {module}
        for module, path in known.items()
    }
    cycles = []
    done: set[str] = set()

    def visit(module: str, trail: list[str]) -> None:
        if module in trail:
            cycles.append(" -> ".join([*trail[trail.index(module) :], module]))
            return
        if module in done:
            return
        for target in sorted(arrows.get(module, ())):
            visit(target, [*trail, module])
        done.add(module)

    for module in sorted(arrows):
        visit(module, [])
    assert not cycles, "\n".join(cycles)


def test_every_package_has_a_layer() -> None:
    assert all(package_of(module) for module in modules())


def test_the_client_package_imports_nothing_of_the_server() -> None:
    """``uno-audit-client`` installs alone: its modules import only themselves and the generated code (and
    no database driver), lazily or not."""
    known = modules()
    client = {module: path for module, path in known.items() if package_of(module) == "uno_audit_client"}
    assert "uno_audit_client.client" in client
    wrong = []
    for path in sorted(client.values()):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                if name.split(".")[0] in ("service", "projections", "psycopg", "psycopg_pool", "tenacity"):
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert not wrong, "\n".join(wrong)


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
