"""The command handler: load → decide → append, with a cache of recent game states.

A command is judged by the pure decider and its events appended in one transaction naming the version
they were decided against. Recent states are cached by game, so a command costs one append and no reads;
a stale cache is caught by the store's version check (catch up, decide again, retry), and a rejection is
confirmed the same way. The loop is :meth:`service.app.runner.Writer.handle`. docs/DESIGN.md ("The write
loop").
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from service.app.runner import Appended, Decision, ExistingStream, Head, Ran, Repeated, Writer, create_stream
from service.domain.auth import new_token, token_hash
from service.domain.catalogue import decode_event, encode, split
from service.domain.entries import RecordImported
from service.domain.errors import AlreadyExists, InvalidInput, NotFound, Precondition, RuleViolation
from service.rules.commands import Command, CreateGame
from service.rules.decide import CommandError, create, execute
from service.rules.events import Event, GameCreated
from service.rules.state import State, evolve, new_state
from service.rules.violations import Violation
from service.store import AppendResult, NewEvent, Store, StoredEvent

#: The request field behind each command field the rules engine may find out of range.
_FIELDS = {"player": "header.as_seat", "target": "target", "dealer": "dealer"}


@dataclass(slots=True)
class Loaded:
    """A game's state as of ``version``, with the chain hash of that version."""

    state: State
    version: int
    last_hash: bytes
    tournament_id: str


@dataclass(frozen=True, slots=True)
class Accepted:
    """An accepted (or earlier accepted, ``duplicate``) command: its stored events and the state after."""

    game_id: str
    version: int
    events: Sequence[StoredEvent]
    state: State
    duplicate: bool
    tournament_id: str


@dataclass(frozen=True, slots=True)
class Created:
    """A new game: its id, the seat tokens (shown once) and the outcome of its creation."""

    game_id: str
    tokens: tuple[str, ...]
    outcome: Accepted


def stored_form(event: Event) -> NewEvent:
    """The event as the store keeps it: the secret seed of ``GameCreated`` is never written to the log."""
    if isinstance(event, GameCreated):
        event = dataclasses.replace(event, seed=None)
    kind, payload = encode(event)
    return NewEvent(kind, payload)


class CommandHandler(Writer[Loaded, Command, State, Accepted]):
    """Decides and appends commands for any number of games (an instance is safe to run beside others):
    ``await handler.handle(game_id, command, command_id=…, request_hash=…, metadata=…)``."""

    store: Store  # the stream store and the games table (seeds, seats) at once

    def __init__(self, store: Store, *, cache_size: int = 10_000) -> None:
        super().__init__(store)
        self.cache_size = cache_size
        self._cache: OrderedDict[str, Loaded] = OrderedDict()

    # --- loading -------------------------------------------------------------------------------------

    async def load(self, game_id: str, fresh: bool = True) -> Loaded:
        """The game's current state; NOT_FOUND if unknown. ``fresh``: caught up with the store (the cache
        reads only what it misses, from its own last version on, to check that the store still holds it);
        otherwise the cached state as it is, when there is one."""
        loaded = self._cache.get(game_id)
        if loaded is not None and not fresh:
            return loaded
        if loaded is not None:
            version, last_hash = loaded.version, loaded.last_hash
            events = await self.store.read_stream(game_id, after_version=version - 1)
            if events and events[0].version == version and events[0].hash == last_hash:
                self._apply(loaded, events)
                self._remember(game_id, loaded)
                return loaded
            # The store does not hold the cached version as cached: it was rewound behind this server (a
            # failover that lost a suffix, a restore), and maybe written again since. Catching up from the
            # cache would wait for versions that never come; the game is folded from the store instead.
            self._cache.pop(game_id, None)
        loaded = await self._fold(game_id, await self.store.read_stream(game_id))
        self._remember(game_id, loaded)
        return loaded

    async def _fold(self, game_id: str, events: Sequence[StoredEvent]) -> Loaded:
        """The game as ``events`` (its log from version 1 on, complete or up to some version) leave it."""
        if not events:
            raise NotFound(f"no game {game_id!r}")
        if events[0].type == RecordImported.__name__:
            raise Precondition(
                f"game {game_id!r} is an imported table record: it takes no commands and has no live "
                "table; AuditService verifies, exports and rules on it",
                reason="IMPORTED_GAME",
            )
        first = decode_event(events[0].type, events[0].payload)
        assert isinstance(first, GameCreated)
        seed = await self.store.seed(game_id)
        row = await self.store.game(game_id)
        state = new_state(dataclasses.replace(first, seed=seed))
        loaded = Loaded(state, 1, events[0].hash, row.tournament_id if row else "")
        self._apply(loaded, events[1:])
        return loaded

    def _apply(self, loaded: Loaded, events: Sequence[StoredEvent]) -> None:
        # Rows a command of this server applied while the read was under way are already in the state.
        fresh = [stored for stored in events if stored.version > loaded.version]
        if not fresh:
            return
        state = loaded.state
        for _, event in split(fresh).game:  # disputes and rulings are the log's, not the game's
            state = evolve(state, event)
        loaded.state = state
        loaded.version, loaded.last_hash = fresh[-1].version, fresh[-1].hash

    def _remember(self, game_id: str, loaded: Loaded) -> None:
        self._cache[game_id] = loaded
        self._cache.move_to_end(game_id)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    # --- creating ------------------------------------------------------------------------------------

    async def create_game(
        self,
        command: CreateGame,
        *,
        command_id: str,
        request_hash: bytes,
        tournament_id: str,
        metadata: dict[str, object],
        first_round: Command | None = None,
        client: str = "",
    ) -> Created:
        """Create a game; rule problems with the creation itself are INVALID_ARGUMENT (bad input)."""
        created = create(command)
        if isinstance(created, Violation):
            field = "dealer" if created.rule.value == "setup.dealer" else "players"
            raise InvalidInput(field, created.message)
        tokens = tuple(new_token() for _ in command.players)
        events: list[Event] = [created]
        state = new_state(created)
        if first_round is not None:
            dealt = execute(state, first_round)
            if isinstance(dealt, Violation):
                raise InvalidInput("fixed_deck", dealt.message)
            events.extend(dealt[0])
            state = dealt[1]

        async def write(game_id: str) -> AppendResult:
            return await self.store.create_game(
                game_id,
                variant=command.variant.value,
                players=command.players,
                tournament_id=tournament_id,
                seed=command.seed,
                seat_token_hashes=[token_hash(t) for t in tokens],
                command_id=command_id,
                request_hash=request_hash,
                events=[stored_form(e) for e in events],
                metadata=metadata,
                client=client,
            )

        created_stream = await create_stream(
            self.store, command_id=command_id, request_hash=request_hash, write=write
        )
        if isinstance(created_stream, ExistingStream):
            raise AlreadyExists(
                "this command id already created a game; its seat tokens were shown once, not again",
                reason="GAME_EXISTS",
                game_id=created_stream.game_id,
            )
        game_id, result = created_stream.game_id, created_stream.result
        loaded = Loaded(state, result.last_version, result.last_hash, tournament_id)
        self._remember(game_id, loaded)
        outcome = Accepted(game_id, result.last_version, result.events, state, False, tournament_id)
        return Created(game_id, tokens, outcome)

    # --- commands (the writer's part of :meth:`~service.app.runner.Writer.handle`) ------------------------

    def head(self, snapshot: Loaded) -> Head:
        return Head(snapshot.version, snapshot.last_hash)

    def decide(self, snapshot: Loaded, command: Command) -> Decision[State]:
        try:
            outcome = execute(snapshot.state, command)
        except CommandError as bad:
            raise InvalidInput(_FIELDS.get(bad.field, bad.field), str(bad)) from None
        if isinstance(outcome, Violation):
            raise RuleViolation(outcome.rule.value, outcome.message)
        events, state = outcome
        return Decision([stored_form(e) for e in events], state)

    async def answer(self, game_id: str, ran: Ran[Loaded, State]) -> Accepted:
        if isinstance(ran, Repeated):
            return await self._replay(game_id, ran.result)
        assert isinstance(ran, Appended)  # every accepted command has events (at least its prompt)
        loaded, result, state = ran.snapshot, ran.result, ran.decision.outcome
        if loaded.version < result.last_version:  # a concurrent read may have applied it already
            loaded.state, loaded.version, loaded.last_hash = state, result.last_version, result.last_hash
        self._remember(game_id, loaded)
        return Accepted(game_id, result.last_version, result.events, state, False, loaded.tournament_id)

    async def _replay(self, game_id: str, result: AppendResult) -> Accepted:
        """A retried command's first answer: its events, and the game as they left it, folded again from
        the log up to them (the game may have moved on since; today's state is not what was answered)."""
        log = await self.store.read_stream(game_id, limit=result.last_version)
        then = await self._fold(game_id, log)
        events = log[result.first_version - 1 :]
        return Accepted(game_id, result.last_version, events, then.state, True, then.tournament_id)
