"""A highly available PostgreSQL on one machine: a pg_auto_failover monitor and two nodes, the secondary in
synchronous replication, each on its own port and folder under one base folder (docs/HA.md).

    python deploy/ha/cluster.py [--base DIR] [--ports M,N1,N2] start | stop [--keep] | status [--json]
                                dsn [--user U] | switchover | kill-postmaster NODE | kill-node NODE
                                stop-node NODE | run-node NODE | backup DEST

Standard library only, so that a person runs it with any Python 3.11; ``stop`` leaves nothing behind
unless ``--keep``. As root, PostgreSQL and pg_autoctl run as the ``postgres`` user through ``setpriv``.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATABASE = "uno_audit"
NODES = ("node1", "node2")
DEFAULT_BASE = Path(os.environ.get("UNO_AUDIT_HA_BASE", "/tmp/uno-audit-ha"))
#: The monitor's health checks, shortened from 5 s and 20 s: on one machine a node that does not answer
#: for 5 s is gone, and the service's clients retry meanwhile (docs/HA.md, "Failover").
MONITOR_SETTINGS = {
    "pgautofailover.health_check_period": "1000",
    "pgautofailover.health_check_timeout": "1000",
    "pgautofailover.health_check_max_retries": "1",
    "pgautofailover.health_check_retry_delay": "500",
    "pgautofailover.node_considered_unhealthy_timeout": "5000",
    # Before promoting, the monitor waits this long for a lost primary to have demoted itself (its keeper
    # does after KEEPER_PARTITION_TIMEOUT alone): 30 s by default, most of a failover's time.
    "pgautofailover.primary_demote_timeout": "10000",
}
#: Seconds a keeper that reaches neither the monitor nor a standby waits before demoting its primary; must
#: stay below the monitor's primary_demote_timeout, so that two primaries never coexist. Even then, the
#: old primary's commits would wait for a standby that no longer follows it: none could be acknowledged.
KEEPER_PARTITION_TIMEOUT = "5"
#: pg_autoctl sizes memory for a machine of its own (GBs of shared_buffers); three servers share this one.
NODE_SETTINGS = {
    "shared_buffers": "'128MB'",
    "effective_cache_size": "'1GB'",
    "maintenance_work_mem": "'64MB'",
    "work_mem": "'4MB'",
    "wal_keep_size": "'512MB'",
    "max_connections": "100",
}
MARKER = "# deploy/ha/cluster.py\n"


class ClusterError(RuntimeError):
    """A step of the cluster failed; the message says which, with pg_autoctl's last words."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def parse_ports(text: str) -> tuple[int, int, int]:
    """``--ports``: the monitor's, node1's and node2's ports, three distinct integers 1–65535; a
    ``ValueError`` saying in one line what is wrong otherwise."""
    parts = [part.strip() for part in text.split(",")]
    if len(parts) != 3:
        raise ValueError(
            f"--ports wants three ports, monitor,node1,node2 (e.g. 6000,6001,6002), not {text!r}"
        )
    ports: list[int] = []
    for part in parts:
        try:
            port = int(part, 10)
        except ValueError:
            raise ValueError(f"--ports: {part!r} is not an integer") from None
        if not 1 <= port <= 65535:
            raise ValueError(f"--ports: {port} is not a port (1–65535)")
        ports.append(port)
    if len(set(ports)) != 3:
        raise ValueError(f"--ports: the three ports must differ, not {text!r}")
    return ports[0], ports[1], ports[2]


def _taken(port: int) -> bool:
    """Whether something already listens on (or holds) ``port`` on 127.0.0.1 (a connection of a stopped
    server left in TIME_WAIT does not count: PostgreSQL binds past it too)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _bindir() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parts[-3]))
    if not found:
        raise ClusterError("no PostgreSQL under /usr/lib/postgresql (apt-get install postgresql-15)")
    return found[-1].parent


def available() -> str | None:
    """Why the cluster cannot run here (``None`` when it can): the packages it needs."""
    if shutil.which("pg_autoctl") is None:
        return (
            "pg_autoctl is not installed (apt-get install pg-auto-failover-cli postgresql-15-auto-failover)"
        )
    try:
        bindir = _bindir()
    except ClusterError as error:
        return str(error)
    libdir = Path(f"/usr/lib/postgresql/{bindir.parts[-2]}/lib")
    if not (libdir / "pgautofailover.so").exists():
        return f"the pgautofailover extension is missing in {libdir} (postgresql-15-auto-failover)"
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return "running as root needs setpriv (util-linux)"
    return None


@dataclass
class Node:
    name: str
    port: int
    pgdata: Path


class Cluster:
    """The monitor and the two nodes under ``base``; their ports are kept in ``base/cluster.json``.

    ``ports`` (the monitor's, node1's, node2's) are the ones a new cluster takes instead of free ones; an
    existing cluster on other ports is refused (:class:`ClusterError`)."""

    def __init__(self, base: Path, ports: tuple[int, int, int] | None = None) -> None:
        self.base = base.resolve()
        self.account = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
        self.bindir = _bindir()
        self.monitor = Node("monitor", 0, self.base / "monitor")
        self.nodes = {name: Node(name, 0, self.base / name) for name in NODES}
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.ports = ports
        state = self.base / "cluster.json"
        if state.exists():
            kept = json.loads(state.read_text())
            self.monitor.port = int(kept["monitor"])
            for name, node in self.nodes.items():
                node.port = int(kept[name])
            have = (self.monitor.port, *(node.port for node in self.nodes.values()))
            if ports is not None and have != ports:
                raise ClusterError(
                    f"{self.base} holds a cluster on ports {','.join(map(str, have))}, "
                    f"not {','.join(map(str, ports))}"
                )

    @property
    def superuser(self) -> str:
        """The login initdb made: the system user the servers run as."""
        return self.account.pw_name if self.account is not None else getpass.getuser()

    # --- running pg_autoctl -----------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        # Its configuration and pid files under the base folder, not the account's home or /tmp: two
        # clusters (CI beside a person's) must never see each other's.
        return {
            "HOME": str(self.base),
            "XDG_CONFIG_HOME": str(self.base / "config"),
            "XDG_DATA_HOME": str(self.base / "share"),
            "XDG_RUNTIME_DIR": str(self.base / "run"),
            "PATH": f"{self.bindir}:/usr/bin:/bin",
            "PG_CONFIG": str(self.bindir / "pg_config"),
            "LANG": "C.UTF-8",
        }

    def _command(self, *args: str) -> list[str]:
        return self.as_account(
            ["env", "-i", *(f"{k}={v}" for k, v in self._env().items()), "pg_autoctl", *args]
        )

    def as_account(self, command: list[str]) -> list[str]:
        """``command``, run as the servers' system user when we are root."""
        if self.account is None:
            return command
        # setpriv rather than Popen(user=...): changing user makes subprocess fork instead of vfork, which
        # runs gRPC's fork handlers in the child when a gRPC program (the bench) calls this.
        return [
            "setpriv", f"--reuid={self.account.pw_uid}", f"--regid={self.account.pw_gid}",
            "--clear-groups", "--", *command,
        ]  # fmt: skip

    def ctl(self, *args: str, timeout: float = 120) -> str:
        done = subprocess.run(
            self._command(*args), capture_output=True, text=True, timeout=timeout, cwd=self.base, check=False
        )
        if done.returncode != 0:
            tail = " | ".join(done.stderr.strip().splitlines()[-4:])
            raise ClusterError(f"pg_autoctl {' '.join(args)} failed ({done.returncode}): {tail}")
        return done.stdout

    def _mkdir(self, path: Path) -> None:
        path.mkdir(mode=0o755, exist_ok=True)
        if self.account is not None:
            os.chown(path, self.account.pw_uid, self.account.pw_gid)

    def _settings(self, pgdata: Path, settings: dict[str, str]) -> None:
        # postgresql.auto.conf is read last and survives pg_autoctl's own ALTER SYSTEM (which keeps the
        # other lines); the secondary's copy comes with pg_basebackup, hence the marker.
        auto = pgdata / "postgresql.auto.conf"
        text = auto.read_text() if auto.exists() else ""
        if MARKER not in text:
            with auto.open("a") as out:
                out.write(MARKER + "".join(f"{k} = {v}\n" for k, v in settings.items()))

    def run(self, node: Node) -> None:
        """``pg_autoctl run`` for ``node`` in a session of its own (its group is its postgres too)."""
        log = (self.base / f"{node.name}.log").open("ab")
        with log:
            process = subprocess.Popen(
                self._command("run", "--pgdata", str(node.pgdata)),
                cwd=self.base,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes[node.name] = process
        (self.base / f"{node.name}.pid").write_text(str(process.pid))

    # --- the cluster ------------------------------------------------------------------------------------

    def start(self, timeout: float = 120) -> None:
        """Create what is missing, run all three, and wait until the secondary is in sync."""
        fresh = not (self.base / "cluster.json").exists()
        if fresh:
            if self.base.exists() and any(self.base.iterdir()):
                raise ClusterError(f"{self.base} holds files but no cluster.json: not a cluster's folder")
            if self.ports is not None:  # the caller's, checked before anything is made
                names = ("monitor", *NODES)
                taken = [
                    f"{port} ({name})" for name, port in zip(names, self.ports, strict=True) if _taken(port)
                ]
                if taken:
                    raise ClusterError(f"--ports: in use on 127.0.0.1: {', '.join(taken)}")
            self.base.mkdir(parents=True, exist_ok=True)
            chosen = self.ports or (free_port(), free_port(), free_port())
            self.monitor.port = chosen[0]
            for node, port in zip(self.nodes.values(), chosen[1:], strict=True):
                node.port = port
            ports = {"monitor": self.monitor.port, **{n.name: n.port for n in self.nodes.values()}}
            (self.base / "cluster.json").write_text(json.dumps(ports))
        self.base.chmod(0o755)
        self._mkdir(self.base)
        for sub in ("config", "share", "run"):
            self._mkdir(self.base / sub)
        if fresh:
            self.ctl(
                "create", "monitor", "--pgdata", str(self.monitor.pgdata), "--pgport", str(self.monitor.port),
                "--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl",
            )  # fmt: skip
            self.ctl("config", "set", "--pgdata", str(self.monitor.pgdata),
                     "postgresql.listen_addresses", "127.0.0.1")  # fmt: skip
            self._settings(self.monitor.pgdata, MONITOR_SETTINGS)
        self.run(self.monitor)
        self._wait(lambda: self._monitor_up(), timeout, "the monitor did not start")
        for node in self.nodes.values():
            if not node.pgdata.exists():
                # One at a time: the first registered is the primary, the second is made from it.
                self.ctl(
                    "create", "postgres", "--pgdata", str(node.pgdata), "--pgport", str(node.port),
                    "--pghost", "127.0.0.1", "--hostname", "127.0.0.1", "--listen", "127.0.0.1",
                    "--name", node.name, "--dbname", DATABASE, "--monitor", self.monitor_uri(),
                    "--auth", "trust", "--no-ssl", "--replication-quorum", "true",
                    timeout=300,
                )  # fmt: skip
                self._settings(node.pgdata, NODE_SETTINGS)
                self.ctl("config", "set", "--pgdata", str(node.pgdata),
                         "timeout.network_partition_timeout", KEEPER_PARTITION_TIMEOUT)  # fmt: skip
            self.run(node)
            if node.name == NODES[0] and fresh:  # alone, it is "single" until the second one joins
                self._wait(lambda: self._in("single") or self.primary(), timeout, "no primary")
        self.wait_healthy(timeout)

    def _monitor_up(self) -> bool:
        try:
            self.state()
        except (ClusterError, subprocess.TimeoutExpired, json.JSONDecodeError):
            return False
        return True

    @staticmethod
    def _wait(done: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if done():
                return
            time.sleep(0.2)
        raise ClusterError(f"{what} within {timeout:.0f} s")

    def monitor_uri(self) -> str:
        return f"postgres://autoctl_node@127.0.0.1:{self.monitor.port}/pg_auto_failover?sslmode=disable"

    def state(self) -> list[dict[str, Any]]:
        """The monitor's view of each node (``pg_autoctl show state --json``)."""
        out = self.ctl("show", "state", "--pgdata", str(self.monitor.pgdata), "--json", timeout=15)
        nodes: list[dict[str, Any]] = json.loads(out) if out.strip() else []
        return nodes

    def _in(self, wanted: str) -> str | None:
        for node in self.state():
            if node["current_group_state"] == wanted == node["assigned_group_state"]:
                return str(node["nodename"])
        return None

    def primary(self) -> str | None:
        """The node the monitor has as primary, settled; ``None`` while a failover is under way."""
        return self._in("primary")

    def secondary(self) -> str | None:
        return self._in("secondary")

    def timeline(self) -> int:
        """The highest timeline a node reports: one more after each promotion, planned or not."""
        return max((int(node["reported_tli"]) for node in self.state()), default=0)

    def wait_healthy(self, timeout: float = 120) -> tuple[str, str]:
        """Wait until one node is primary and the other a synchronous secondary; (primary, secondary)."""
        found: list[tuple[str, str]] = []

        def healthy() -> bool:
            with contextlib.suppress(ClusterError, subprocess.TimeoutExpired, json.JSONDecodeError):
                primary, secondary = self.primary(), self.secondary()
                if primary is not None and secondary is not None:
                    found.append((primary, secondary))
                    return True
            return False

        self._wait(healthy, timeout, "no primary with a synchronous secondary")
        return found[-1]

    def dsn(self, user: str | None = None, *, standby: bool = False) -> str:
        """The multi-host DSN: libpq tries both nodes and keeps the one that takes writes (with
        ``standby``: the one that does not, for the reads that may lag)."""
        ports = ",".join(str(node.port) for node in self.nodes.values())
        attrs = "standby" if standby else "read-write"
        return (
            f"host=127.0.0.1,127.0.0.1 port={ports} dbname={DATABASE} user={user or self.superuser} "
            f"target_session_attrs={attrs} connect_timeout=3"
        )

    def switchover(self) -> None:
        """A planned switchover: the secondary is promoted once it has everything, the primary demoted."""
        self.ctl("perform", "switchover", "--pgdata", str(self.monitor.pgdata), timeout=120)

    def postmaster_pid(self, name: str) -> int | None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int((self.nodes[name].pgdata / "postmaster.pid").read_text().split()[0])
        return None

    def kill_postmaster(self, name: str) -> None:
        """``kill -9`` of the node's postmaster (its keeper starts it again, the monitor decides the rest)."""
        pid = self.postmaster_pid(name)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _keeper_pid(self, name: str) -> int | None:
        with contextlib.suppress(OSError, ValueError):
            return int((self.base / f"{name}.pid").read_text())
        return None

    def kill_node(self, name: str) -> None:
        """``kill -9`` of the node's keeper, postmaster and everything of its group: the machine is gone."""
        pid = self._keeper_pid(name)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        self.kill_postmaster(name)
        self._reap(name)

    def stop_node(self, name: str, timeout: float = 60) -> None:
        """A graceful stop of the node's keeper and its postgres (``pg_autoctl stop``)."""
        node = self.monitor if name == "monitor" else self.nodes[name]
        with contextlib.suppress(ClusterError):
            self.ctl("stop", "--pgdata", str(node.pgdata), timeout=30)
        pid = self._keeper_pid(name)
        deadline = time.monotonic() + timeout
        while pid is not None and self._running(name, pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if pid is not None and self._running(name, pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        self._reap(name)

    def _running(self, name: str, pid: int) -> bool:
        process = self.processes.get(name)
        if process is not None and process.pid == pid:  # our child: a zombie until reaped
            return process.poll() is None
        return _alive(pid)

    def run_node(self, name: str) -> None:
        self.run(self.nodes[name])

    def _reap(self, name: str) -> None:
        process = self.processes.pop(name, None)
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(10)

    def stop(self, keep: bool = False) -> None:
        """Stop the monitor first (no failover while the nodes stop), then the nodes; remove the folder
        unless ``keep``. Safe on a half-started or already stopped cluster."""
        if not self.base.exists():
            return
        for name in ("monitor", *NODES):
            self.stop_node(name)
        for node in (self.monitor, *self.nodes.values()):  # a postmaster that outlived its keeper
            with contextlib.suppress(OSError, ValueError, IndexError):
                pid = int((node.pgdata / "postmaster.pid").read_text().split()[0])
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)
        if not keep:
            shutil.rmtree(self.base, ignore_errors=True)

    def backup(self, destination: Path) -> None:
        """A base backup of the primary with the WAL it needs (``pg_basebackup -X stream``), checked by
        ``pg_verifybackup``."""
        # A primary running alone (wait_primary: its standby away) is backed up as well.
        primary = self.primary() or self._in("wait_primary")
        if primary is None:
            raise ClusterError("no settled primary to back up")
        port = self.nodes[primary].port
        for program, args in (
            ("pg_basebackup", ["-h", "127.0.0.1", "-p", str(port), "-U", self.superuser, "-D",
                               str(destination), "-X", "stream", "-c", "fast", "--no-sync"]),
            ("pg_verifybackup", [str(destination)]),
        ):  # fmt: skip
            done = subprocess.run(
                [str(self.bindir / program), *args], capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                raise ClusterError(f"{program} failed: {done.stderr.strip()}")


def restore(cluster: Cluster, backup: Path, pgdata: Path) -> str:
    """Start a lone server on a copy of ``backup`` in ``pgdata``, on a free port; its DSN. A restored node
    has no standby yet, so it waits for none (else its commits would wait for ever)."""
    shutil.copytree(backup, pgdata)
    for name in ("standby.signal", "recovery.signal", "postmaster.pid"):
        (pgdata / name).unlink(missing_ok=True)
    port = free_port()
    with (pgdata / "postgresql.auto.conf").open("a") as out:
        out.write(f"port = {port}\nsynchronous_standby_names = ''\nprimary_conninfo = ''\n")
    if cluster.account is not None:
        for path in (pgdata, *pgdata.rglob("*")):
            os.chown(path, cluster.account.pw_uid, cluster.account.pw_gid)
    pgdata.chmod(0o700)
    _pg_ctl(cluster, pgdata, "start", "-w", "-l", str(pgdata / "restored.log"))
    return f"host=127.0.0.1 port={port} dbname={DATABASE} user={cluster.superuser} connect_timeout=3"


def stop_restored(cluster: Cluster, pgdata: Path) -> None:
    """Stop a server :func:`restore` started, and remove its folder."""
    _pg_ctl(cluster, pgdata, "stop", "-m", "fast", "-w")
    shutil.rmtree(pgdata, ignore_errors=True)


def _pg_ctl(cluster: Cluster, pgdata: Path, *args: str) -> None:
    command = cluster.as_account([str(cluster.bindir / "pg_ctl"), "-D", str(pgdata), *args])
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise ClusterError(f"pg_ctl {args[0]} failed: {done.stderr.strip() or done.stdout.strip()}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="a pg_auto_failover monitor and two PostgreSQL nodes")
    parser.add_argument(
        "--base", type=Path, default=DEFAULT_BASE, help=f"its folder (default {DEFAULT_BASE})"
    )
    parser.add_argument(
        "--ports",
        metavar="M,N1,N2",
        help="the monitor's, node1's and node2's ports for a new cluster (default: free ones)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("start", help="create or start the cluster; print the DSN when the secondary is in sync")
    stop = sub.add_parser("stop", help="stop everything and remove the folder")
    stop.add_argument("--keep", action="store_true", help="keep the folder, to start it again")
    status = sub.add_parser("status", help="each node's state")
    status.add_argument("--json", action="store_true")
    dsn = sub.add_parser("dsn", help="the multi-host DSN")
    dsn.add_argument("--user", help="the login (default: the servers' superuser)")
    dsn.add_argument("--standby", action="store_true", help="the standby's, for the reads that may lag")
    sub.add_parser("switchover", help="a planned switchover")
    for name in ("kill-postmaster", "kill-node", "stop-node", "run-node"):
        sub.add_parser(name).add_argument("node", choices=NODES)
    backup = sub.add_parser("backup", help="pg_basebackup of the primary into DEST, verified")
    backup.add_argument("destination", type=Path)
    args = parser.parse_args(argv)
    ports: tuple[int, int, int] | None = None
    if args.ports is not None:
        try:
            ports = parse_ports(args.ports)
        except ValueError as error:
            print(error, file=sys.stderr)
            return 2
    if args.command == "stop" and not args.base.exists():
        return 0
    why = available()
    if why is not None:
        print(why, file=sys.stderr)
        return 2
    try:
        cluster = Cluster(args.base, ports)
        if args.command == "start":
            try:
                cluster.start()
            except BaseException:
                cluster.stop(keep=True)  # nothing left running; the folder shows what failed
                raise
            print(cluster.dsn())
        elif args.command == "stop":
            cluster.stop(keep=args.keep)
        elif args.command == "status":
            state = cluster.state()
            if args.json:
                print(json.dumps(state, indent=2))
            for node in [] if args.json else state:
                print(
                    f"{node['nodename']} 127.0.0.1:{node['nodeport']} {node['current_group_state']} "
                    f"(assigned {node['assigned_group_state']}) lsn {node['reported_lsn']}"
                )
        elif args.command == "dsn":
            print(cluster.dsn(args.user, standby=args.standby))
        elif args.command == "switchover":
            cluster.switchover()
            print("primary: {} secondary: {}".format(*cluster.wait_healthy()))
        elif args.command == "backup":
            cluster.backup(args.destination)
        else:
            getattr(cluster, args.command.replace("-", "_"))(args.node)
    except ClusterError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
