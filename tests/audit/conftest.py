"""Fixtures for the audit tests: the API tests' real server and channel, plus an AuditService stub."""

from __future__ import annotations

import grpc
import pytest

from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc

pytest.register_assert_rewrite("tests.api.support", "tests.audit.support")

from tests.api.conftest import address, channel, server, stub  # noqa: E402, F401  (fixtures)


@pytest.fixture
def audit(channel: grpc.aio.Channel) -> audit_pb2_grpc.AuditServiceStub:  # noqa: F811
    return audit_pb2_grpc.AuditServiceStub(channel)  # type: ignore[no-untyped-call]
