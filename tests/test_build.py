"""The build's choice of rules engine (``setup.py``) and the name of the one loaded.

``setup.py``'s :func:`decide` is pure, so every case is checked here without building anything: compiled
by default, pure with ``UNO_AUDIT_COMPILE=0``, without a compiler, and always for an editable install;
pip's metadata steps neither compile nor say anything. CI builds the compiled engine for real (``.ci/run``).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

import service.rules.state
from service.cli.main import main
from service.rules.engine_kind import engine_kind

ROOT = Path(__file__).resolve().parent.parent


def _setup_py() -> ModuleType:
    """``setup.py`` as a module: imported, not run (it calls ``setup()`` only as ``__main__``)."""
    spec = importlib.util.spec_from_file_location("uno_audit_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SETUP = _setup_py()


def _has_all() -> None:
    return None


def _never() -> str | None:
    raise AssertionError("the toolchain was asked about, but the answer cannot change the choice")


def test_the_work_tree_runs_the_pure_engine() -> None:
    """The tests import the work tree (pytest's ``pythonpath``), never a compiled copy installed beside it."""
    assert Path(service.rules.state.__file__ or "").is_relative_to(ROOT / "service")
    assert engine_kind() == "pure"


def test_version_names_the_rules_engine(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])

    assert stopped.value.code == 0
    version = importlib.metadata.version("uno-audit")
    assert capsys.readouterr().out == f"uno-audit {version} (rules engine: pure)\n"


@pytest.mark.parametrize("setting", [None, "", "1"])
def test_a_wheel_is_compiled_by_default_and_with_1(setting: str | None) -> None:
    decision = SETUP.decide(setting, ["bdist_wheel", "--dist-dir", "/tmp/d"], _has_all)
    assert decision.compile
    assert decision.note is not None and "mypyc" in decision.note


def test_0_opts_out() -> None:
    decision = SETUP.decide("0", ["bdist_wheel"], _never)
    assert not decision.compile
    assert decision.note is not None and "UNO_AUDIT_COMPILE=0" in decision.note


#: pip install -e (PEP 660), the legacy ``setup.py develop``, and an in-place build of the extensions.
EDITABLE_ARGV = [
    ["editable_wheel", "--dist-dir", "/tmp/d"],
    ["develop"],
    ["build_ext", "--inplace"],
    ["build_ext", "-i"],
]


@pytest.mark.parametrize("argv", EDITABLE_ARGV)
@pytest.mark.parametrize("setting", [None, "1"])
def test_an_editable_install_stays_pure_even_when_asked(argv: list[str], setting: str | None) -> None:
    decision = SETUP.decide(setting, argv, _never)
    assert not decision.compile
    assert decision.note is not None and "editable" in decision.note


@pytest.mark.parametrize("argv", [["egg_info"], ["dist_info", "--output-dir", "/tmp/m"], ["sdist"]])
def test_pips_metadata_steps_neither_compile_nor_say_anything(argv: list[str]) -> None:
    assert SETUP.decide(None, argv, _never) == (False, None)


def test_without_a_compiler_the_build_falls_back_to_pure_python_in_one_line() -> None:
    decision = SETUP.decide(None, ["bdist_wheel"], lambda: "no C compiler (gcc)")
    assert not decision.compile
    assert decision.note is not None and "no C compiler (gcc)" in decision.note and "pure" in decision.note
    assert "\n" not in decision.note


def test_a_setting_other_than_0_or_1_is_refused() -> None:
    with pytest.raises(SystemExit, match="UNO_AUDIT_COMPILE"):
        SETUP.decide("yes", ["bdist_wheel"], _has_all)


def test_the_compiler_is_the_one_setuptools_would_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "/nonexistent/uno-audit-cc -O2")
    assert SETUP.lacking() == "no C compiler (/nonexistent/uno-audit-cc)"


def test_the_engine_name_is_read_from_an_interpreted_module() -> None:
    """Its check reads another module's file name; compiled, it would gain nothing and be one more .so."""
    assert "engine_kind.py" in SETUP.INTERPRETED
