"""Typed Python client of the uno-audit gRPC API (``uno-audit-client``).

:class:`Client` connects (plaintext or TLS, with an optional token), creates games and acts as their
seats, watches a game, retries every call with the same command id (docs/grpc.md, "Retrying") and keeps every
reply's signed receipt, checked (:class:`ReceiptBook`). The generated protobuf code is
``uno_audit_client.gen.uno.audit.v1`` (``game_pb2``, ``audit_pb2``, ``checkpoint_pb2`` and their stubs).
"""

from uno_audit_client.client import (
    TLS,
    Client,
    CreationLost,
    Game,
    Metadata,
    Seat,
    bearer,
    error_info,
    error_reason,
    new_command_id,
    open_channel,
    variant_of,
)
from uno_audit_client.receipts import Checkpoint, Receipt, ReceiptBook, ReceiptError, Verifier, open_receipt
from uno_audit_client.retry import RETRYABLE, RetryPolicy, retryable, server_delay

__version__ = "0.2.0"

__all__ = [
    "RETRYABLE",
    "TLS",
    "Checkpoint",
    "Client",
    "CreationLost",
    "Game",
    "Metadata",
    "Receipt",
    "ReceiptBook",
    "ReceiptError",
    "RetryPolicy",
    "Seat",
    "Verifier",
    "bearer",
    "error_info",
    "error_reason",
    "new_command_id",
    "open_channel",
    "open_receipt",
    "retryable",
    "server_delay",
    "variant_of",
]
