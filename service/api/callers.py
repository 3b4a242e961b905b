"""Who is calling an RPC: the admin (adjudicator), a seat of the game, or a spectator; and for whom.

One :class:`Callers` serves every servicer of a server, so the seat-token cache is shared: a token is
looked up in the store once, then answered from memory (LRU, bounded). It also knows each caller's client
application (:mod:`service.api.access`): the quotas are counted per client.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import grpc

from service.api.access import Access, Gate
from service.domain.auth import ADMIN, SPECTATOR, Caller, bearer, is_admin, token_hash
from service.domain.errors import PermissionDenied, Unauthenticated
from service.store import EventStore
from service.store.clients import ADMIN_CLIENT, ANONYMOUS

Context = grpc.aio.ServicerContext[Any, Any]
SEAT_CACHE = 100_000


class Callers:
    """Resolves the caller of an RPC from its ``authorization: Bearer <token>`` metadata."""

    def __init__(
        self, store: EventStore, admin_token_hash: bytes | None, access: Access | None = None
    ) -> None:
        self.store = store
        self.admin_token_hash = admin_token_hash
        self.gate = Gate(store, access or Access())
        self._seats: OrderedDict[tuple[str, bytes], int] = OrderedDict()  # (game, token hash) -> seat
        self._clients: OrderedDict[str, str] = OrderedDict()  # game -> the client that created it

    def server_caller(self, context: Context) -> tuple[Caller, str | None]:
        """The admin, or a spectator with the token it sent (a seat token needs the game to resolve)."""
        token = bearer(context.invocation_metadata())
        if token == "":
            raise Unauthenticated("authorization metadata must be 'Bearer <token>'")
        if token is not None and is_admin(token, self.admin_token_hash):
            return ADMIN, token
        return SPECTATOR, token

    async def caller(self, context: Context, game_id: str) -> Caller:
        """The caller as far as ``game_id`` is concerned: a seat, the admin, or a spectator (with the client
        whose key it sent, if it sent one); UNAUTHENTICATED for a token that is neither a seat token of the
        game nor a client key."""
        caller, token = self.server_caller(context)
        if caller.admin or token is None:
            return caller
        key = (game_id, token_hash(token))
        seat = self._seats.get(key)
        if seat is None:
            seat = await self.store.seat_for_token(game_id, key[1])
            if seat is None:
                client = await self.gate.client_of(token)
                if client is None:
                    raise Unauthenticated("the token is not a seat token of this game, nor a client key")
                return Caller(client=client)
            self.remember(game_id, key[1], seat)
        return Caller(seat=seat)

    async def client_of(self, caller: Caller, game_id: str) -> str:
        """The client a call of ``caller`` about ``game_id`` counts against: the admin's, the key's of a
        spectator that sent one, the game's own for its seats (whoever holds the token), else the
        anonymous client (which no stream counts against: :meth:`Notifier.budgets`)."""
        if caller.admin:
            return ADMIN_CLIENT
        if caller.seat is None:
            return ANONYMOUS if caller.client is None else caller.client
        client = self._clients.get(game_id)
        if client is None:
            row = await self.store.game(game_id)
            client = ANONYMOUS if row is None else row.client
            self._clients[game_id] = client
            if len(self._clients) > SEAT_CACHE:
                self._clients.popitem(last=False)
        return client

    def remember(self, game_id: str, hashed_token: bytes, seat: int) -> None:
        """Keep a seat token's seat (by the token's hash): a game's creator knows its tokens, so their
        first commands need no lookup in the store. A seat's token never changes."""
        self._seats[(game_id, hashed_token)] = seat
        if len(self._seats) > SEAT_CACHE:
            self._seats.popitem(last=False)

    def admin(self, context: Context) -> None:
        """Refuse anyone but the admin (the adjudicator)."""
        caller, token = self.server_caller(context)
        if caller.admin:
            return
        if token is None:
            raise Unauthenticated("this needs the adjudicator's (admin) token")
        raise PermissionDenied("only the adjudicator (admin token) may do this")
