"""Run part of a benchmark on the compiled engine: a child process whose ``service`` is a mypyc build.

``PATH`` is a copy of the project built with mypyc (``UNO_AUDIT_COMPILE=1 pip install --no-deps --target
PATH .``). The child starts with ``python -P`` (no script folder or work tree on the path), imports
``service`` from ``PATH`` before anything else (so every ``service`` module it uses is that copy's, whatever
the path holds later), and refuses to time anything but the compiled engine (``.so`` modules).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = str(Path(__file__).resolve().parent.parent)


def in_compiled(path: str, statements: str, given: Any = None) -> Any:
    """Run ``statements`` in a child on the compiled engine at ``path``; what they leave in ``result``.
    ``given`` reaches them as the JSON value ``given``; ``result`` comes back as JSON. The child inherits
    this process's core. Raises :class:`RuntimeError` if the child fails or the engine is not compiled."""
    child = (
        "import json, sys\n"
        f"sys.path[:0] = [{path!r}, {ROOT!r}]\n"
        "import service.rules.state\n"
        "if not service.rules.state.__file__.endswith('.so'):\n"
        "    sys.exit(f'not a compiled engine: {service.rules.state.__file__}')\n"
        "given = json.loads(sys.stdin.read())\n"
        f"{statements}\n"
        "print(json.dumps(result))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-P", "-c", child],
        input=json.dumps(given),
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the compiled engine in {path} did not run: {done.stderr.strip()}")
    return json.loads(done.stdout)
