"""TLS for the gRPC port: the server's certificate and key, optionally a CA its clients' certificates must
chain to (mutual TLS), and the clients' side (the CA to trust, and their own certificate for mutual TLS).

Files are PEM. They are checked when read, with the standard library's ``ssl`` (a certificate that does
not parse, a key that is not the certificate's, a CA file with no certificate), so that a mistake is one
line naming the file at start-up: gRPC itself would only log its complaint and refuse every connection.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc


class TLSError(Exception):
    """A certificate, key or CA file that cannot be used (the message names the file and why)."""


@dataclass(frozen=True, slots=True)
class ServerTLS:
    """The server's certificate chain and private key (PEM), and the CA of the clients' certificates when
    every client must present one."""

    certificate_chain: bytes
    private_key: bytes
    client_ca: bytes | None = None

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.private_key, self.certificate_chain)],
            root_certificates=self.client_ca,
            require_client_auth=self.client_ca is not None,
        )


def _read(kind: str, path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise TLSError(f"cannot read the {kind} {path}: {error.strerror or error}") from None


def _key_pair(kind: str, certificate: Path | None, key: Path | None) -> tuple[bytes, bytes] | None:
    """The certificate and key files' contents, checked to belong together; ``None`` for neither."""
    if certificate is None and key is None:
        return None
    if certificate is None or key is None:
        given, missing = ("certificate", "key") if key is None else ("key", "certificate")
        raise TLSError(f"a {kind} {given} needs its {missing} as well")
    try:
        ssl.create_default_context().load_cert_chain(certificate, key)
    except OSError as error:  # ssl.SSLError is one: a PEM that does not parse, or a key of another cert
        reason = error.strerror if error.strerror else str(error)
        raise TLSError(f"the {kind} certificate {certificate} and key {key} are unusable: {reason}") from None
    return _read(f"{kind} certificate", certificate), _read(f"{kind} key", key)


def _authority(path: Path) -> bytes:
    try:
        ssl.create_default_context(cafile=path)
    except OSError as error:
        reason = error.strerror if error.strerror else str(error)
        raise TLSError(f"the CA file {path} is unusable: {reason}") from None
    return _read("CA file", path)


def server_tls(certificate: Path | None, key: Path | None, client_ca: Path | None) -> ServerTLS | None:
    """The server's TLS from its files; ``None`` for plaintext (no certificate, no key, no client CA)."""
    pair = _key_pair("server", certificate, key)
    if pair is None:
        if client_ca is not None:
            raise TLSError("a client CA (mutual TLS) needs the server's certificate and key as well")
        return None
    return ServerTLS(*pair, client_ca=None if client_ca is None else _authority(client_ca))


def channel_credentials(
    ca: Path | None, certificate: Path | None = None, key: Path | None = None
) -> grpc.ChannelCredentials | None:
    """A client's TLS: trusting ``ca`` (else the system's CAs), presenting ``certificate`` and ``key``
    when given (mutual TLS); ``None`` for plaintext (none of the three)."""
    pair = _key_pair("client", certificate, key)
    if ca is None and pair is None:
        return None
    return grpc.ssl_channel_credentials(
        root_certificates=None if ca is None else _authority(ca),
        private_key=None if pair is None else pair[1],
        certificate_chain=None if pair is None else pair[0],
    )
