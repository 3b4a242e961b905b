"""The client over TLS: mutual TLS with the client's certificate and a token, against a real server; the
server's certificates and CA are tests/api/test_tls.py's."""

from __future__ import annotations

import grpc
import pytest

from service.api.server import RunningServer
from tests.api.support import ADMIN_TOKEN
from tests.api.test_tls import Certificates, certificates, mutual_server  # noqa: F401
from uno_audit_client import TLS, Client, RetryPolicy

ONCE = RetryPolicy(retry_for=0, call_timeout=10)  # a refusal is the answer: no retry


async def test_the_client_plays_over_mutual_tls_with_a_token(
    mutual_server: RunningServer,  # noqa: F811
    certificates: Certificates,  # noqa: F811
) -> None:
    address = f"localhost:{mutual_server.port}"
    ca = certificates.ca.cert.read_bytes()
    tls = TLS(ca, certificates.client.cert.read_bytes(), certificates.client.key.read_bytes())
    async with Client.connect(address, tls=tls, token=ADMIN_TOKEN) as client:
        game = await client.create_game(["ann", "bob"])
        reply = await game.seat(0).start_round()
        view = await client.get_game(game.game_id)  # the admin's view: every hand
        assert client.receipts.check(client.receipts.kept[-1]).version == reply.version
    assert len(view.hands) == 2 and view.version == reply.version

    # Without the client's certificate, or in plaintext, the server refuses the connection.
    for refused in (TLS(ca), None):
        async with Client.connect(address, tls=refused, retry=ONCE) as stranger:
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await stranger.create_game(["ann", "bob"])
        assert raised.value.code() is grpc.StatusCode.UNAVAILABLE


def test_a_client_certificate_needs_its_key() -> None:
    with pytest.raises(ValueError, match="needs its private key"):
        TLS(certificate_chain=b"-----BEGIN CERTIFICATE-----").credentials()
