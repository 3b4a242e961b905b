"""The command handler: load → decide → append, with a cache of recent game states.

Each command is judged by the pure decider against the game's state and, if accepted, its events are
appended in one transaction that names the version they were decided against. The handler keeps recent
states in memory keyed by game (with their version and last chain hash), so a command costs one append
and no reads, whatever the game's length. A cached state can be behind when several instances serve the
same game; the store's version check then refuses the append, and the handler catches up (reads only
the events after its cached version), decides again and retries. A rejection decided on a cached state
is confirmed the same way before it is reported, so a stale cache never rejects a legal command.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from service.audit.entries import RecordImported
from service.catalogue import decode_event, encode, split
from service.rules.commands import Command, CreateGame
from service.rules.decide import CommandError, create, execute
from service.rules.events import Event, GameCreated
from service.rules.state import State, evolve, new_state
from service.rules.violations import Violation
from service.store import (
    AppendResult,
    CommandReused,
    EventStore,
    NewEvent,
    StoredEvent,
    VersionConflict,
)

from . import errors
from .auth import new_token, token_hash

MAX_ATTEMPTS = 8
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
class Outcome:
    """An accepted (or earlier accepted, ``duplicate``) command: its stored events and the state after."""

    game_id: str
    version: int
    events: Sequence[StoredEvent]
    state: State
    duplicate: bool
    tournament_id: str
    #: The version ``state`` is at when it is not ``version``: a duplicate is answered with today's state.
    state_version: int | None = None


@dataclass(frozen=True, slots=True)
class Created:
    """A new game: its id, the seat tokens (shown once) and the outcome of its creation."""

    game_id: str
    tokens: tuple[str, ...]
    outcome: Outcome


def stored_form(event: Event) -> NewEvent:
    """The event as the store keeps it: the secret seed of ``GameCreated`` is never written to the log."""
    if isinstance(event, GameCreated):
        event = dataclasses.replace(event, seed=None)
    kind, payload = encode(event)
    return NewEvent(kind, payload)


class CommandHandler:
    """Decides and appends commands for any number of games (an instance is safe to run beside others)."""

    def __init__(self, store: EventStore, *, cache_size: int = 10_000) -> None:
        self.store = store
        self.cache_size = cache_size
        self._cache: OrderedDict[str, Loaded] = OrderedDict()

    # --- loading -------------------------------------------------------------------------------------

    async def load(self, game_id: str) -> Loaded:
        """The game's current state (from the cache, caught up with the store); NOT_FOUND if unknown."""
        loaded = self._cache.get(game_id)
        if loaded is None:
            events = await self.store.read_stream(game_id)
            if not events:
                raise errors.not_found(f"no game {game_id!r}")
            if events[0].type == RecordImported.__name__:
                raise errors.ApiError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"game {game_id!r} is an imported table record: it takes no commands and has no live "
                    "table; AuditService verifies, exports and rules on it",
                    "IMPORTED_GAME",
                )
            first = decode_event(events[0].type, events[0].payload)
            assert isinstance(first, GameCreated)
            seed = await self.store.seed(game_id)
            row = await self.store.game(game_id)
            state = new_state(dataclasses.replace(first, seed=seed))
            loaded = Loaded(state, 1, events[0].hash, row.tournament_id if row else "")
            self._apply(loaded, events[1:])
        else:
            self._apply(loaded, await self.store.read_stream(game_id, after_version=loaded.version))
        self._remember(game_id, loaded)
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
    ) -> Created:
        """Create a game; rule problems with the creation itself are INVALID_ARGUMENT (bad input)."""
        created = create(command)
        if isinstance(created, Violation):
            field = "dealer" if created.rule.value == "setup.dealer" else "players"
            raise errors.invalid(field, created.message)
        game_id = str(uuid.uuid4())
        tokens = tuple(new_token() for _ in command.players)
        events: list[Event] = [created]
        state = new_state(created)
        if first_round is not None:
            dealt = execute(state, first_round)
            if isinstance(dealt, Violation):
                raise errors.invalid("fixed_deck", dealt.message)
            events.extend(dealt[0])
            state = dealt[1]
        try:
            result = await self.store.create_game(
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
            )
        except CommandReused as reused:
            # Every creation draws a new game id, so a retry of a creation reaches the store as a reuse.
            seen = await self.store.command(command_id)
            if seen is not None and seen[1] == request_hash:
                raise errors.ApiError(
                    grpc.StatusCode.ALREADY_EXISTS,
                    "this command id already created a game; its seat tokens were shown once, not again",
                    "GAME_EXISTS",
                    game_id=seen[0],
                ) from None
            raise errors.invalid("command_id", f"already used for another request ({reused})") from None
        loaded = Loaded(state, result.last_version, result.last_hash, tournament_id)
        self._remember(game_id, loaded)
        outcome = Outcome(game_id, result.last_version, result.events, state, False, tournament_id)
        return Created(game_id, tokens, outcome)

    # --- commands -----------------------------------------------------------------------------------

    async def handle(
        self,
        game_id: str,
        command: Command,
        *,
        command_id: str,
        request_hash: bytes,
        expected_version: int | None,
        metadata: dict[str, object],
    ) -> Outcome:
        """Decide ``command`` and append its events; raises :class:`errors.ApiError` when refused."""
        loaded = self._cache.get(game_id) or await self.load(game_id)
        for attempt in range(MAX_ATTEMPTS):
            if expected_version is not None and expected_version != loaded.version:
                loaded = await self.load(game_id)  # the cache may be behind; the client's word decides
                if expected_version != loaded.version:
                    earlier = await self._earlier(game_id, command_id, request_hash)
                    if earlier is not None:  # a retry of a command that moved the game on
                        return earlier
                    raise errors.aborted(
                        f"the game is at version {loaded.version}, not {expected_version}", loaded.version
                    )
            try:
                outcome = execute(loaded.state, command)
            except CommandError as bad:
                raise errors.invalid(_FIELDS.get(bad.field, bad.field), str(bad)) from None
            if isinstance(outcome, Violation):
                if attempt == 0:
                    # A retry of a command accepted earlier is answered with its first result; anything
                    # else is judged again on the store's latest state before it is refused.
                    earlier = await self._earlier(game_id, command_id, request_hash)
                    if earlier is not None:
                        return earlier
                    loaded = await self.load(game_id)
                    continue
                raise errors.rule_violation(outcome.rule.value, outcome.message)
            events, state = outcome
            try:
                result = await self.store.append(
                    game_id,
                    loaded.version,
                    [stored_form(e) for e in events],
                    command_id=command_id,
                    request_hash=request_hash,
                    metadata=metadata,
                    prev_hash=loaded.last_hash,
                )
            except VersionConflict as conflict:
                if expected_version is not None:
                    raise errors.aborted(
                        f"the game moved on to version {conflict.actual} meanwhile", conflict.actual
                    ) from None
                loaded = await self.load(game_id)
                continue
            except CommandReused as reused:
                raise errors.invalid("command_id", f"already used for another request ({reused})") from None
            if result.duplicate:
                return await self._replay(game_id, result)
            if loaded.version < result.last_version:  # a concurrent read may have applied it already
                loaded.state, loaded.version, loaded.last_hash = state, result.last_version, result.last_hash
            self._remember(game_id, loaded)
            return Outcome(game_id, result.last_version, result.events, state, False, loaded.tournament_id)
        raise errors.ApiError(
            errors.aborted("", 0).code, f"the game changed {MAX_ATTEMPTS} times while deciding; try again"
        )

    async def _earlier(self, game_id: str, command_id: str, request_hash: bytes) -> Outcome | None:
        """The first result of ``command_id`` if it was accepted before (an idempotent retry)."""
        seen = await self.store.command(command_id)
        if seen is None:
            return None
        seen_game, seen_hash, first, last = seen
        if seen_game != game_id or seen_hash != request_hash:
            raise errors.invalid("command_id", "already used for another request")
        return await self._replay(game_id, AppendResult(first, last, b"", True, ()))

    async def _replay(self, game_id: str, result: AppendResult) -> Outcome:
        loaded = await self.load(game_id)
        events = await self.store.read_stream(
            game_id,
            after_version=result.first_version - 1,
            limit=result.last_version - result.first_version + 1,
        )
        return Outcome(
            game_id, result.last_version, events, loaded.state, True, loaded.tournament_id, loaded.version
        )
