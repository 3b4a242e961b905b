"""Which build of the rules engine this process runs: ``"compiled"`` (mypyc) or ``"pure"`` (Python).

``setup.py`` compiles the engine's modules into C extension modules wherever it can (an editable install
never is); ``uno-audit --version`` and serve's "serving" line name the one loaded, since a pure fallback
is otherwise silent. This module stays interpreted (``setup.py``, ``INTERPRETED``).
"""

from __future__ import annotations

from typing import Literal

import service.rules.state

#: The file endings of an extension module (Linux and macOS; Windows).
_EXTENSIONS = (".so", ".pyd")


def engine_kind() -> Literal["compiled", "pure"]:
    """``"compiled"`` when the engine's state module was loaded from an extension module, else ``"pure"``."""
    return "compiled" if (service.rules.state.__file__ or "").endswith(_EXTENSIONS) else "pure"
