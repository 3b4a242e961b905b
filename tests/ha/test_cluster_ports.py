"""deploy/ha/cluster.py ``--ports``: three distinct ports 1–65535, refused in one line otherwise, before
anything is made; the refusals need no cluster (a port in use and a cluster on other ports need the
packages, and skip without them)."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # deploy/ is not an installed package
    sys.path.insert(0, str(ROOT))

from deploy.ha.cluster import available, main, parse_ports  # noqa: E402

_missing = available()


@pytest.mark.parametrize(
    ("text", "ports"),
    [("6000,6001,6002", (6000, 6001, 6002)), (" 1, 65535 ,2", (1, 65535, 2))],
)
def test_three_distinct_ports_are_taken_in_order(text: str, ports: tuple[int, int, int]) -> None:
    assert parse_ports(text) == ports


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("6000,6001", "wants three ports"),
        ("6000,6001,6002,6003", "wants three ports"),
        ("", "wants three ports"),
        ("6000,x,6002", "'x' is not an integer"),
        ("6000,6001.5,6002", "'6001.5' is not an integer"),
        ("6000,,6002", "'' is not an integer"),
        ("0,6001,6002", "0 is not a port"),
        ("6000,65536,6002", "65536 is not a port"),
        ("6000,-1,6002", "-1 is not a port"),
        ("6000,6001,6000", "must differ"),
    ],
)
def test_anything_else_is_refused_in_one_line_before_the_base_is_made(
    text: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "ha"
    assert main(["--base", str(base), "--ports", text, "start"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert said in err and err.startswith("--ports") and err.count("\n") == 1
    assert not base.exists()


@pytest.mark.skipif(_missing is not None, reason=f"no HA PostgreSQL here: {_missing}")
def test_a_port_in_use_is_refused_before_anything_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        others = [free for free in (port + 1, port + 2) if 0 < free < 65536]
        assert len(others) == 2
        base = tmp_path / "ha"
        ports = f"{port},{others[0]},{others[1]}"
        assert main(["--base", str(base), "--ports", ports, "start"]) == 1
    err = capsys.readouterr().err
    assert f"{port} (monitor)" in err and err.count("\n") == 1
    assert not base.exists()


@pytest.mark.skipif(_missing is not None, reason=f"no HA PostgreSQL here: {_missing}")
def test_an_existing_cluster_keeps_its_ports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cluster.json").write_text(json.dumps({"monitor": 7000, "node1": 7001, "node2": 7002}))
    assert main(["--base", str(tmp_path), "--ports", "7000,7001,7002", "dsn"]) == 0
    assert "port=7001,7002 " in capsys.readouterr().out
    assert main(["--base", str(tmp_path), "--ports", "7000,7002,7001", "dsn"]) == 1
    err = capsys.readouterr().err
    assert "on ports 7000,7001,7002, not 7000,7002,7001" in err and err.count("\n") == 1
