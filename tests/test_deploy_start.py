"""The shipped deploys start as they are run: deploy/k8s/deployment.yaml's container and compose.yaml's
service, each twice (two replicas), with the example Secrets filled with test values.

Each replica runs the manifest's command, args and environment (only its ports moved: pods have a network
each, one machine has one), in a mount namespace whose root file system is read-only and whose one
writable volume is ``/tmp`` (the manifest's ``emptyDir``), from a working folder it cannot write, as uid
10001 when this machine's interpreter is reachable by that user, else as a root without capabilities.
Both replicas must reach SERVING and publish the same verifier key: the one of the Secret.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from service.checkpoints.keys import Signer, write_signer
from tests.postgres import SERVICE_PASSWORD
from uno_audit_client.gen.uno.audit.v1 import checkpoint_pb2 as cpb
from uno_audit_client.gen.uno.audit.v1 import checkpoint_pb2_grpc as cpb_grpc

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
UNO_AUDIT = Path(sys.executable).parent / "uno-audit"
#: The read-only root, a writable /tmp (kept: the tests' database socket and this interpreter may be there).
_NAMESPACE = 'mount --bind /tmp /tmp && mount -o remount,bind,ro / && exec "$@"'

pytestmark = pytest.mark.timeout(120)
#: A read-only root file system needs root, unshare and setpriv (util-linux).
contained = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("setpriv") is None,
    reason="a read-only root file system needs root, unshare and setpriv (util-linux)",
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _as_the_image_user() -> list[str]:
    """uid 10001 (the image's user) if it can run this interpreter, else root without capabilities: on a
    machine whose Python lives in root's home, uid 10001 cannot start it (again)."""
    without_capabilities = ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
    as_image = ["setpriv", "--reuid=10001", "--regid=10001", "--clear-groups", *without_capabilities]
    # A child of a child too: `serve --workers` starts its interpreter again, which is what may fail.
    again = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'pass'], check=True)"
    tried = subprocess.run([*as_image, sys.executable, "-c", again], capture_output=True, check=False)
    if tried.returncode == 0:
        return [*as_image, "--"]
    return ["setpriv", *without_capabilities, "--"]


@pytest.fixture
def reachable_socket(database_url: str) -> Iterator[None]:
    """The tests' private server listens on a socket in a folder only its owner may enter: opened to the
    replicas for the test, as a pod reaches its database over the network."""
    host = str(conninfo_to_dict(database_url).get("host", ""))
    folder = Path(host) if host.startswith("/") else None
    mode = folder.stat().st_mode if folder is not None else None
    if folder is not None:
        folder.chmod(0o711)
    try:
        yield
    finally:
        if folder is not None and mode is not None:
            folder.chmod(mode)


@pytest.fixture
def signing_key(tmp_path: Path) -> str:
    """A key as `uno-audit keygen` writes it: the text the Secret holds."""
    path = tmp_path / "checkpoint.key"
    write_signer(Signer.generate("uno-audit"), path)
    return path.read_text(encoding="utf-8").strip()


def _secret_values(service_url: str, key: str) -> dict[tuple[str, str], str]:
    login = conninfo_to_dict(service_url)
    login.pop("password", None)
    return {
        ("uno-audit", "database-url"): make_conninfo(**login),  # type: ignore[arg-type]
        ("uno-audit", "database-password"): SERVICE_PASSWORD,
        ("uno-audit", "admin-token"): "a" * 32,
        ("uno-audit", "checkpoint-key"): key,
    }


def _moved(args: list[str], ports: dict[str, int]) -> list[str]:
    """``args`` with each ``0.0.0.0:PORT`` listening on ``127.0.0.1`` at the port ``ports`` gives it."""
    moved = []
    for arg in args:
        host, _, port = arg.rpartition(":")
        moved.append(f"127.0.0.1:{ports[port]}" if host == "0.0.0.0" and port in ports else arg)
    return moved


def _start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    base = {"PATH": f"{UNO_AUDIT.parent}:/usr/bin:/bin", "LANG": "C.UTF-8"}
    with log.open("wb") as out:
        return subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", _NAMESPACE, "sh", *_as_the_image_user(),
             *command],
            env=base | env,
            cwd="/",  # the image's working folder is root-owned; here the whole root is read-only
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip


async def _serving_key(port: int, process: subprocess.Popen[bytes], log: Path) -> str:
    """Wait until the replica's whole server is SERVING; its current verifier key."""
    deadline = time.monotonic() + 60
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        health = health_pb2_grpc.HealthStub(channel)  # type: ignore[no-untyped-call]
        while True:
            if process.poll() is not None:
                raise AssertionError(f"the replica exited {process.returncode}: {log.read_text()[-2000:]}")
            try:
                reply = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=2)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    break
            except grpc.aio.AioRpcError:
                pass
            assert time.monotonic() < deadline, f"not SERVING within 60 s: {log.read_text()[-2000:]}"
            await asyncio.sleep(0.3)
        keys = await cpb_grpc.CheckpointServiceStub(channel).GetCheckpointKeys(cpb.GetCheckpointKeysRequest())  # type: ignore[no-untyped-call]
        return str(keys.keys[0].verifier_key)


async def _two_replicas(commands: list[tuple[list[str], dict[str, str], int]], tmp_path: Path) -> list[str]:
    processes = []
    try:
        for index, (command, env, _) in enumerate(commands):
            processes.append(
                (_start(command, env, tmp_path / f"replica{index}.log"), tmp_path / f"replica{index}.log")
            )
        return [
            await _serving_key(port, process, log)
            for (process, log), (_, _, port) in zip(processes, commands, strict=True)
        ]
    finally:
        for process, _ in processes:
            if process.poll() is None:
                os.killpg(process.pid, 15)
        for process, _ in processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)
                process.wait(5)


def _verifier(key: str) -> str:
    return Signer.parse(key).verifier.encode()


@contained
async def test_the_kubernetes_deployment_starts_twice_with_one_key(
    database_url: str, service_login: Any, reachable_socket: None, signing_key: str, tmp_path: Path
) -> None:
    deployment = yaml.safe_load((DEPLOY / "k8s" / "deployment.yaml").read_text(encoding="utf-8"))
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    values = _secret_values(await service_login.url(database_url), signing_key)
    env = {
        item["name"]: values[
            (item["valueFrom"]["secretKeyRef"]["name"], item["valueFrom"]["secretKeyRef"]["key"])
        ]
        for item in container["env"]
    }
    assert [Path(part).name for part in container["command"]] == ["uno-audit"]
    replicas = []
    for _ in range(2):
        grpc_port, metrics_port = _free_port(), _free_port()
        args = _moved(container["args"], {"50051": grpc_port, "9464": metrics_port})
        replicas.append(([str(UNO_AUDIT), *args], env, grpc_port))
    keys = await _two_replicas(replicas, tmp_path)
    assert keys == [_verifier(signing_key)] * 2


@contained
async def test_the_compose_service_starts_twice_with_one_key(
    database_url: str, service_login: Any, reachable_socket: None, signing_key: str, tmp_path: Path
) -> None:
    service = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))["services"]["uno-audit"]
    login = conninfo_to_dict(await service_login.url(database_url))
    login.pop("password", None)
    # Compose fills ${VAR:?…} from the operator's environment: these are the values an operator sets.
    operator = {
        "UNO_AUDIT_SERVICE_PASSWORD": SERVICE_PASSWORD,
        "UNO_AUDIT_ADMIN_TOKEN": "b" * 32,
        "UNO_AUDIT_CHECKPOINT_KEY": signing_key,
    }
    env = {}
    for name, value in service["environment"].items():
        if value.startswith("${"):
            env[name] = operator[value[2:].split(":", 1)[0]]
        else:  # the database's URL names the compose network's host: here the tests' server
            env[name] = make_conninfo(**login) if name == "DATABASE_URL" else value  # type: ignore[arg-type]
    dockerfile = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    cmd = yaml.safe_load(next(line for line in dockerfile.splitlines() if line.startswith("CMD "))[4:])
    replicas = []
    for _ in range(2):
        port = _free_port()
        replicas.append(([str(UNO_AUDIT), *_moved(cmd, {"50051": port})], env, port))
    keys = await _two_replicas(replicas, tmp_path)
    assert keys == [_verifier(signing_key)] * 2


def test_serve_on_a_server_database_without_a_key_is_refused_in_one_line(tmp_path: Path) -> None:
    """Never a key of its own in its working folder: one line saying what to set, exit 2, nothing made."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL" and not k.startswith("UNO_AUDIT_")}
    done = subprocess.run(
        [str(UNO_AUDIT), "serve", "--database-url", "postgresql://uno_audit_service@db.invalid/uno_audit"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "uno-audit serve: a server database needs the signing key every replica shares: set "
        "$UNO_AUDIT_CHECKPOINT_KEY or --checkpoint-key-file (make one with `uno-audit keygen --name "
        "uno-audit --out FILE`)"
    ]
    assert list(tmp_path.iterdir()) == []
