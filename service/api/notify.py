"""``WatchGame`` streams: one LISTEN connection per server fans out to every stream; nothing polls.

:class:`Notifier` keeps the server's only ``LISTEN uno_events`` connection while streams are open,
wakes the watchers of a game when its append commits, and bounds the streams a server holds open
(:data:`MAX_STREAMS`, a seat's budget, a keyed client's quota, the spectators' share, a game's tokenless
spectators). Why no event is missed without polling: docs/DESIGN.md ("Watch streams").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import structlog

from service.api.access import Quotas, client_name
from service.domain.auth import Caller
from service.domain.catalogue import type_name
from service.domain.errors import ResourceExhausted
from service.rules.events import GameEnded
from service.store import StoredEvent, StreamStore
from service.store.clients import ANONYMOUS

log = structlog.get_logger("uno_audit.notify")

#: Open ``WatchGame`` streams a server allows in all (the spectators' part: ``Quotas.spectator_share``).
MAX_STREAMS = 1000
#: Events a stream reads from the store at a time while catching up.
PAGE_SIZE = 500
#: How long the LISTEN connection stays open after the last stream closed: a client that reopens its
#: stream soon finds it up; a server that nobody watches holds none (notifications cost both sides).
LINGER_SECONDS = 30.0
#: How long a new stream waits for the LISTEN connection to come up before its first read.
HEARD_SECONDS = 5.0
#: The pause before listening again after the LISTEN connection is lost: doubled per failure, up to the
#: second figure, back to the first once listening.
RETRY_SECONDS = (0.1, 5.0)

_GAME_ENDED = type_name(GameEnded)

#: What a budget's streams are counted under: a tuple, so that no game id can pass for another scope.
BudgetKey = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Budget:
    """One budget a stream counts against: ``scope`` names it in a refusal (``game:ID:seat:N``,
    ``game:ID``, ``client:NAME``, ``spectators``, ``server``), ``whose`` in its message."""

    key: BudgetKey
    scope: str
    whose: str
    limit: int


class Watcher:
    """One ``WatchGame`` stream's subscription to its game (see :meth:`Notifier.watcher`)."""

    def __init__(self, notifier: Notifier, game_id: str, counted: tuple[BudgetKey, ...]) -> None:
        self.notifier = notifier
        self.game_id = game_id
        self.counted = counted  # the keys of Notifier._counts this stream holds a place in
        self._woken = asyncio.Event()
        #: Wake-ups by cause: ``notification`` (an append to the game) or ``listening`` (the LISTEN
        #: connection was lost or regained); what a test of promptness counts instead of seconds.
        self.wakes: Counter[str] = Counter()
        #: Whether the stream has caught up and sleeps until it is woken.
        self.waiting = False
        #: Whether the stream has begun reading: one that has not reads everything anyway, so coming to
        #: listen (or losing the connection) need not wake it.
        self.started = False

    def wake(self, cause: str) -> None:
        self.wakes[cause] += 1
        self._woken.set()

    async def events(
        self, after_version: int, *, version: int, over: bool, follow: bool
    ) -> AsyncIterator[StoredEvent]:
        """The game's events and audit entries after ``after_version``, in version order: those stored,
        then each as it is appended. Ends once it has sent every stored version of a game that is over,
        unless ``follow`` (then it waits for more audit entries until the caller goes away).

        ``version`` and ``over`` are the game's version and whether ``GameEnded`` is stored, as loaded
        *after* this watcher subscribed. Reading starts at ``min(after_version, version)``, so that a
        ``GameEnded`` at or below an ``after_version`` past the end is still seen, and not sent.
        """
        page_size = self.notifier.page_size
        read_from = min(after_version, version)
        self.started = True
        self._woken.clear()  # a wake-up before the first read is news the first read brings anyway
        while True:
            page = await self.notifier.store.read_stream(
                self.game_id, after_version=read_from, limit=page_size
            )
            for event in page:
                over = over or event.type == _GAME_ENDED
                if event.version > after_version:
                    yield event
            if page:
                read_from = page[-1].version
            if len(page) == page_size:
                continue  # more stored: the next page, once this one is sent
            if over and not follow:
                return
            # Caught up. No timeout: an append, or a lost or regained LISTEN connection, wakes us.
            self.waiting = True
            await self._woken.wait()
            self.waiting = False
            self._woken.clear()


class Notifier:
    """Listens once for the whole server, wakes the watchers of the game that changed, and counts the
    open streams against the limits."""

    def __init__(
        self,
        store: StreamStore,
        *,
        max_streams: int = MAX_STREAMS,
        quotas: Quotas | None = None,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self.store = store
        self.max_streams = max_streams
        self.quotas = quotas or Quotas()
        self.page_size = page_size
        self._watchers: dict[str, set[Watcher]] = {}
        self._counts: Counter[BudgetKey] = Counter()
        self._open = 0
        self._listening = False
        self._task: asyncio.Task[None] | None = None
        self._started = False
        self._linger: asyncio.TimerHandle | None = None
        self._heard = asyncio.Event()
        self.linger_seconds = LINGER_SECONDS

    @property
    def listening(self) -> bool:
        """Whether the LISTEN connection is up (while it is not, appends wake nobody until it is back)."""
        return self._listening

    @property
    def open_streams(self) -> int:
        return self._open

    @property
    def spectator_limit(self) -> int:
        """The streams every spectator together may hold: the quotas' share of :attr:`max_streams`, rounded
        down, so that the rest is always the seats' and the admin's."""
        return int(self.max_streams * self.quotas.spectator_share)

    def watchers_of(self, game_id: str) -> frozenset[Watcher]:
        """The streams now subscribed to ``game_id``."""
        return frozenset(self._watchers.get(game_id, ()))

    def start(self) -> None:
        """Listen from the first stream on (until :attr:`linger_seconds` after the last one closes)."""
        self._started = True
        if self._watchers:
            self._listen()

    async def stop(self) -> None:
        self._started = False
        if self._linger is not None:
            self._linger.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def heard(self, timeout: float = HEARD_SECONDS) -> None:
        """Wait until the connection listens, at most ``timeout``: a new stream's first read then needs no
        second one when it comes up (one that reads before still misses nothing: :meth:`_connected`)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._heard.wait(), timeout)

    def _listen(self) -> None:
        """Listen now, unless already listening (or about to); a pending stop is called off."""
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        if self._started and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self._run(), name="uno-audit-notifier")

    def _unheard(self) -> None:
        """The last stream closed: stop listening unless another opens within :attr:`linger_seconds`."""

        def stop_listening() -> None:
            self._linger = None
            if self._task is not None and not self._watchers:
                self._task.cancel()

        self._linger = asyncio.get_running_loop().call_later(self.linger_seconds, stop_listening)

    async def _run(self) -> None:
        first, most = RETRY_SECONDS
        delay = first
        while True:
            try:
                async with self.store.listen() as wakeups:
                    self._connected()
                    delay = first
                    async for game_id in wakeups:
                        for watcher in self._watchers.get(game_id, ()):
                            watcher.wake("notification")
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the connection dropped or could not be made: listen again
                log.warning("listen connection lost; listening again", error=str(error), retry_seconds=delay)
            finally:
                self._disconnected()
            await asyncio.sleep(delay)
            delay = min(delay * 2, most)

    def _connected(self) -> None:
        """Listening (again): whatever was appended while nobody listened is read by every watcher now."""
        self._listening = True
        self._heard.set()
        log.info("listening", watchers=self._open)
        self._wake_all()

    def _disconnected(self) -> None:
        """The notifications from now until listening again are lost: every watcher reads once now (a
        wake-up that was on its way is not lost with them) and again when listening resumes."""
        self._heard.clear()
        if self._listening:
            self._listening = False
            self._wake_all()

    def _wake_all(self) -> None:
        for watchers in self._watchers.values():
            for watcher in watchers:
                if watcher.started:
                    watcher.wake("listening")

    def budgets(self, game_id: str, caller: Caller, client: str) -> list[Budget]:
        """The budgets a stream of ``caller``'s on ``game_id`` counts against, narrowest first. ``client``
        is the one :meth:`Callers.client_of` names (a seat's: its game's creator). Why these and not
        others: docs/OPERATIONS.md ("Stream budgets")."""
        quotas = self.quotas
        places: list[Budget] = []
        if caller.seat is not None:
            # A seat's own budget, so that no one else's streams (another seat's, a spectator's) count
            # against it, and one token cannot open thousands.
            scope, whose = f"game:{game_id}:seat:{caller.seat}", f"seat {caller.seat} of game {game_id}"
            places.append(Budget(("seat", game_id, caller.seat), scope, whose, quotas.streams_per_seat))
        elif caller.spectator and client == ANONYMOUS:
            whose = f"game {game_id}'s tokenless spectators"
            places.append(Budget(("game", game_id), f"game:{game_id}", whose, quotas.spectators_per_game))
        if client != ANONYMOUS:
            # A keyed client answers for its own games' seats and its spectators; the anonymous client is
            # everyone without a key, so counting them together would let any of them lock out the rest.
            name = client_name(client)
            places.append(Budget(("client", client), f"client:{name}", f"client {name}", quotas.streams))
        if caller.spectator:
            places.append(Budget(("spectators",), "spectators", "the spectators", self.spectator_limit))
        places.append(Budget(("server",), "server", "the server", self.max_streams))
        return places

    @contextlib.contextmanager
    def watcher(self, game_id: str, caller: Caller, *, client: str) -> Iterator[Watcher]:
        """A subscription to ``game_id``'s appends for one stream of ``caller``'s (a seat's, a spectator's
        or the admin's; ``client``: the client it counts against), held until the block ends;
        :class:`ResourceExhausted` (reason ``STREAM_LIMIT``, metadata ``limit`` and ``scope``: a
        :class:`Budget`'s) if one of its :meth:`budgets` is full."""
        places = self.budgets(game_id, caller, client)
        for budget in places:
            held = self._open if budget.key == ("server",) else self._counts[budget.key]
            if held >= budget.limit:
                raise ResourceExhausted(
                    f"{budget.whose}: {budget.limit} WatchGame streams open, the limit; close one first, "
                    "or try again later",
                    reason="STREAM_LIMIT",
                    limit=str(budget.limit),
                    scope=budget.scope,
                )
        counted = tuple(budget.key for budget in places if budget.key != ("server",))
        watcher = Watcher(self, game_id, counted)
        # A stream that subscribes before the connection listens is woken once it does (_connected), and
        # reads then whatever was appended meanwhile.
        self._listen()
        self._watchers.setdefault(game_id, set()).add(watcher)
        self._counts.update(counted)
        self._open += 1
        try:
            yield watcher
        finally:
            self._open -= 1
            self._counts.subtract(counted)
            for key in counted:
                if not self._counts[key]:
                    del self._counts[key]
            watchers = self._watchers[game_id]
            watchers.discard(watcher)
            if not watchers:
                del self._watchers[game_id]
                if not self._watchers:
                    self._unheard()
