"""Build hook: the project's metadata is in ``pyproject.toml``; this file only adds the compiled rules engine.

A wheel built here (``pip install .``, the image) has ``service.rules`` and the bots' policy compiled to C
extension modules by mypyc (``mypy[mypyc]`` is a build requirement): the same source, faster. It stays pure
Python, saying so in one line on standard error (``pip -v`` shows it), with ``UNO_AUDIT_COMPILE=0``,
without a C compiler or Python's headers, and always for an editable install: an editable build compiles
in place, and Python prefers an extension module to the ``.py`` file beside it, so edits to the rules
would silently not run. The compiled build has its own folder (``build/mypyc``), so that a later pure
build cannot pick up its ``.so`` files from setuptools' ``build/lib``.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from setuptools import setup  # type: ignore[import-untyped,unused-ignore]  # no stubs in the venv

HERE = Path(__file__).resolve().parent
BUILD = "build/mypyc"

#: The rules modules that stay interpreted, and why. mypyc turns a dataclass into a native class whose
#: ``__annotations__`` hold erased runtime classes (``tuple``, ``type`` for ``Colour | None``), and
#: whose instances check their field types and refuse pickling once frozen:
#:
#: * ``events.py``: the events' type hints are the stored schema (:mod:`service.codec` decodes every
#:   stored payload by them), so they must stay as written;
#: * ``commands.py``, ``options.py``, ``violations.py``: the data the rest of the service builds, hashes,
#:   copies and pickles (commands from the wire and from records, a game's options, the violations
#:   reported), kept plain Python so that they behave the same with the compiled engine as without it;
#:   compiling them gained nothing measurable (the engine only reads their fields);
#: * ``__init__.py``: it only re-exports; ``engine_kind.py``: it only reads a file name, nothing to gain.
INTERPRETED = frozenset(
    {"__init__.py", "events.py", "commands.py", "options.py", "violations.py", "engine_kind.py"}
)

#: The bots' policy, compiled with the engine: the simulator and the benchmarks ask it every move, and it
#: is most of a move's cost beside the engine's (bench/README.md, "rules_speed.py").
BOTS = ("service/play/policy.py", "service/play/bots.py")

#: The setup commands that build extension modules. pip's metadata steps (``egg_info``, ``dist_info``)
#: and ``sdist`` build none, so they neither run mypyc nor say anything: one line per install, not three.
BUILDS = frozenset({"bdist_wheel", "build", "build_ext", "install", "bdist"})
#: The commands of an editable install (``pip install -e``: ``editable_wheel``; the legacy ``develop``).
EDITABLE = frozenset({"editable_wheel", "develop"})


class Decision(NamedTuple):
    """Whether to compile the rules engine, and the one line to say about it (None: nothing to say)."""

    compile: bool
    note: str | None


def decide(setting: str | None, argv: Sequence[str], lacking: Callable[[], str | None]) -> Decision:
    """The build's choice, from ``UNO_AUDIT_COMPILE`` (``setting``), the setup command line (``argv``) and
    ``lacking()``, what the compiled build lacks here (None: nothing), asked only when it matters."""
    if setting not in (None, "", "0", "1"):
        raise SystemExit(f"UNO_AUDIT_COMPILE is 0 (pure Python) or 1 (compiled, the default), not {setting}")
    commands = set(argv)
    if commands & EDITABLE or "--inplace" in commands or {"build_ext", "-i"} <= commands:
        return Decision(False, "an editable install: the rules engine stays pure Python, so that edits run")
    if not commands & BUILDS:
        return Decision(False, None)
    if setting == "0":
        return Decision(False, "UNO_AUDIT_COMPILE=0: the rules engine stays pure Python")
    missing = lacking()
    if missing is not None:
        return Decision(False, f"{missing}: the rules engine is built as pure Python")
    return Decision(True, "compiling the rules engine with mypyc (UNO_AUDIT_COMPILE=0 builds it pure)")


def lacking() -> str | None:
    """What the compiled build lacks here — mypyc, the C compiler setuptools would call (``CC``, else
    the one Python was built with), ``Python.h`` — or None."""
    try:
        import mypyc.build  # noqa: F401  # a build requirement, absent only with --no-build-isolation
    except ImportError:
        return "mypyc is not importable"
    compiler = ((os.environ.get("CC") or sysconfig.get_config_var("CC") or "").split() or ["cc"])[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler})"
    header = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not header.is_file():
        return f"no Python headers ({header})"
    return None


def compiled_modules() -> list[Any]:
    """The mypyc extension modules of ``service.rules`` and :data:`BOTS`: the source paths relative to this
    folder."""
    from mypyc.build import mypycify

    # mypycify names the modules from paths relative to the folder it runs in.
    os.chdir(HERE)
    rules = [path for path in (HERE / "service" / "rules").glob("*.py") if path.name not in INTERPRETED]
    paths = sorted(path.relative_to(HERE).as_posix() for path in [*rules, *(HERE / p for p in BOTS)])
    # mypy reads its settings from pyproject.toml; its cache goes with the build, not the developer's.
    mypy_args = ["--cache-dir", f"{BUILD}/mypy-cache", *paths]
    modules: list[Any] = mypycify(
        mypy_args, opt_level="3", debug_level="0", group_name="uno_audit_rules", target_dir=f"{BUILD}/c"
    )
    return modules


if __name__ == "__main__":  # run by setuptools' build backend; tests/test_build.py imports decide()
    decision = decide(os.environ.get("UNO_AUDIT_COMPILE"), sys.argv[1:], lacking)
    if decision.note is not None:
        print(f"uno-audit build: {decision.note}", file=sys.stderr)
    extensions = compiled_modules() if decision.compile else []
    setup(ext_modules=extensions, options={"build": {"build_base": BUILD}} if extensions else {})
