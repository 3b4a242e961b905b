"""Wake-ups for watchers: one LISTEN connection per server, fanned out to the streams of each game.

The store NOTIFYs the game id when an append commits. Each ``WatchGame`` stream waits on its game's
subscription and then reads the new events from the store, so a lost notification costs at most the
waiter's timeout, never an event.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator

import structlog

from service.store import EventStore

log = structlog.get_logger("uno_audit.notify")


class Subscription:
    """The wake-ups of one watcher of one game."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def wake(self) -> None:
        self._event.set()

    async def wait_for_next(self, timeout: float) -> None:
        """Until the game has news, or ``timeout`` seconds (then the watcher looks anyway)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), timeout)
        self._event.clear()


class Notifier:
    """Listens once for the whole server and wakes the subscriptions of the game that changed."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self._subscriptions: defaultdict[str, set[Subscription]] = defaultdict(set)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="uno-audit-notifier")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            try:
                async with self.store.listen() as wakeups:
                    async for game_id in wakeups:
                        for subscription in list(self._subscriptions.get(game_id, ())):
                            subscription.wake()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the connection dropped: watchers poll meanwhile; listen again
                log.warning("listen failed; retrying", error=str(error))
                await asyncio.sleep(1.0)

    @contextlib.asynccontextmanager
    async def subscription(self, game_id: str) -> AsyncIterator[Subscription]:
        subscription = Subscription()
        self._subscriptions[game_id].add(subscription)
        try:
            yield subscription
        finally:
            self._subscriptions[game_id].discard(subscription)
            if not self._subscriptions[game_id]:
                del self._subscriptions[game_id]
