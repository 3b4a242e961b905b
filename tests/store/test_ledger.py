"""The command ledger against the events that carry command ids: a disagreement is refused, never acted on.

Each test edits one command's ledger row as only the database's owner can (its triggers off), or the
in-memory store's row, then sends the command again, through each store: PostgreSQL with group commit
(the retry then goes in a group, which settles it alone), PostgreSQL without it, and ``MemoryStore``.
A command whose row is gone is not carried out a second time; a row naming other versions or another
request answers no retry; both are :class:`LedgerMismatch`, and an untouched command still retries.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import psycopg
import pytest

from service.store import (
    AppendResult,
    EventStore,
    LedgerMismatch,
    MemoryStore,
    NewEvent,
    Store,
    StoredEvent,
)

from .support import assert_valid_stream, new_game, played, request_hash

_ROW = " WHERE game_id = %(game)s AND command_id = %(id)s"
#: The owner's edits of one ledger row, each leaving it at odds with the events that carry its id.
SQL_EDITS = {
    "deleted": "DELETE FROM commands" + _ROW,
    "versions": "UPDATE commands SET last_version = last_version + 1" + _ROW,
    "request": "UPDATE commands SET request_sha256 = sha256(request_sha256)" + _ROW,
}

Edit = Callable[[str, str, str], Awaitable[None]]


@dataclass
class Case:
    """A store, how to edit its ledger behind its back (``edit(kind, game_id, command_id)``, a kind of
    :data:`SQL_EDITS`), and whether it sends commands waiting together as a group."""

    store: Store
    edit: Edit
    grouped: bool


def sql_edit(owner_url: str) -> Edit:
    async def edit(kind: str, game_id: str, command_id: str) -> None:
        async with await psycopg.AsyncConnection.connect(owner_url) as conn:  # one transaction
            await conn.execute("ALTER TABLE commands DISABLE TRIGGER USER")
            cursor = await conn.execute(SQL_EDITS[kind], {"game": game_id, "id": command_id})
            assert cursor.rowcount == 1
            await conn.execute("ALTER TABLE commands ENABLE TRIGGER USER")

    return edit


def memory_edit(store: MemoryStore) -> Edit:
    async def edit(kind: str, game_id: str, command_id: str) -> None:
        rows = store._commands
        row = rows[game_id, command_id]
        if kind == "deleted":
            del rows[game_id, command_id]
        elif kind == "versions":
            rows[game_id, command_id] = dataclasses.replace(row, last_version=row.last_version + 1)
        else:
            request = hashlib.sha256(row.request_sha256).digest()
            rows[game_id, command_id] = dataclasses.replace(row, request_sha256=request)

    return edit


@pytest.fixture(
    params=[
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("postgres-alone", marks=pytest.mark.postgres),
        "memory",
    ]
)
def case(request: pytest.FixtureRequest) -> Case:
    if request.param == "memory":
        memory = MemoryStore()
        return Case(memory, memory_edit(memory), grouped=False)
    grouped = request.param == "postgres"
    store: EventStore = request.getfixturevalue("store" if grouped else "alone_store")
    return Case(store, sql_edit(request.getfixturevalue("database_url")), grouped)


COMMAND = [played(1), played(2)]


async def head(store: Store, game_id: str) -> StoredEvent:
    """The game's last event."""
    return (await store.read_stream(game_id, after_version=await store.stream_version(game_id) - 1))[-1]


async def send(
    store: Store,
    at: StoredEvent,
    command_id: str,
    request: bytes,
    events: Sequence[NewEvent] = COMMAND,
) -> AppendResult | Exception:
    """Append after ``at`` with its hash given (no I/O before the append: with group commit, commands
    sent together queue together), its exception returned rather than raised (to gather several)."""
    try:
        return await store.append(
            at.game_id,
            at.version,
            events,
            command_id=command_id,
            request_hash=request,
            metadata={"actor": "seat:1"},
            prev_hash=at.hash,
        )
    except Exception as error:
        return error


async def resend_with_others(
    case: Case, game_id: str, command_id: str, request: bytes
) -> AppendResult | Exception:
    """Send the command again (at the game's head) together with new commands of two other games: with
    group commit the first of those goes alone and the resend goes in a group with the second, which
    settles the resend alone. Both others must commit."""
    store = case.store
    for game in ("lead", "other"):
        if await store.game(game) is None:
            await new_game(store, game)
    heads = [await head(store, g) for g in ("lead", game_id, "other")]
    before = store.group_commit_stats() if isinstance(store, EventStore) else None
    n = heads[0].version
    lead, resent, other = await asyncio.gather(
        send(store, heads[0], f"lead-{n}", b"l", [played(n)]),
        send(store, heads[1], command_id, request),
        send(store, heads[2], f"other-{n}", b"o", [played(n)]),
    )
    assert isinstance(lead, AppendResult) and isinstance(other, AppendResult), (lead, other)
    if case.grouped:
        assert isinstance(store, EventStore) and before is not None
        now = store.group_commit_stats()
        assert (now["groups"] - before["groups"], now["commands"] - before["commands"]) == (2, 3)
    return resent


async def written(case: Case, game_id: str) -> tuple[AppendResult, AppendResult]:
    """A game with two commands after its creation: ``c`` (versions 2–3) and ``d`` (version 4)."""
    created = await new_game(case.store, game_id)
    c = await send(case.store, created.events[-1], "c", request_hash("c"))
    assert isinstance(c, AppendResult)
    d = await send(case.store, c.events[-1], "d", request_hash("d"), [played(3)])
    assert isinstance(d, AppendResult)
    return c, d


async def test_a_command_whose_ledger_row_is_gone_is_refused_not_carried_out_again(case: Case) -> None:
    """Before version 2 of the row hash, a command id without its ledger row was a new command: sent
    again, it would have been carried out a second time."""
    store = case.store
    _, d = await written(case, "g1")
    await case.edit("deleted", "g1", "c")
    assert [row.command_id for row in await store.ledger("g1")] == ["create:g1", "d"]

    # Its events still carry the id: at the game's head (where it would be written anew), with its
    # old expected version, or for another request, the command is refused, in a group or alone.
    refused = await resend_with_others(case, "g1", "c", request_hash("c"))
    assert isinstance(refused, LedgerMismatch), refused
    assert (refused.game_id, refused.command_id) == ("g1", "c")
    assert "ledger" in str(refused)
    for expected, request in ((1, request_hash("c")), (4, b"another request")):
        with pytest.raises(LedgerMismatch):
            await store.append("g1", expected, COMMAND, command_id="c", request_hash=request, metadata={})
    with pytest.raises(LedgerMismatch, match="'c'"):
        await store.command("g1", "c")
    assert await store.stream_version("g1") == 4
    assert [e.metadata["command_id"] for e in await store.read_stream("g1")][1:] == ["c", "c", "d"]

    # The other commands are untouched: a retry is answered with its first result, a new one written.
    again = await resend_with_others(case, "g1", "d", request_hash("d"))
    assert again == AppendResult(d.first_version, d.last_version, d.last_hash, duplicate=True)
    assert await store.command("g1", "d") == (request_hash("d"), 4, 4)
    assert isinstance(await send(store, await head(store, "g1"), "e", request_hash("e")), AppendResult)
    assert await store.stream_version("g1") == 6
    assert_valid_stream(await store.read_stream("g1"))


@pytest.mark.parametrize("kind", ["versions", "request"])
async def test_a_retry_its_ledger_row_contradicts_is_refused(case: Case, kind: str) -> None:
    """The row names versions 2–4 where the events that carry the id are 2–3, or a request hash that is
    not the one those events carry: no retry is answered from it."""
    store = case.store
    c, d = await written(case, "g1")
    untouched = await resend_with_others(case, "g1", "c", request_hash("c"))
    assert untouched == AppendResult(c.first_version, c.last_version, c.last_hash, duplicate=True)

    await case.edit(kind, "g1", "c")
    (row,) = [row for row in await store.ledger("g1") if row.command_id == "c"]
    if kind == "versions":
        assert (row.first_version, row.last_version, row.request_sha256) == (2, 4, request_hash("c"))
    else:
        assert (row.first_version, row.last_version) == (2, 3) and row.request_sha256 != request_hash("c")
    refused = await resend_with_others(case, "g1", "c", request_hash("c"))
    assert isinstance(refused, LedgerMismatch), refused
    assert (refused.game_id, refused.command_id) == ("g1", "c")
    with pytest.raises(LedgerMismatch):  # with the row's own request hash too: the events say otherwise
        await store.append("g1", 1, COMMAND, command_id="c", request_hash=row.request_sha256, metadata={})
    with pytest.raises(LedgerMismatch):
        await store.command("g1", "c")
    assert await store.stream_version("g1") == 4

    again = await resend_with_others(case, "g1", "d", request_hash("d"))
    assert again == AppendResult(d.first_version, d.last_version, d.last_hash, duplicate=True)
    assert_valid_stream(await store.read_stream("g1"))


async def test_a_creation_whose_ledger_row_is_gone_is_refused(case: Case) -> None:
    """A retried creation finds the game taken and its first events carrying the command id: it is not
    :class:`GameExists` (another command) nor a duplicate, but a disagreement of ledger and events."""
    store = case.store
    await new_game(store, "g1")
    await case.edit("deleted", "g1", "create:g1")
    with pytest.raises(LedgerMismatch) as refused:
        await new_game(store, "g1")
    assert refused.value.command_id == "create:g1"
    assert await store.stream_version("g1") == 1
    assert await store.ledger("g1") == []
