"""TLS on the gRPC port, with certificates made here (a CA, the server's for 127.0.0.1 and localhost, a
client's): TLS clients work, plaintext ones are refused; with a client CA (mutual TLS) a client without a
certificate, or with one of another CA, is refused; the command line refuses unusable files in one line."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from projections.migrate import apply_migrations
from service.api.config import ServeConfig
from service.api.server import RunningServer, start_server
from service.api.tls import TLSError, channel_credentials, server_tls
from service.client.bots import run_bots
from service.rules.options import Variant
from tests.signing import SERVE_KEY
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import ADMIN_TOKEN, deal_from, new_id

if TYPE_CHECKING:
    from tests.conftest import ServiceLogin

pytestmark = pytest.mark.timeout(120)

UNO_AUDIT = Path(sys.executable).with_name("uno-audit")


@dataclass(frozen=True)
class Issued:
    """A certificate and its key, as PEM files."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Authority:
    cert: Path
    key: ec.EllipticCurvePrivateKey
    name: x509.Name

    def issue(self, folder: Path, stem: str, *, server: bool) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, stem)]))
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        if server:
            names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
            usage = ExtendedKeyUsageOID.SERVER_AUTH
        else:
            usage = ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return _write(folder, stem, cert, key)


def _write(folder: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Issued:
    cert_path, key_path = folder / f"{stem}.crt", folder / f"{stem}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return Issued(cert_path, key_path)


def authority(folder: Path, stem: str) -> Authority:
    """A self-signed CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{stem} test CA")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return Authority(_write(folder, stem, cert, key).cert, key, name)


@dataclass(frozen=True)
class Certificates:
    ca: Authority
    server: Issued
    client: Issued
    stranger: Issued  # a client certificate of another CA


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Certificates]:
    folder = tmp_path_factory.mktemp("tls")
    ca = authority(folder, "ca")
    other = authority(folder, "other")
    yield Certificates(
        ca,
        ca.issue(folder, "server", server=True),
        ca.issue(folder, "client", server=False),
        other.issue(folder, "stranger", server=False),
    )


async def _tls_server(
    database_url: str, service_login: ServiceLogin, certificates: Certificates, *, mutual: bool
) -> RunningServer:
    await apply_migrations(database_url)
    tls = server_tls(
        certificates.server.cert, certificates.server.key, certificates.ca.cert if mutual else None
    )
    return await start_server(
        ServeConfig(
            listen="127.0.0.1:0",
            database_url=await service_login.url(database_url),
            admin_token=ADMIN_TOKEN,
            projector=False,
            tls=tls,
        )
    )


@pytest.fixture
async def tls_server(
    database_url: str, service_login: ServiceLogin, certificates: Certificates
) -> AsyncIterator[RunningServer]:
    running = await _tls_server(database_url, service_login, certificates, mutual=False)
    try:
        yield running
    finally:
        await running.stop(grace=1.0)


@pytest.fixture
async def mutual_server(
    database_url: str, service_login: ServiceLogin, certificates: Certificates
) -> AsyncIterator[RunningServer]:
    running = await _tls_server(database_url, service_login, certificates, mutual=True)
    try:
        yield running
    finally:
        await running.stop(grace=1.0)


def _create() -> pb.CreateGameRequest:
    return pb.CreateGameRequest(command_id=new_id(), variant=pb.CLASSIC, players=["a", "b"])


async def _creates(address: str, credentials: grpc.ChannelCredentials | None) -> grpc.StatusCode:
    """Create a game over a channel with ``credentials`` (plaintext for none): OK, or the failure's code."""
    channel = (
        grpc.aio.insecure_channel(address)
        if credentials is None
        else grpc.aio.secure_channel(address, credentials)
    )
    async with channel:
        stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
        try:
            reply: pb.CreateGameReply = await stub.CreateGame(_create(), timeout=10)
        except grpc.aio.AioRpcError as error:
            return error.code()
        assert len(reply.seats) == 2
        return grpc.StatusCode.OK


async def test_tls_clients_work_and_plaintext_ones_are_refused(
    tls_server: RunningServer, certificates: Certificates
) -> None:
    for host in ("127.0.0.1", "localhost"):  # the certificate names both
        address = f"{host}:{tls_server.port}"
        assert await _creates(address, channel_credentials(certificates.ca.cert)) is grpc.StatusCode.OK
    address = f"127.0.0.1:{tls_server.port}"
    assert await _creates(address, None) is grpc.StatusCode.UNAVAILABLE
    # A client that does not trust the server's CA (only the system's) is refused by its own side.
    assert await _creates(address, grpc.ssl_channel_credentials()) is grpc.StatusCode.UNAVAILABLE
    # The bots take credentials and play a whole game over TLS.
    summary = await run_bots(
        address,
        games=1,
        variant=Variant.CLASSIC,
        players=2,
        concurrency=1,
        target_score=1,
        credentials=channel_credentials(certificates.ca.cert),
    )
    assert (summary.games, summary.rejected) == (1, 0)


async def test_mutual_tls_wants_a_client_certificate_of_its_ca(
    mutual_server: RunningServer, certificates: Certificates
) -> None:
    address = f"127.0.0.1:{mutual_server.port}"
    ca = certificates.ca.cert
    client, stranger = certificates.client, certificates.stranger
    assert await _creates(address, channel_credentials(ca, client.cert, client.key)) is grpc.StatusCode.OK
    assert await _creates(address, channel_credentials(ca)) is grpc.StatusCode.UNAVAILABLE
    assert (
        await _creates(address, channel_credentials(ca, stranger.cert, stranger.key))
        is grpc.StatusCode.UNAVAILABLE
    )
    assert await _creates(address, None) is grpc.StatusCode.UNAVAILABLE


def test_unusable_files_are_refused_naming_them(certificates: Certificates, tmp_path: Path) -> None:
    server, client = certificates.server, certificates.client
    with pytest.raises(TLSError, match="needs its key"):
        server_tls(server.cert, None, None)
    with pytest.raises(TLSError, match="needs its certificate"):
        server_tls(None, server.key, None)
    with pytest.raises(TLSError, match="client CA"):
        server_tls(None, None, certificates.ca.cert)
    with pytest.raises(TLSError, match=f"{server.cert}.*{client.key}"):  # a key of another certificate
        server_tls(server.cert, client.key, None)
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(TLSError, match=str(garbage)):
        server_tls(server.cert, server.key, garbage)
    with pytest.raises(TLSError, match=str(tmp_path / "missing.crt")):
        channel_credentials(tmp_path / "missing.crt")
    assert server_tls(None, None, None) is None
    assert channel_credentials(None) is None


@pytest.mark.parametrize(
    "command",
    [
        ("serve", "--tls-cert", "{cert}"),
        ("serve", "--tls-cert", "{cert}", "--tls-key", "{other_key}"),
        ("serve", "--tls-client-ca", "{ca}"),
        ("bots", "--variant", "classic", "--tls-ca", "{ca}", "--tls-cert", "{cert}"),
        ("health", "--tls-ca", "{missing}"),
    ],
    ids=[
        "cert-without-key",
        "key-of-another-cert",
        "client-ca-alone",
        "bots-cert-without-key",
        "health-no-ca",
    ],
)
def test_the_command_line_refuses_unusable_tls_in_one_line(
    command: tuple[str, ...], certificates: Certificates, tmp_path: Path
) -> None:
    files = {
        "cert": certificates.server.cert,
        "other_key": certificates.client.key,
        "ca": certificates.ca.cert,
        "missing": tmp_path / "missing.crt",
    }
    argv = [part.format(**files) for part in command]
    # The serve cases fail before any database is looked for: a URL that answers nothing proves it.
    done = subprocess.run(
        [str(UNO_AUDIT), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"},
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"uno-audit {command[0]}: "), done.stderr
    assert "Traceback" not in done.stderr


async def test_the_bots_command_plays_over_tls(
    tls_server: RunningServer, certificates: Certificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    deal_from(monkeypatch, 6)  # the server runs in this process: the same short round each run
    bots = await asyncio.create_subprocess_exec(
        str(UNO_AUDIT), "bots", "--server", f"localhost:{tls_server.port}", "--tls-ca",
        str(certificates.ca.cert), "--games", "1", "--variant", "classic", "--players", "2",
        "--target-score", "1",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    printed, errors = await asyncio.wait_for(bots.communicate(), 100)
    assert bots.returncode == 0, errors.decode()
    assert b'"games": 1' in printed


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _health(address: str, ca: Path) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        [str(UNO_AUDIT), "health", "--server", address, "--tls-ca", str(ca), "--timeout", "2"],
        capture_output=True,
        text=True,
        timeout=30,
    )


async def test_serve_as_a_process_with_tls_and_metrics(
    database_url: str, service_login: ServiceLogin, certificates: Certificates, tmp_path: Path
) -> None:
    """``uno-audit serve --tls-cert --tls-key`` with the metrics address from its variable: ``health
    --tls-ca`` finds it SERVING, the endpoint counts that check, SIGTERM stops both."""
    await apply_migrations(database_url)
    address, metrics = f"localhost:{_free_port()}", f"127.0.0.1:{_free_port()}"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "UNO_AUDIT_ADMIN_TOKEN")}
    env["UNO_AUDIT_METRICS_LISTEN"] = metrics
    env.update(SERVE_KEY)
    server_cert = certificates.server
    with (tmp_path / "serve.err").open("wb") as stderr:
        server = await asyncio.create_subprocess_exec(
            str(UNO_AUDIT), "serve", "--listen", address, "--no-projector",
            "--database-url", await service_login.url(database_url),
            "--tls-cert", str(server_cert.cert), "--tls-key", str(server_cert.key),
            env=env, stdout=asyncio.subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while (checked := await _health(address, certificates.ca.cert)).returncode != 0:
            assert server.returncode is None, (tmp_path / "serve.err").read_text()
            assert time.monotonic() < deadline, checked.stderr
            await asyncio.sleep(0.2)
        assert checked.stdout.strip().endswith("server: SERVING")
        scraped = await asyncio.to_thread(urllib.request.urlopen, f"http://{metrics}/metrics", timeout=10)
        text = scraped.read().decode()
        assert (
            'grpc_server_handled_total{grpc_code="OK",grpc_method="Check",'
            'grpc_service="grpc.health.v1.Health",grpc_type="unary"} 1.0'
        ) in text
    finally:
        if server.returncode is None:
            server.send_signal(signal.SIGTERM)
        returned = await asyncio.wait_for(server.wait(), 30)
    assert returned == 0, (tmp_path / "serve.err").read_text()
    with pytest.raises(urllib.error.URLError):
        await asyncio.to_thread(urllib.request.urlopen, f"http://{metrics}/metrics", timeout=5)
