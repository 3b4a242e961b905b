"""Group commit on PostgreSQL: commands waiting together go in one statement, and each keeps its outcome.

How the tests make a group without timing anything: ``append`` with a ``prev_hash`` does no I/O before it
writes or queues its command. Of commands started together by ``asyncio.gather``, the first finds
nothing in flight and is written at once, alone; the others all run before its reply can arrive, so they
queue, and go as one group (at most one per game) when it is done. ``group_commit_stats`` shows the
groups sent, so each test checks that the group it meant to make was made, and would fail if grouping
stopped happening.

Where a test needs the database to be in the middle of a group (a race with another writer, a killed
connection), it holds a lock the group's statement must wait for, and waits until ``pg_stat_activity``
shows that statement waiting: a condition, never a sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime

import psycopg
import pytest

from service.app.runner import Appended, Decision, Head, Ran, Repeated, Writer
from service.store import (
    GENESIS_HASH,
    AppendResult,
    CommandReused,
    EventStore,
    GameNotFound,
    NewEvent,
    StoreError,
    VersionConflict,
)
from service.store.migrate import SERVICE_LOGIN
from service.store.model import Batch

from .support import INSERT_ROW, assert_valid_stream, count, forged_row, new_game, played, request_hash

WAIT = 10.0  # seconds: the most any condition below may take before the test fails instead of hanging
CLOCK = datetime(2026, 12, 5, 7, 30, 0, 123456, tzinfo=UTC)  # a writer's fixed clock, where one is needed


@pytest.fixture
def group_store(store: EventStore) -> EventStore:
    """The test database's store as the service opens it: group commit is the default (the first test
    below fails if it is not)."""
    return store


def stats_delta(store: EventStore, before: dict[str, int]) -> tuple[int, int]:
    """(groups, commands) sent since ``before``."""
    now = store.group_commit_stats()
    return now["groups"] - before["groups"], now["commands"] - before["commands"]


async def heads(store: EventStore, games: Sequence[str]) -> dict[str, AppendResult]:
    """Each game's last event as an append result would give it (version, hash)."""
    found = {}
    for game_id in games:
        last = (await store.read_stream(game_id))[-1]
        found[game_id] = AppendResult(last.version, last.version, last.hash, False)
    return found


async def attempt(
    store: EventStore,
    game_id: str,
    expected: int,
    prev_hash: bytes,
    command_id: str,
    request: bytes | None = None,
    events: Sequence[NewEvent] | None = None,
) -> AppendResult | Exception:
    """One append, its exception returned rather than raised (to gather many)."""
    try:
        return await store.append(
            game_id,
            expected,
            events or [played(expected), played(expected + 1)],
            command_id=command_id,
            request_hash=request or request_hash(command_id),
            metadata={"actor": 0},
            prev_hash=prev_hash,
        )
    except Exception as error:
        return error


async def wait_for_blocked_statement(owner_url: str) -> int:
    """The pid of the service login's backend that waits for a lock in this database (polled)."""
    deadline = time.monotonic() + WAIT
    async with await psycopg.AsyncConnection.connect(owner_url, autocommit=True) as conn:
        while True:
            cursor = await conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND usename = %s "
                "AND wait_event_type = 'Lock' AND query LIKE %s",
                (SERVICE_LOGIN, "%jsonb_to_recordset%"),
            )
            row = await cursor.fetchone()
            if row is not None:
                return int(row[0])
            assert time.monotonic() < deadline, "the group's statement never waited for the lock"
            await asyncio.sleep(0.01)


# --- grouping -----------------------------------------------------------------------------------------


async def test_a_lone_append_is_a_group_of_one(group_store: EventStore) -> None:
    store = group_store
    created = await new_game(store, "g1")
    before = store.group_commit_stats()
    result = await attempt(store, "g1", 1, created.last_hash, "c1")
    assert isinstance(result, AppendResult) and result.last_version == 3
    assert stats_delta(store, before) == (1, 1)


async def test_without_group_commit_no_group_is_sent(alone_store: EventStore) -> None:
    """``group_commit=False``: each append alone, racing as before."""
    alone = alone_store
    created = await new_game(alone, "g1")
    results = await asyncio.gather(
        attempt(alone, "g1", 1, created.last_hash, "a"), attempt(alone, "g1", 1, created.last_hash, "b")
    )
    assert sorted(type(r).__name__ for r in results) == ["AppendResult", "VersionConflict"]
    assert alone.group_commit_stats() == {"groups": 0, "commands": 0}


async def test_a_caller_that_stops_waiting_before_its_group_leaves_is_not_written(
    group_store: EventStore,
) -> None:
    """Both commands are queued before the flusher first runs; the second's caller is cancelled (a
    deadline) meanwhile, so the group that leaves carries only the first."""
    store = group_store
    at = {g: await new_game(store, g) for g in ("g1", "g2")}
    before = store.group_commit_stats()
    kept = asyncio.create_task(attempt(store, "g1", 1, at["g1"].last_hash, "kept"))
    dropped = asyncio.create_task(attempt(store, "g2", 1, at["g2"].last_hash, "dropped"))
    await asyncio.sleep(0)  # both tasks run up to their wait; the flusher they started has not run yet
    dropped.cancel()
    assert isinstance(await kept, AppendResult)
    with pytest.raises(asyncio.CancelledError):
        await dropped
    assert stats_delta(store, before) == (1, 1)
    assert await store.command("g2", "dropped") is None
    assert await store.stream_version("g2") == 1


@pytest.mark.timeout(120)
async def test_many_games_at_once_all_commit_with_intact_chains(group_store: EventStore) -> None:
    store = group_store
    games = [f"g{n}" for n in range(100)]
    for game_id in games:
        await new_game(store, game_id)
    at = await heads(store, games)
    before = store.group_commit_stats()
    for n in range(5):
        results = await asyncio.gather(
            *(
                attempt(store, g, at[g].last_version, at[g].last_hash, f"{g}-{n}", events=[played(n)])
                for g in games
            )
        )
        assert all(isinstance(r, AppendResult) and not r.duplicate for r in results), results
        at = {g: r for g, r in zip(games, results, strict=True) if isinstance(r, AppendResult)}
    groups, commands = stats_delta(store, before)
    assert commands == 500
    assert groups == 15, "of 100 commands, the first goes alone, the 99 queued behind it by 64 at most"
    for game_id in games:
        stream = await store.read_stream(game_id)
        assert len(stream) == 6
        assert_valid_stream(stream)
        assert [e.metadata["command_id"] for e in stream[1:]] == [f"{game_id}-{r}" for r in range(5)]
        assert [(r.command_id, r.first_version, r.last_version) for r in await store.ledger(game_id)] == [
            (f"create:{game_id}", 1, 1),
            *((f"{game_id}-{r}", r + 2, r + 2) for r in range(5)),
        ]


async def test_each_command_of_a_group_fails_or_succeeds_alone(group_store: EventStore) -> None:
    store = group_store
    names = ["ok1", "conflict", "duplicate", "reused", "bad-prev", "ok2", "ok3"]
    for game_id in [*names, "lead"]:
        await new_game(store, game_id)
    at = await heads(store, [*names, "lead"])
    done = await store.append(
        "duplicate", 1, [played(1), played(2)], command_id="dup", request_hash=request_hash("dup"),
        metadata={"actor": 0}, prev_hash=at["duplicate"].last_hash,
    )  # fmt: skip
    reused = await store.append(
        "reused", 1, [played(1)], command_id="used", request_hash=b"first", metadata={},
        prev_hash=at["reused"].last_hash,
    )  # fmt: skip
    async with store.listen() as wakeups:
        before = store.group_commit_stats()
        lead, *results = await asyncio.gather(
            attempt(store, "lead", 1, at["lead"].last_hash, "c-lead"),  # alone; the others queue behind it
            attempt(store, "ok1", 1, at["ok1"].last_hash, "c-ok1"),
            attempt(store, "conflict", 4, bytes(32), "c-conflict"),
            attempt(store, "duplicate", 1, at["duplicate"].last_hash, "dup"),
            attempt(store, "reused", 2, reused.last_hash, "used", request=b"second"),
            attempt(store, "bad-prev", 1, bytes(32), "c-bad-prev"),
            attempt(store, "ok2", 1, at["ok2"].last_hash, "c-ok2"),
            attempt(store, "missing", 1, GENESIS_HASH, "c-missing"),
            attempt(store, "ok3", 1, at["ok3"].last_hash, "c-ok3"),
        )
        assert stats_delta(store, before) == (2, 9), "the eight commands after the first went as one group"
        assert isinstance(lead, AppendResult)
        ok1, conflict, duplicate, reuse, bad_prev, ok2, missing, ok3 = results

        for ok, game_id in ((ok1, "ok1"), (ok2, "ok2"), (ok3, "ok3")):
            assert isinstance(ok, AppendResult) and not ok.duplicate
            assert (ok.first_version, ok.last_version) == (2, 3)
            stream = await store.read_stream(game_id)
            assert [e.position for e in stream[1:]] == [e.position for e in ok.events]
            assert ok.last_hash == stream[-1].hash
            assert_valid_stream(stream)
        assert isinstance(conflict, VersionConflict) and (conflict.expected, conflict.actual) == (4, 1)
        assert isinstance(duplicate, AppendResult) and duplicate.duplicate
        assert (duplicate.first_version, duplicate.last_version) == (2, 3)
        assert duplicate.last_hash == done.last_hash
        assert isinstance(reuse, CommandReused)
        assert isinstance(bad_prev, StoreError) and "prev_hash" in str(bad_prev)
        assert isinstance(missing, GameNotFound)

        # Nothing was written for a failed command; the others' wake-ups came.
        assert [await store.stream_version(g) for g in names] == [3, 1, 3, 2, 1, 3, 3]
        assert await store.command("conflict", "c-conflict") is None
        assert await store.command("bad-prev", "c-bad-prev") is None
        assert await store.command("reused", "used") == (b"first", 2, 2)
        woken: set[str] = set()
        while not {"ok1", "ok2", "ok3"} <= woken:
            woken.add(await asyncio.wait_for(anext(wakeups), WAIT))


async def test_commands_of_one_game_go_in_successive_groups(
    group_store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A game's second command waits for the next group, where it sees the first: a command that follows
    another (its expected version and prev_hash are the first one's result) is written, a command that
    expected the same version as the first is a conflict, a retry of the first is a duplicate (settled
    alone, where its ledger row is checked against its events).

    The first command's hashes cover its metadata and time: the writer's clock is fixed here so that the
    second can be chained on them before the first is written."""
    store = group_store
    created = await new_game(store, "g1")
    await new_game(store, "g2")
    (g2_head,) = (await heads(store, ["g2"])).values()
    first = [played(1), played(2)]
    monkeypatch.setattr("service.store.streams.Batch", functools.partial(Batch, recorded_at=CLOCK))
    hash_3 = Batch(
        "g1", 1, created.last_hash, first, {"actor": 0}, "first", request_hash("first"), CLOCK
    ).hashes[-1]
    before = store.group_commit_stats()
    results = await asyncio.gather(
        attempt(store, "g1", 1, created.last_hash, "first", events=first),
        attempt(store, "g1", 3, hash_3, "second", events=[played(3)]),
        attempt(store, "g1", 1, created.last_hash, "rival", events=[played(9)]),
        attempt(store, "g1", 1, created.last_hash, "first", events=first),
        attempt(store, "g2", 1, g2_head.last_hash, "other"),
    )
    assert stats_delta(store, before) == (4, 5), "one command of g1 per group; g2's went with the second"
    one, two, rival, again, other = results
    assert isinstance(one, AppendResult) and (one.first_version, one.last_version) == (2, 3)
    assert isinstance(two, AppendResult) and (two.first_version, two.last_version) == (4, 4)
    assert isinstance(rival, VersionConflict) and rival.actual == 4
    assert isinstance(again, AppendResult) and again.duplicate and again.last_hash == one.last_hash
    assert isinstance(other, AppendResult) and not other.duplicate
    stream = await store.read_stream("g1")
    assert [e.metadata["command_id"] for e in stream[1:]] == ["first", "first", "second"]
    assert stream[2].hash == hash_3 and stream[2].recorded_at == CLOCK
    assert_valid_stream(stream)


# --- what only the database sees ----------------------------------------------------------------------


async def test_a_group_the_database_refuses_is_resent_command_by_command(
    group_store: EventStore, database_url: str
) -> None:
    """Another transaction writes g1's next version after the group's snapshot: the checks pass, the
    unique key refuses the row and with it the statement, nothing of the group is written, and each
    command is sent again alone: g1's is a conflict, the others commit."""
    store = group_store
    for game_id in ("lead", "g1", "g2", "g3"):
        await new_game(store, game_id)
    at = await heads(store, ["lead", "g1", "g2", "g3"])
    # Another writer's command, with its ledger row and its event of hash version 2 (after g1's first).
    rival = forged_row(
        "g1", 2, at["g1"].last_hash, played(7), {"command_id": "rival", "request_sha256": "00"}
    )
    async with await psycopg.AsyncConnection.connect(database_url) as other:  # a transaction, open
        await other.execute(
            "INSERT INTO commands (game_id, command_id, request_sha256, first_version, last_version, "
            "recorded_at) VALUES ('g1', 'rival', '\\x00', 2, 2, %(recorded_at)s)",
            rival,
        )
        await other.execute(INSERT_ROW, rival)
        before = store.group_commit_stats()
        group = asyncio.gather(
            *(
                attempt(store, g, 1, at[g].last_hash, f"c-{g}", events=[played(1)])
                for g in ("lead", "g1", "g2", "g3")  # "lead" alone, then a group of three
            )
        )
        await wait_for_blocked_statement(database_url)  # the group waits for g1's version 2
        await other.commit()
        lead, conflict, ok2, ok3 = await group
    assert stats_delta(store, before) == (2, 4)
    assert isinstance(lead, AppendResult)
    assert isinstance(conflict, VersionConflict) and conflict.actual == 2
    assert isinstance(ok2, AppendResult) and isinstance(ok3, AppendResult)
    for game_id in ("g1", "g2", "g3"):
        assert_valid_stream(await store.read_stream(game_id))
    assert await store.command("g1", "c-g1") is None
    assert await store.command("g1", "rival") == (b"\x00", 2, 2)
    assert [e.metadata.get("command_id") for e in await store.read_stream("g2")][1:] == ["c-g2"]


class Counting(Writer[Head, int, None, "Ran[Head, None]"]):
    """A writer whose command ``n`` appends one event; it caches each game's head as the command handler
    does, so that commands started together queue together (a cached load does no I/O)."""

    def __init__(self, store: EventStore) -> None:
        super().__init__(store)
        self.heads: dict[str, Head] = {}

    async def load(self, game_id: str, fresh: bool) -> Head:
        if not fresh and game_id in self.heads:
            return self.heads[game_id]
        last = (await self.store.read_stream(game_id))[-1]
        self.heads[game_id] = Head(last.version, last.hash)
        return self.heads[game_id]

    def head(self, snapshot: Head) -> Head:
        return snapshot

    def decide(self, snapshot: Head, command: int) -> Decision[None]:
        return Decision([played(command)], None)

    async def answer(self, game_id: str, ran: Ran[Head, None]) -> Ran[Head, None]:
        if isinstance(ran, Appended):
            self.heads[game_id] = Head(ran.result.last_version, ran.result.last_hash)
        return ran


async def handle(writer: Counting, game_id: str, command: int) -> Ran[Head, None] | Exception:
    try:
        return await writer.handle(
            game_id,
            command,
            command_id=f"{game_id}/{command}",
            request_hash=request_hash(f"{game_id}/{command}"),
            metadata={"actor": 0},
        )
    except Exception as error:
        return error


HOLD = (
    "SELECT pg_advisory_lock(4242)",
    "CREATE TRIGGER test_hold BEFORE INSERT ON events FOR EACH ROW "
    "WHEN (NEW.game_id = 'held') EXECUTE FUNCTION test_hold()",
)


@pytest.fixture
async def hold_game(database_url: str) -> AsyncIterator[psycopg.AsyncConnection[tuple[object, ...]]]:
    """An owner's connection that arms :data:`HOLD`, a test-only trigger making an insert of an event of
    the game ``held`` wait for the advisory lock 4242, which it then holds; both gone afterwards."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            "CREATE FUNCTION test_hold() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NEW; END $$"
        )
        try:
            yield conn
        finally:
            await conn.execute("SELECT pg_advisory_unlock_all()")
            await conn.execute("DROP TRIGGER IF EXISTS test_hold ON events")


@pytest.mark.timeout(60)
async def test_a_connection_killed_mid_group_leaves_nothing_half_written(
    group_store: EventStore, database_url: str, hold_game: psycopg.AsyncConnection[tuple[object, ...]]
) -> None:
    """The group's statement is killed after writing some of its commands' rows (it waits, inside the
    statement, on the held game's event): none of its rows stay. The writer's callers retry with the same
    command ids (as a client does after an error), and every command — those acknowledged before the
    crash, retried too, and those of the killed group — is stored exactly once."""
    store = group_store
    games = ["a", "b", "held", "c", "d"]
    await new_game(store, "lead")
    for game_id in games:
        await new_game(store, game_id)
    writer = Counting(store)
    for game_id in [*games, "lead"]:
        await writer.load(game_id, True)
    acknowledged = await asyncio.gather(*(handle(writer, g, 1) for g in games))
    assert all(isinstance(r, Appended) for r in acknowledged), acknowledged
    for statement in HOLD:
        await hold_game.execute(statement)

    before = store.group_commit_stats()
    crashed = asyncio.gather(handle(writer, "lead", 2), *(handle(writer, g, 2) for g in games))
    pid = await wait_for_blocked_statement(database_url)
    # The group (all five games, queued behind "lead") has written its ledger rows and the events of
    # "a" and "b" (in its order) by now.
    await hold_game.execute("SELECT pg_terminate_backend(%s)", (pid,))
    led, *outcomes = await crashed
    assert stats_delta(store, before) == (2, 6)
    assert isinstance(led, Appended)
    assert all(isinstance(o, psycopg.OperationalError) for o in outcomes), outcomes
    for game_id in games:  # nothing of the killed group stayed
        assert await store.command(game_id, f"{game_id}/2") is None
        assert await store.stream_version(game_id) == 2
    await hold_game.execute("DROP TRIGGER test_hold ON events")

    retried = await asyncio.gather(*(handle(writer, g, n) for n in (1, 2) for g in games))
    for outcome, n in zip(retried, [n for n in (1, 2) for _ in games], strict=True):
        assert isinstance(outcome, Repeated if n == 1 else Appended), outcome
    for game_id in games:
        stream = await store.read_stream(game_id)
        assert_valid_stream(stream)
        ids = [e.metadata["command_id"] for e in stream[1:]]
        assert ids == [f"{game_id}/1", f"{game_id}/2"]
        assert [(r.command_id, r.first_version, r.last_version) for r in await store.ledger(game_id)] == [
            (f"create:{game_id}", 1, 1),
            (f"{game_id}/1", 2, 2),
            (f"{game_id}/2", 3, 3),
        ]
    assert await count(database_url, "SELECT count(*) FROM commands") == 3 * len(games) + 2


# --- how a failed group is settled (no database: a connection that fails as told) --------------------


class FailingConnection:
    """Fails every statement with ``error``; ``broken`` as psycopg says after it."""

    def __init__(self, error: Exception, broken: bool) -> None:
        self.error = error
        self.broken = broken

    async def execute(self, *args: object, **kwargs: object) -> None:
        raise self.error


class OnePool:
    def __init__(self, conn: FailingConnection) -> None:
        self.conn = conn

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[FailingConnection]:
        yield self.conn


async def never_alone(*args: object) -> AppendResult:
    raise AssertionError("a group of two is not sent alone")


@pytest.mark.parametrize(
    ("error", "broken", "resent"),
    [
        (psycopg.errors.DeadlockDetected("deadlock detected"), False, True),
        (psycopg.errors.SerializationFailure("could not serialize"), False, True),
        (psycopg.errors.QueryCanceled("statement timeout"), False, True),
        (psycopg.errors.UniqueViolation("duplicate key"), False, True),
        (ValueError("a value the driver cannot send"), False, True),
        (psycopg.errors.AdminShutdown("terminating connection"), True, False),
        (psycopg.OperationalError("server closed the connection unexpectedly"), True, False),
        # A primary drained for a switchover: the connection is fine, its server takes no writes; sent
        # again alone it would meet the same server, so each caller gets the error at once.
        (
            psycopg.errors.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction"),
            False,
            False,
        ),
    ],
)
async def test_a_refused_group_is_resent_alone_and_a_lost_one_fails(
    error: Exception, broken: bool, resent: bool
) -> None:
    """The server refused the group and rolled it back on a live connection (a deadlock with another
    instance's group, a serialization failure, a timeout, a key): each command is resent alone, where it
    is settled as without group commit. The connection was lost: nobody knows whether the group
    committed, so each caller gets the error (and retries with its command id)."""
    from service.store.group_commit import ALONE, GroupCommit, Pending

    pool = OnePool(FailingConnection(error, broken))
    group = GroupCommit(pool, channel="c", alone=never_alone, confirm=proven)  # type: ignore[arg-type]
    pending = [
        Pending(Batch(game, 1, GENESIS_HASH, [played(1)], {}, f"c-{game}", b"r")) for game in ("g1", "g2")
    ]
    await group._send(pending)
    for each in pending:
        outcome = each.future.result()
        assert outcome is ALONE if resent else outcome is error


async def proven(conn: object) -> None:
    """A synchronous standby that holds every commit."""


class CommittingConnection:
    """Commits the group: one row per command, each written."""

    broken = False

    async def execute(
        self, statement: str, params: dict[str, object], **kwargs: object
    ) -> CommittingConnection:
        self.count = len(params["batch"].obj)  # type: ignore[attr-defined]
        return self

    async def fetchall(self) -> list[tuple[object, ...]]:
        return [(i, [10 + i], [1], False, None, None) for i in range(self.count)]


async def test_a_group_not_proven_on_the_standby_is_answered_to_nobody() -> None:
    """The group committed, but its commit is not proven on a synchronous standby: no caller is told it
    succeeded, and none is sent again alone (it would meet the same server); each gets the refusal."""
    from service.store.errors import NotReplicated
    from service.store.group_commit import GroupCommit, Pending

    refusal = NotReplicated("0/1", "no standby is in the synchronous quorum")

    async def not_proven(conn: object) -> None:
        raise refusal

    pool = OnePool(CommittingConnection())  # type: ignore[arg-type]
    group = GroupCommit(pool, channel="c", alone=never_alone, confirm=not_proven)  # type: ignore[arg-type]
    pending = [
        Pending(Batch(game, 1, GENESIS_HASH, [played(1)], {}, f"c-{game}", b"r")) for game in ("g1", "g2")
    ]
    await group._send(pending)
    assert [each.future.result() for each in pending] == [refusal, refusal]


async def test_a_group_size_below_one_is_refused(database_url: str, store: EventStore) -> None:
    with pytest.raises(ValueError, match="max_batch"):
        await EventStore.open(database_url, max_batch=0)
