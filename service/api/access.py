"""Client applications at the API: who creates games, and the quotas that keep one from starving the rest.

An operator issues each application a client key (``uno-audit clients add``); it travels as a bearer token,
like seat tokens. Creating a game needs one when the server listens beyond loopback (unless
``--allow-anonymous``); every keyless creator is one shared client, :data:`ANONYMOUS`. A game records its
client; a keyed client's games' seats count against it, every seat has its own stream budget, and
spectators share part of the server. docs/OPERATIONS.md lists the quotas and their defaults.
"""

from __future__ import annotations

import ipaddress
import secrets
import time
from dataclasses import dataclass, field

from service.domain.auth import Caller, token_hash
from service.domain.errors import ResourceExhausted, Unauthenticated
from service.store import EventStore
from service.store.clients import ADMIN_CLIENT, ANONYMOUS

#: How client keys start, so that a log or a leaked-secret scanner can tell them from seat tokens.
KEY_PREFIX = "uak_"
#: How long a key's client is remembered: a revoked key is refused at most this many seconds later.
KEY_CACHE_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Quotas:
    """What each client may hold at once (the anonymous client counts as one for games), how fast it may
    create, and the budgets of ``WatchGame`` streams (docs/OPERATIONS.md, "Stream budgets")."""

    creations_per_minute: int = 60
    live_games: int = 200
    #: A keyed client's streams: its games' seats and the spectators sending its key.
    streams: int = 200
    #: A game's tokenless spectators.
    spectators_per_game: int = 50
    #: Each seat's streams, whoever holds its token: a reconnect or a second device, not thousands.
    streams_per_seat: int = 3
    #: The part of the server's streams that spectators, keyed or not, may hold together: the rest is
    #: the seats' (and the admin's), so that no spectator flood refuses a seat.
    spectator_share: float = 0.5

    def __post_init__(self) -> None:
        if not 0 < self.spectator_share < 1:
            raise ValueError(f"spectator_share must be above 0 and below 1, not {self.spectator_share}")


@dataclass(frozen=True, slots=True)
class Access:
    """The server's rules for callers: whether creating needs a client key, and the quotas."""

    require_key: bool = False
    quotas: Quotas = field(default_factory=Quotas)


def new_client_key() -> str:
    """A fresh client key (shown once; the store keeps its SHA-256)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def is_loopback(listen: str) -> bool:
    """Whether ``host:port`` listens on this machine only (127.0.0.0/8, ::1, localhost)."""
    host = listen.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def client_name(client: str) -> str:
    """``client`` as messages and metrics name it."""
    return client or "anonymous"


def quota_exceeded(client: str, quota: str, limit: int, message: str, retry_after: int) -> ResourceExhausted:
    """The refusal of a call over ``quota`` (``retry_after`` seconds: when to try again)."""
    return ResourceExhausted(
        f"client {client_name(client)}: {message} (quota {quota}: {limit})",
        reason="QUOTA_EXCEEDED",
        scope=f"client:{client_name(client)}",
        quota=quota,
        limit=str(limit),
        retry_after=str(retry_after),
    )


class Gate:
    """Resolves the client of a creation and admits it within the client's quotas."""

    def __init__(self, store: EventStore, access: Access) -> None:
        self.store = store
        self.access = access
        self._keys: dict[bytes, tuple[str | None, float]] = {}  # key hash -> (client, when looked up)

    async def creator(self, caller: Caller, token: str | None) -> str:
        """The client creating a game: the admin's, a key's, or (where allowed) the anonymous one."""
        if caller.admin:
            return ADMIN_CLIENT
        if token is None:
            if self.access.require_key:
                raise Unauthenticated(
                    "creating a game on this server needs a client key (authorization: Bearer <key>); "
                    "the operator issues them with `uno-audit clients add`",
                    reason="CLIENT_KEY_REQUIRED",
                )
            return ANONYMOUS
        client = await self.client_of(token)
        if client is None:
            raise Unauthenticated(
                "not a client key of this server (unknown, or revoked)", reason="UNKNOWN_CLIENT_KEY"
            )
        return client

    async def client_of(self, token: str) -> str | None:
        """The client whose key ``token`` is (``None``: none, or revoked), remembered a few seconds."""
        hashed = token_hash(token)
        now = time.monotonic()
        known = self._keys.get(hashed)
        if known is not None and now - known[1] < KEY_CACHE_SECONDS:
            return known[0]
        client = await self.store.client_for_key(hashed)
        if len(self._keys) > 10_000:
            self._keys.clear()
        self._keys[hashed] = (client, now)
        return client

    async def admit_creation(self, client: str) -> None:
        """Refuse a creation over the client's quotas: games created in the last minute, games live."""
        if client == ADMIN_CLIENT:
            return
        quotas = self.access.quotas
        usage = await self.store.client_usage(client, window_seconds=60, live_bound=quotas.live_games)
        if usage.created_recently >= quotas.creations_per_minute:
            message = f"{usage.created_recently} games created in the last minute"
            raise quota_exceeded(client, "creations_per_minute", quotas.creations_per_minute, message, 60)
        if usage.live >= quotas.live_games:
            message = f"{usage.live} games in progress; finish one first"
            raise quota_exceeded(client, "live_games", quotas.live_games, message, 60)
