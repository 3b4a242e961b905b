"""Who is calling: seat tokens, the admin token, and spectators.

A game's seats each get a secret token at creation; only its SHA-256 is stored. The admin token comes
from the server's configuration and is the adjudicator role (acts for any seat, sees every card). A call
without a token is a spectator's. Tokens travel as ``authorization: Bearer <token>`` metadata.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

TOKEN_BYTES = 32


@dataclass(frozen=True, slots=True)
class Caller:
    """The caller of one RPC: a seat of the game, the admin, or a spectator (neither)."""

    seat: int | None = None
    admin: bool = False
    #: The client application whose key a spectator sent (``None``: none; see :mod:`service.api.access`).
    client: str | None = None

    @property
    def spectator(self) -> bool:
        return self.seat is None and not self.admin

    @property
    def identity(self) -> str:
        """Who the caller is, as a command's request hash binds it: ``admin``, ``seat N`` or ``anyone``."""
        if self.admin:
            return "admin"
        return "anyone" if self.seat is None else f"seat {self.seat}"


SPECTATOR = Caller()
ADMIN = Caller(admin=True)


def new_token() -> str:
    """A fresh secret seat token."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_hash(token: str) -> bytes:
    """What the store keeps of a token."""
    return hashlib.sha256(token.encode()).digest()


def bearer(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    """The bearer token in gRPC invocation metadata, if any ("" counts as none)."""
    for key, value in metadata or ():
        if key.lower() == "authorization":
            text = value.decode() if isinstance(value, bytes) else value
            scheme, _, token = text.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return ""  # present but malformed: reported as unauthenticated by the caller
    return None


def is_admin(token: str, admin_token_hash: bytes | None) -> bool:
    """Whether ``token`` is the configured admin token (compared in constant time)."""
    return admin_token_hash is not None and hmac.compare_digest(token_hash(token), admin_token_hash)
