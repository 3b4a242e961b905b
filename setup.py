"""Build hook: the project's metadata is in ``pyproject.toml``; this file only adds the opt-in compiled
rules engine.

With ``UNO_AUDIT_COMPILE=1`` in the environment at build time, and mypyc importable (``mypy[mypyc]`` is a
build requirement), the pure rules package ``service.rules`` is compiled to C extension modules with
mypyc: the same source, faster (README, "Benchmarks"). Install it with ``UNO_AUDIT_COMPILE=1 pip install
.``. Otherwise the package builds as pure Python, exactly as without this file.

The compiled build is opt-in, and never made for an editable install even when asked for: an editable
build compiles in place, and Python prefers an extension module to the ``.py`` file beside it, so edits
to the rules would silently not run. It also builds in its own folder (``build/mypyc``), so that a later
pure build cannot pick up its ``.so`` files from setuptools' ``build/lib``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

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
#: * ``__init__.py``: it only re-exports.
INTERPRETED = frozenset({"__init__.py", "events.py", "commands.py", "options.py", "violations.py"})


def _editable() -> bool:
    """Whether setuptools is building an editable install (which would compile into the source tree)."""
    return any(command in sys.argv for command in ("editable_wheel", "develop")) or "--inplace" in sys.argv


def compiled_modules() -> list[Any]:
    """The mypyc extension modules of ``service.rules``, or none unless ``UNO_AUDIT_COMPILE=1``."""
    if os.environ.get("UNO_AUDIT_COMPILE") != "1":
        return []
    if _editable():
        print("UNO_AUDIT_COMPILE=1 ignored for an editable install: building pure Python", file=sys.stderr)
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("UNO_AUDIT_COMPILE=1 but mypyc is not importable: building pure Python", file=sys.stderr)
        return []
    # mypycify names the modules from paths relative to the folder it runs in.
    os.chdir(HERE)
    paths = sorted(
        path.relative_to(HERE).as_posix()
        for path in (HERE / "service" / "rules").glob("*.py")
        if path.name not in INTERPRETED
    )
    # mypy reads its settings from pyproject.toml; its cache goes with the build, not the developer's.
    mypy_args = ["--cache-dir", f"{BUILD}/mypy-cache", *paths]
    modules: list[Any] = mypycify(
        mypy_args, opt_level="3", debug_level="0", group_name="uno_audit_rules", target_dir=f"{BUILD}/c"
    )
    return modules


extensions = compiled_modules()
setup(ext_modules=extensions, options={"build": {"build_base": BUILD}} if extensions else {})
