"""The command ledger and the hashed metadata against edits behind the service's back.

A game is stored through a real PostgreSQL store (rows of hash version 2, a dispute filed through the
auditor), then edited as the owner with the row triggers off, and verified as ``verify --game`` does
(:meth:`Auditor.verify`). An edit of the ledger alone is a ``ledger`` finding at its command's first
version; an edit of an event's metadata, time or hash version is a ``changed`` finding at that event,
whatever the ledger says then; a metadata edit under a recomputed chain is left to the ledger to tell.
The expected positions come from the rows each test edited, never from the verifier's output.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from psycopg.types.json import Jsonb

from service.app.auditor import Auditor
from service.audit.chain import check_chain
from service.audit.game_report import GameReport
from service.audit.ledger import check_ledger
from service.domain.entries import DisputeKind
from service.play.simulate import play_game
from service.rules.options import Variant, make_options
from service.store import GENESIS_HASH, EventStore, LedgerRow, StoredEvent
from service.store.model import stored_hash
from service.store.streams import EVENT_COLUMNS, stored_event
from tests import golden
from tests.projections.projection_support import store_game
from tests.tiers import examples

from .test_imported_hash import cli

Statement = tuple[str, tuple[object, ...]]


async def as_owner(database_url: str, *statements: Statement) -> None:
    """Run ``statements`` as the owner, the row triggers of ``events`` and ``commands`` off meanwhile."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        for table in ("events", "commands"):
            await conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        for statement, params in statements:
            await conn.execute(statement, params)
        for table in ("events", "commands"):
            await conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")
        await conn.commit()


async def forge(database_url: str, game_id: str, edit: Callable[[StoredEvent], StoredEvent]) -> None:
    """Edit every row with ``edit`` and recompute every hash and link by each row's own hash version, as a
    forger who knows the formulas would: the chain alone then says "intact"."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute(
            f"SELECT {EVENT_COLUMNS} FROM events e WHERE e.game_id = %s ORDER BY e.version",
            (game_id,),
        )
        rows = [stored_event(row) for row in await cursor.fetchall()]
    statements: list[Statement] = []
    previous = GENESIS_HASH
    for row in rows:
        edited = edit(row)
        digest = stored_hash(edited, previous)
        statements.append(
            (
                "UPDATE events SET metadata = %s, recorded_at = %s, hash_version = %s, prev_hash = %s, "
                "hash = %s WHERE game_id = %s AND version = %s",
                (
                    Jsonb(edited.metadata),
                    edited.recorded_at,
                    edited.hash_version,
                    previous,
                    digest,
                    game_id,
                    row.version,
                ),
            )
        )
        previous = digest
    await as_owner(database_url, *statements)


@dataclasses.dataclass(frozen=True)
class Stored:
    """The stored game, as written: its rows and its command ledger."""

    game_id: str
    rows: list[StoredEvent]
    ledger: list[LedgerRow]

    def command(self, after: int) -> LedgerRow:
        """The first command of two events or more that starts after version ``after``."""
        return next(r for r in self.ledger if r.first_version > after and r.last_version > r.first_version)

    def row(self, version: int) -> StoredEvent:
        return self.rows[version - 1]


@pytest.fixture
async def game(store: EventStore) -> AsyncIterator[Stored]:
    """A short classic game (93 events) stored command by command, and a dispute filed about it."""
    game_id = str(uuid.uuid4())
    options = make_options(Variant.CLASSIC, {"target_score": 1})
    await store_game(store, game_id, play_game(Variant.CLASSIC, 3, 1, options=options))
    await Auditor(store).file_dispute(
        game_id,
        seat=1,
        kind=DisputeKind.UNO_CATCH,
        position=12,
        by=None,
        target=0,
        claim="caught too late",
        command_id="dispute-1",
        request_hash=b"file",
    )
    rows = await store.read_stream(game_id)
    assert {row.hash_version for row in rows} == {2}
    yield Stored(game_id, rows, await store.ledger(game_id))


async def verified(store: EventStore, game_id: str) -> GameReport:
    return await Auditor(store).verify(game_id, check_projections=False)


def found(report: GameReport) -> list[tuple[int, str]]:
    return [(f.position, f.kind) for f in report.chain.findings]


def told_by_the_chain(report: GameReport, position: int, kind: str) -> None:
    """The report is invalid, and its verdict is the chain's finding at ``position`` (not a rule the
    players are said to have broken)."""
    problem = report.first_problem()
    assert not report.valid and problem is not None
    assert problem.startswith(f"position {position}: chain {kind}: "), problem


def metadata_set(game_id: str, version: int, field: str, value: Any) -> Statement:
    return (
        "UPDATE events SET metadata = jsonb_set(metadata, ARRAY[%s], %s) WHERE game_id = %s AND version = %s",
        (field, Jsonb(value), game_id, version),
    )


# --- untouched ----------------------------------------------------------------------------------------------


async def test_an_unedited_game_has_no_findings_and_its_ledger_is_what_its_rows_say(
    store: EventStore, game: Stored
) -> None:
    report = await verified(store, game.game_id)

    assert report.valid and found(report) == []
    runs: dict[str, list[int]] = {}
    for row in game.rows:
        runs.setdefault(row.metadata["command_id"], []).append(row.version)
    assert [
        (r.command_id, r.request_sha256.hex(), r.first_version, r.last_version, r.recorded_at)
        for r in game.ledger
    ] == [
        (
            command_id,
            game.row(versions[0]).metadata["request_sha256"],
            versions[0],
            versions[-1],
            game.row(versions[0]).recorded_at,
        )
        for command_id, versions in runs.items()
    ]


# --- the ledger edited ------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["a table command", "the dispute"])
async def test_a_deleted_ledger_row_is_missing_at_its_commands_first_version(
    store: EventStore, database_url: str, game: Stored, which: str
) -> None:
    command = game.command(after=20) if which == "a table command" else game.ledger[-1]
    assert which == "a table command" or command.command_id == "dispute-1"
    await as_owner(
        database_url,
        (
            "DELETE FROM commands WHERE game_id = %s AND command_id = %s",
            (game.game_id, command.command_id),
        ),
    )

    report = await verified(store, game.game_id)

    assert found(report) == [(command.first_version, "ledger")]
    message = report.chain.findings[0].message
    assert repr(command.command_id) in message and "has no row" in message
    assert f"{command.first_version}–{command.last_version}" in message
    told_by_the_chain(report, command.first_version, "ledger")
    if which == "the dispute":
        code, text = await cli("verify", "--game", game.game_id, "--database-url", database_url)
        assert code == 1 and f"    position {command.first_version}: ledger: {message}\n" in text


@pytest.mark.parametrize(
    ("column", "value", "says"),
    [
        ("last_version", "last_version - 1", "it says versions {first}–{last_less}"),
        ("request_sha256", "sha256('another request'::bytea)", "it says request SHA-256 "),
        ("recorded_at", "recorded_at + interval '1 microsecond'", "it says recorded at "),
        ("recorded_at", "recorded_at - interval '1 hour'", "it says recorded at "),
    ],
    ids=["last-version", "request-sha256", "recorded-at-a-microsecond-later", "recorded-at-an-hour-earlier"],
)
async def test_a_changed_ledger_row_differs_at_its_commands_first_version(
    store: EventStore, database_url: str, game: Stored, column: str, value: str, says: str
) -> None:
    command = game.command(after=30)
    await as_owner(
        database_url,
        (
            f"UPDATE commands SET {column} = {value} WHERE game_id = %s AND command_id = %s",
            (game.game_id, command.command_id),
        ),
    )

    report = await verified(store, game.game_id)

    assert found(report) == [(command.first_version, "ledger")]
    message = report.chain.findings[0].message
    assert repr(command.command_id) in message and "differs from its events" in message
    assert says.format(first=command.first_version, last_less=command.last_version - 1) in message
    told_by_the_chain(report, command.first_version, "ledger")


async def test_an_extra_ledger_row_is_reported_extra(
    store: EventStore, database_url: str, game: Stored
) -> None:
    over = game.command(after=40)  # a made-up command claiming another's versions
    await as_owner(
        database_url,
        (
            "INSERT INTO commands (game_id, command_id, request_sha256, first_version, last_version, "
            "recorded_at) VALUES (%s, 'made-up', sha256('made up'::bytea), %s, %s, %s)",
            (game.game_id, over.first_version, over.last_version, over.recorded_at),
        ),
    )

    report = await verified(store, game.game_id)

    assert found(report) == [(over.first_version, "ledger")]
    assert "'made-up'" in report.chain.findings[0].message
    assert "is extra: no events carry that command id" in report.chain.findings[0].message


# --- an event's metadata, time or hash version edited ------------------------------------------------------


@pytest.mark.parametrize("how", ["merged-into-the-command-before", "split-off-its-command"])
async def test_an_events_command_id_edited_is_a_changed_event_not_a_players_fault(
    store: EventStore, database_url: str, game: Stored, how: str
) -> None:
    command = game.command(after=25)
    if how == "merged-into-the-command-before":
        at, command_id = command.first_version, game.row(command.first_version - 1).metadata["command_id"]
    else:
        at, command_id = command.last_version, "split-off"
    await as_owner(database_url, metadata_set(game.game_id, at, "command_id", command_id))

    report = await verified(store, game.game_id)

    assert found(report) == [(at, "changed")]
    told_by_the_chain(report, at, "changed")


async def test_an_events_metadata_turned_into_a_json_string_is_changed(
    store: EventStore, database_url: str, game: Stored
) -> None:
    at = game.command(after=35).first_version
    await as_owner(
        database_url,
        (
            "UPDATE events SET metadata = to_jsonb(metadata::text) WHERE game_id = %s AND version = %s",
            (game.game_id, at),
        ),
    )

    report = await verified(store, game.game_id)

    assert found(report) == [(at, "changed")]
    told_by_the_chain(report, at, "changed")


async def test_the_actor_rewritten_on_every_event_is_changed_from_the_first(
    store: EventStore, database_url: str, game: Stored
) -> None:
    await as_owner(
        database_url,
        (
            "UPDATE events SET metadata = jsonb_set(metadata, '{actor}', '\"forger\"') WHERE game_id = %s",
            (game.game_id,),
        ),
    )

    report = await verified(store, game.game_id)

    # Every event was edited: each is reported, the first one first.
    assert found(report) == [(row.version, "changed") for row in game.rows]
    told_by_the_chain(report, 1, "changed")


@pytest.mark.parametrize(
    ("which", "shift"),
    [("first", timedelta(microseconds=1)), ("last", timedelta(days=-3))],
    ids=["first-event-1us-later", "last-event-3-days-earlier"],
)
async def test_an_events_recorded_at_rewritten_is_changed(
    store: EventStore, database_url: str, game: Stored, which: str, shift: timedelta
) -> None:
    command = game.command(after=45)
    # The command's first event has the time its ledger row repeats; the ledger is not blamed either way.
    at = command.first_version if which == "first" else command.last_version
    await as_owner(
        database_url,
        (
            "UPDATE events SET recorded_at = %s WHERE game_id = %s AND version = %s",
            (game.row(at).recorded_at + shift, game.game_id, at),
        ),
    )

    report = await verified(store, game.game_id)

    assert found(report) == [(at, "changed")]
    told_by_the_chain(report, at, "changed")


async def test_an_event_set_back_to_hash_version_1_is_changed(
    store: EventStore, database_url: str, game: Stored
) -> None:
    at = game.command(after=50).first_version
    await as_owner(
        database_url,
        (
            "UPDATE events SET hash_version = 1 WHERE game_id = %s AND version = %s",
            (game.game_id, at),
        ),
    )

    report = await verified(store, game.game_id)

    # Found twice at the one place: the row went back to version 1, and its hash is not the version-1
    # hash of its content; nothing anywhere else.
    assert set(found(report)) == {(at, "changed")}
    assert any("row hash version 1 after a version-2 row" in f.message for f in report.chain.findings)
    told_by_the_chain(report, at, "changed")


async def test_an_event_set_back_to_hash_version_1_under_a_recomputed_chain_is_changed(
    store: EventStore, database_url: str, game: Stored
) -> None:
    at = game.command(after=50).first_version
    # The forger takes one event's metadata and time out of the chain and recomputes every hash.
    await forge(
        database_url,
        game.game_id,
        lambda row: dataclasses.replace(row, hash_version=1) if row.version == at else row,
    )

    report = await verified(store, game.game_id)

    assert found(report) == [(at, "changed")]
    assert "row hash version 1 after a version-2 row" in report.chain.findings[0].message
    told_by_the_chain(report, at, "changed")


# --- metadata edited under a recomputed chain: the ledger tells ---------------------------------------------


async def test_a_command_id_split_under_a_recomputed_chain_is_told_by_the_ledger(
    store: EventStore, database_url: str, game: Stored
) -> None:
    command = game.command(after=25)
    at = command.last_version

    def split_off(row: StoredEvent) -> StoredEvent:
        return (
            dataclasses.replace(row, metadata={**row.metadata, "command_id": "split-off"})
            if row.version == at
            else row
        )

    await forge(database_url, game.game_id, split_off)

    report = await verified(store, game.game_id)

    # The chain holds again; the ledger's row no longer matches its events, and no row has the new id.
    assert found(report) == [(command.first_version, "ledger"), (at, "ledger")]
    first, second = (f.message for f in report.chain.findings)
    assert f"it says versions {command.first_version}–{command.last_version}" in first
    assert "'split-off'" in second and "has no row" in second


async def test_a_request_hash_rewritten_under_a_recomputed_chain_is_told_by_the_ledger(
    store: EventStore, database_url: str, game: Stored
) -> None:
    command = game.command(after=60)
    forged = "00" * 32

    def rewritten(row: StoredEvent) -> StoredEvent:
        if command.first_version <= row.version <= command.last_version:
            return dataclasses.replace(row, metadata={**row.metadata, "request_sha256": forged})
        return row

    await forge(database_url, game.game_id, rewritten)

    report = await verified(store, game.game_id)

    assert found(report) == [(command.first_version, "ledger")]
    assert f"the events {forged}" in report.chain.findings[0].message


# --- the golden log stored across the upgrade (in memory) -------------------------------------------------


def test_only_the_ledger_rows_of_hashed_commands_are_checked_on_a_log_stored_across_the_upgrade() -> None:
    meta, rows = golden.read(golden.UPGRADED)
    ledger = golden.ledger(meta)
    upgraded_at = meta["upgraded_at"]
    before = next(r for r in ledger if r.first_version > 20)  # a version-1 command: no request hash hashed
    after = next(r for r in ledger if r.first_version > upgraded_at + 20)

    assert check_ledger(rows, ledger) == []
    assert check_ledger(rows, [r for r in ledger if r != before]) == []
    assert [(f.position, f.kind) for f in check_ledger(rows, [r for r in ledger if r != after])] == [
        (after.first_version, "ledger")
    ]


def test_metadata_is_under_the_chain_from_the_upgrade_on() -> None:
    meta, rows = golden.read(golden.UPGRADED)
    upgraded_at = meta["upgraded_at"]

    def actor_edited(version: int) -> list[StoredEvent]:
        edited = list(rows)
        row = edited[version - 1]
        edited[version - 1] = dataclasses.replace(row, metadata={**row.metadata, "actor": "forger"})
        return edited

    assert rows[upgraded_at - 2].hash_version == 1 and rows[upgraded_at - 1].hash_version == 2
    assert check_chain(meta["game_id"], actor_edited(upgraded_at - 1)) == []
    assert [(f.position, f.kind) for f in check_chain(meta["game_id"], actor_edited(upgraded_at))] == [
        (upgraded_at, "changed")
    ]


# --- any one metadata field of any one event ---------------------------------------------------------------

#: The metadata every event of a command carries (row hash version 2).
FIELDS = ("command_id", "request_sha256", "actor", "command")
values = st.one_of(
    # Text PostgreSQL's jsonb can hold: no NUL, no lone surrogate (the edit is made through it).
    st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=12),
    st.integers(-3, 10**9),
    st.booleans(),
    st.none(),
    st.lists(st.integers(0, 3), max_size=2),
)


@settings(
    max_examples=examples(40),
    deadline=None,
    # One stored game for every example, each edit undone after it; shrinking is cheap then.
    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
async def test_any_one_metadata_field_of_any_one_event_edited_is_changed_at_exactly_that_event(
    store: EventStore, database_url: str, game: Stored, data: st.DataObject
) -> None:
    at = data.draw(st.integers(1, len(game.rows)), label="version")
    row = game.row(at)
    field = data.draw(st.sampled_from(FIELDS), label="field")
    value = data.draw(values, label="value")
    assume(value != row.metadata[field] or type(value) is not type(row.metadata[field]))
    await as_owner(database_url, metadata_set(game.game_id, at, field, value))
    try:
        report = await verified(store, game.game_id)
    finally:
        await as_owner(
            database_url,
            (
                "UPDATE events SET metadata = %s WHERE game_id = %s AND version = %s",
                (Jsonb(row.metadata), game.game_id, at),
            ),
        )

    assert found(report) == [(at, "changed")]
    told_by_the_chain(report, at, "changed")
