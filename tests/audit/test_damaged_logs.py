"""A damaged log gets a report, never an exception: whatever a database superuser did to a game's rows
(a payload changed into another valid event or out of shape, a type renamed, rows deleted or swapped,
the hash chain recomputed over the edit so that it holds again), ``VerifyGame`` answers OK with a report
and ``uno-audit verify --game/--all --json`` print one JSON object, and every edit the log can tell is
reported as invalid, at its position.

The property stores real games in PostgreSQL (bot games, some still in progress, some with a dispute
and its ruling, some imported from a record), lets the read models catch up, then edits the rows with
the immutability triggers off, as in ``test_tamper``. What the report must say is decided from the edit
itself, never from the report: an edit the chain was not recomputed over is found at its first changed
position; a row the catalogue can no longer read is named where it stands; a deleted row leaves a hole
or a ledger the stream falls short of. An edit recomputed into a consistent chain and still a legal game
(another valid event of the same type) may go unseen: the published head hash is what catches a rewrite
of the chain from some point on (``docs/RECORD.md``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import io
import json
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from psycopg.types.json import Jsonb

from projections import Projector
from service.api.server import RunningServer
from service.app import auditor as auditor_module
from service.app.auditor import Auditor
from service.audit.game_report import Flaw
from service.audit.log import GameLog
from service.audit.stored_game import verify_game
from service.cli.main import main
from service.domain.catalogue import AUDIT_TYPES, CATALOGUE, GAME_TYPES, CatalogueError, encode
from service.domain.entries import DisputeKind
from service.play.simulate import SimulatedGame, play_game
from service.records.export import record_from_game
from service.records.record import write_record
from service.rules.events import DealerDrawn, RoundStarted
from service.rules.options import Variant
from service.store import GENESIS_HASH, EventStore, StoredEvent, chain_hash
from tests import golden
from tests.api.support import ADMIN
from tests.projections.projection_support import simulate, store_game
from tests.tiers import examples
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc

from .logs import imported_rows
from .test_tamper import tamper

ROOT = Path(__file__).parent.parent.parent

#: How the rows may be edited (see :func:`edited`).
EDITS = (
    "another-valid-event",
    "field-changed",
    "field-unknown",
    "field-missing",
    "field-wrong-type",
    "not-an-object",
    "type-renamed",
    "huge-number",
    "metadata",
    "deleted",
    "deleted-tail",
    "swapped-contents",
    "swapped-rows",
)
#: The most commands a game of the property has (each is one transaction to store).
MAX_COMMANDS = 100
#: JSON values a field may be set to: wrong types, out-of-range seats, unknown cards, a number no
#: double holds.
ODD_VALUES: tuple[Any, ...] = (None, True, -1, 99, "", "??", "R7", [], {}, [1, "x"], {"a": 1}, 10**400)


@dataclasses.dataclass
class Row:
    """One stored row as the superuser sees it: its key, and what the edit may change."""

    position: int
    version: int
    type: str
    payload: Any
    metadata: Any
    prev_hash: bytes
    hash: bytes

    def columns(self) -> list[Any]:
        """The columns an edit writes, in the order of :func:`apply`'s statement."""
        return [self.version, self.type, Jsonb(self.payload), Jsonb(self.metadata), self.prev_hash, self.hash]

    def content(self) -> tuple[int, str, str]:
        """What the hash chain covers: version, type and payload."""
        return self.version, self.type, json.dumps(self.payload, sort_keys=True)

    def stored(self) -> tuple[object, ...]:
        """What the chain check reads: the content and the two hashes."""
        return *self.content(), self.prev_hash, self.hash


@dataclasses.dataclass
class Edit:
    """A superuser's edit of one game's rows: what is left of them, and what a report must say."""

    kind: str
    rehashed: bool
    rows: list[Row]
    deleted: list[int]  # row positions (the table's key)
    first_changed: int | None  # the first version whose stored row differs (None: nothing did)
    unreadable_at: int | None  # the version of a row the catalogue can no longer read
    regrouped: bool  # a metadata moved (not hashed: the command ids that group the events)


async def read_rows(database_url: str, game_id: str) -> list[Row]:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cursor = await conn.execute(
            "SELECT position, version, type, payload, metadata, prev_hash, hash FROM events "
            "WHERE game_id = %s ORDER BY version",
            (game_id,),
        )
        return [Row(*row) for row in await cursor.fetchall()]


async def apply(database_url: str, game_id: str, original: Sequence[Row], edit: Edit) -> None:
    """Write ``edit`` over ``original`` as the database superuser, the row triggers off meanwhile."""
    before = {row.position: row for row in original}
    changed = [row for row in edit.rows if row != before[row.position]]
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        await conn.execute("ALTER TABLE events DISABLE TRIGGER USER")
        for position in edit.deleted:
            await conn.execute("DELETE FROM events WHERE position = %s", (position,))
        for row in changed:  # out of the way first: versions are unique per game
            await conn.execute(
                "UPDATE events SET version = version + 1000000 WHERE position = %s", (row.position,)
            )
        for row in changed:
            await conn.execute(
                "UPDATE events SET version = %s, type = %s, payload = %s, metadata = %s, prev_hash = %s, "
                "hash = %s WHERE position = %s",
                [*row.columns(), row.position],
            )
        await conn.execute("ALTER TABLE events ENABLE TRIGGER USER")
        await conn.commit()


def first_difference(original: Sequence[Row], rows: Sequence[Row]) -> int | None:
    """The first version whose stored row (what the chain covers, and the hashes) differs, or is gone."""
    now = {row.version: row.stored() for row in rows}
    return min((row.version for row in original if now.get(row.version) != row.stored()), default=None)


def unreadable(row: Row) -> bool:
    """Whether the one catalogue can no longer read ``row`` (an oracle apart from the verifier's code)."""
    try:
        CATALOGUE.decode(row.type, row.payload)
    except CatalogueError:
        return True
    return False


def edited(data: st.DataObject, game_id: str, original: Sequence[Row]) -> Edit:
    """A random superuser edit of ``original`` (drawn from ``data``)."""
    rows = [dataclasses.replace(row) for row in original]
    audit = [i for i, row in enumerate(rows) if row.type in AUDIT_TYPES]
    where = st.one_of(st.just(0), st.integers(0, len(rows) - 1), *([st.sampled_from(audit)] if audit else []))
    at = data.draw(where, label="row")
    kind = data.draw(st.sampled_from(EDITS), label="edit")
    rehashed = data.draw(st.booleans(), label="rehashed")
    row = rows[at]
    deleted: list[int] = []
    fields = sorted(row.payload) if isinstance(row.payload, dict) else []
    if kind == "another-valid-event":
        same = [other for other in rows if other.type == row.type and other.payload != row.payload]
        if same:
            row.payload = data.draw(st.sampled_from(same), label="like").payload
    elif kind == "field-changed" and fields:
        name = data.draw(st.sampled_from(fields), label="field")
        seen = [other.payload[name] for other in rows if other.type == row.type and name in other.payload]
        row.payload = {
            **row.payload,
            name: data.draw(st.sampled_from(seen + list(ODD_VALUES)), label="value"),
        }
    elif kind == "field-unknown":
        row.payload = {**row.payload, "extra": 1}
    elif kind == "field-missing" and fields:
        name = data.draw(st.sampled_from(fields), label="field")
        row.payload = {key: value for key, value in row.payload.items() if key != name}
    elif kind == "field-wrong-type" and fields:
        name = data.draw(st.sampled_from(fields), label="field")
        row.payload = {**row.payload, name: data.draw(st.sampled_from(ODD_VALUES), label="value")}
    elif kind == "not-an-object":
        row.payload = data.draw(st.sampled_from([[], [1], "text", 3, None, True]), label="payload")
    elif kind == "type-renamed":
        names = sorted(GAME_TYPES | AUDIT_TYPES | {"NoSuchEvent"})
        row.type = data.draw(st.sampled_from(names), label="type")
    elif kind == "huge-number" and fields:
        row.payload = {**row.payload, data.draw(st.sampled_from(fields), label="field"): 10**400}
    elif kind == "metadata":
        row.metadata = data.draw(st.sampled_from([[], {}, {"command_id": "merged"}]), label="metadata")
    elif kind == "deleted":
        deleted = [rows.pop(at).position]
    elif kind == "deleted-tail" and at > 0:
        deleted = [r.position for r in rows[at:]]
        del rows[at:]
    elif kind.startswith("swapped"):
        other = rows[data.draw(st.integers(0, len(rows) - 1), label="other")]
        if kind == "swapped-contents":
            (row.type, row.payload), (other.type, other.payload) = (
                (other.type, other.payload),
                (row.type, row.payload),
            )
        else:
            row.version, other.version = other.version, row.version
    rows.sort(key=lambda r: r.version)
    start = first_difference(original, rows)
    if rehashed and start is not None:  # the chain recomputed from the edit on: it holds again
        prev = GENESIS_HASH
        for r in rows:
            if r.version >= start:
                r.prev_hash = prev
                r.hash = chain_hash(prev, game_id, r.version, r.type, r.payload)
            prev = r.hash
    first_changed = first_difference(original, rows)
    changed = [r for r in rows if r.content() not in {o.content() for o in original}]
    unreadable_at = min((r.version for r in changed if unreadable(r)), default=None)
    metadata = {row.version: row.metadata for row in original}
    regrouped = any(row.metadata != metadata.get(row.version) for row in rows)
    return Edit(kind, rehashed, rows, deleted, first_changed, unreadable_at, regrouped)


def short_game(variant: Variant, players: int, seed: int) -> SimulatedGame:
    """A one-round bot game of at most :data:`MAX_COMMANDS` commands (the first such from ``seed`` on),
    to store in a moment."""
    game = simulate(variant, players, seed, target_score=1)
    while len(game.steps) > MAX_COMMANDS:
        seed += 1000
        game = simulate(variant, players, seed, target_score=1)
    return game


async def store_short(store: EventStore, variant: Variant, seed: int) -> str:
    """A short bot game (:func:`short_game`) stored as the service stores it; its id."""
    game_id = str(uuid.uuid4())
    await store_game(store, game_id, short_game(variant, 3, seed))
    return game_id


async def stored_game(store: EventStore, data: st.DataObject) -> str:
    """A real game stored as the service stores it: a bot game (whole, or still in progress), with a
    dispute and its ruling or not, or a bot game's record imported."""
    variant = data.draw(st.sampled_from(list(Variant)), label="variant")
    players, seed = (
        data.draw(st.integers(2, 4), label="players"),
        data.draw(st.integers(0, 999), label="seed"),
    )
    game = short_game(variant, players, seed)
    auditor = Auditor(store)
    how = data.draw(st.sampled_from(["whole", "in-progress", "disputed", "imported"]), label="game")
    if how == "imported":
        imported = await auditor.import_record(
            write_record(record_from_game(game)),
            tournament_id="",
            seat_token_hashes=lambda n: [hashlib.sha256(bytes([seat])).digest() for seat in range(n)],
            command_id=str(uuid.uuid4()),
            request_hash=b"import",
        )
        return imported.game_id
    game_id = str(uuid.uuid4())
    steps = slice(0, data.draw(st.integers(2, len(game.steps) - 1))) if how == "in-progress" else None
    await store_game(store, game_id, game, steps=steps)
    if how == "disputed":
        dispute = await auditor.file_dispute(
            game_id,
            seat=0,
            kind=DisputeKind.UNO_CATCH,
            position=data.draw(st.integers(2, 30), label="disputed"),
            by=None,
            target=1,
            claim="I called it",
            command_id=str(uuid.uuid4()),
            request_hash=b"file",
        )
        await auditor.rule_on_dispute(
            game_id, dispute.filed.dispute_id, note="", command_id=str(uuid.uuid4()), request_hash=b"rule"
        )
    return game_id


async def cli(*argv: str) -> tuple[int, Any, str]:
    """``uno-audit ARGV`` in a worker thread (it runs its own event loop), its standard output and error
    its own (the server of the test, in the same process, logs elsewhere): the exit status, the one
    JSON object it printed, and its standard error."""

    def run() -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
        return code, out.getvalue(), err.getvalue()

    code, out, err = await asyncio.to_thread(run)
    assert out.count("\n") == 1 and out.endswith("\n"), out
    return code, json.loads(out), err


@settings(
    max_examples=examples(24),
    deadline=None,
    # Every example stores a real game: shrinking one would take minutes, and the failing example is
    # printed as drawn (each draw is labelled) and replayed from the example database.
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
async def test_every_damaged_log_gets_a_report_and_every_edit_the_log_can_tell_is_reported(
    server: RunningServer,
    audit: audit_pb2_grpc.AuditServiceStub,
    database_url: str,
    data: st.DataObject,
) -> None:
    game_id = await stored_game(server.store, data)
    async with await Projector.open(database_url) as projector:
        await projector.catch_up()  # the read models hold the game as it was, for the cross-check
    original = await read_rows(database_url, game_id)
    edit = edited(data, game_id, original)
    await apply(database_url, game_id, original, edit)

    try:
        reply = await audit.VerifyGame(apb.VerifyGameRequest(game_id=game_id), metadata=ADMIN)
    except grpc.aio.AioRpcError as error:
        pytest.fail(f"VerifyGame answered {error.code().name}: {error.details()}")
    report = json_format.MessageToDict(reply.report)
    assert report["game_id"] == game_id and report["valid"] is reply.valid

    code, printed, err = await cli("verify", "--game", game_id, "--json", "--database-url", database_url)
    assert code == (0 if reply.valid else 1) and printed["valid"] is reply.valid, err
    assert "Traceback" not in err
    code, every, err = await cli(
        "verify", "--all", "--json", "--no-projections", "--database-url", database_url
    )
    assert code in (0, 1) and game_id in {row["game_id"] for row in every["reports"]}, err
    # Every game verified, none left unverified (a row without an origin) by an exception.
    assert "Traceback" not in err and all(row["origin"] is not None for row in every["reports"])

    if edit.first_changed is not None and not edit.rehashed:
        # Tampering the chain was not recomputed over: found where it happened.
        assert not reply.valid and not reply.chain_valid
        assert reply.first_tampered_position == edit.first_changed, report["chain"]
    if edit.unreadable_at is not None:
        # A row no longer readable is named where it stands, however consistent the chain.
        named = [flaw["position"] for flaw in report["unreadable_entries"]]
        if report["unreadable"] is not None:
            named.append(report["unreadable"]["position"])
        assert not reply.valid and edit.unreadable_at in named, report
    if edit.kind.startswith("deleted") and edit.deleted:
        assert not reply.valid and not reply.chain_valid  # a hole, or a ledger the stream falls short of
    if edit.first_changed is None and not edit.regrouped:
        assert reply.valid, report  # nothing changed: no false alarm


# --- each way a damaged log used to raise, reported instead ----------------------------------------------


def rehashed(rows: Sequence[StoredEvent]) -> list[StoredEvent]:
    """``rows`` with the hash chain recomputed over them, as a superuser covering an edit would."""
    out: list[StoredEvent] = []
    for row in rows:
        prev = out[-1].hash if out else GENESIS_HASH
        digest = chain_hash(prev, row.game_id, row.version, row.type, row.payload)
        out.append(dataclasses.replace(row, prev_hash=prev, hash=digest))
    return out


def golden_log(rows: Sequence[StoredEvent], seed: str) -> GameLog:
    return GameLog(rows[0].game_id, rows, bytes.fromhex(seed))


def first(rows: Sequence[StoredEvent], kind: type) -> StoredEvent:
    return next(row for row in rows if row.type == kind.__name__)


def test_a_dealer_draw_whose_round_was_deleted_is_reported_where_reading_stops() -> None:
    meta, rows = golden.read(Variant.CLASSIC)  # its first dealer is drawn
    drawn = first(rows, DealerDrawn)
    dealt = first(rows, RoundStarted)
    damaged = rehashed([row for row in rows if row is not dealt])  # the hole is left, the chain holds

    report = verify_game(golden_log(damaged, meta["seed"]))

    assert report.unreadable is not None and report.unreadable.position == drawn.version
    assert "deal no round" in report.unreadable.message
    assert [(f.position, f.kind) for f in report.chain.findings] == [(dealt.version, "deleted")]
    json.dumps(report.to_json())


@pytest.mark.parametrize(
    ("edit", "message"),
    [({"dealer": 7}, "names seat 7"), ({"players": []}, "names seat")],
    ids=["dealer-out-of-range", "no-players"],
)
def test_a_game_created_edited_under_a_recomputed_chain_is_reported(
    edit: dict[str, object], message: str
) -> None:
    meta, rows = golden.read(Variant.CLASSIC)
    created = rows[0]
    damaged = rehashed([dataclasses.replace(created, payload={**created.payload, **edit}), *rows[1:]])

    report = verify_game(golden_log(damaged, meta["seed"]))

    assert report.chain.valid and not report.valid
    assert report.unreadable is not None and message in report.unreadable.message


def test_a_round_dealt_from_neither_deck_nor_hands_is_reported() -> None:
    meta, rows = golden.read(Variant.SONIC)
    dealt = first(rows, RoundStarted)
    damaged = rehashed(
        [dataclasses.replace(r, payload={**r.payload, "deck": None}) if r is dealt else r for r in rows]
    )

    report = verify_game(golden_log(damaged, meta["seed"]))

    assert report.unreadable == Flaw(
        dealt.version, f"the RoundStarted at {dealt.version} deals neither a deck nor hands"
    )


RECORD = write_record(record_from_game(play_game(Variant.ATTACK, 3, 1)))


def test_an_imported_game_whose_import_entry_no_longer_reads_is_reported() -> None:
    rows = imported_rows("g", RECORD)
    damaged = rehashed(
        [dataclasses.replace(rows[0], payload={**rows[0].payload, "lines": "many"}), *rows[1:]]
    )

    report = verify_game(GameLog("g", damaged))

    assert [flaw.position for flaw in report.unreadable_entries] == [1]
    assert report.unreadable == Flaw(1, "game 'g' holds no game events")
    assert not report.valid


def test_a_game_event_in_an_imported_games_stream_is_reported() -> None:
    rows = imported_rows("g", RECORD)
    line = rows[5]
    created = encode(play_game(Variant.ATTACK, 3, 1).events[0])
    damaged = rehashed(
        [dataclasses.replace(line, type=created[0], payload=created[1]) if r is line else r for r in rows]
    )

    report = verify_game(GameLog("g", damaged))

    assert report.unreadable == Flaw(6, "the GameCreated at 6 is not part of an imported record")
    # The chain was recomputed over the edit; the import's fingerprint says its line 5 is gone.
    assert [(f.position, f.kind) for f in report.chain.findings] == [(1, "fingerprint"), (6, "fingerprint")]
    assert not report.valid


async def test_verify_game_sends_a_number_no_double_holds_as_its_digits(
    server: RunningServer, audit: audit_pb2_grpc.AuditServiceStub, database_url: str
) -> None:
    game_id = await store_short(server.store, Variant.CLASSIC, seed=3)
    ended = next(row for row in await server.store.read_stream(game_id) if row.type == "RoundEnded")
    huge = 10**400
    await tamper(
        database_url,
        (
            "UPDATE events SET payload = jsonb_set(payload, '{points}', %s::text::jsonb) "
            "WHERE game_id = %s AND version = %s",
            (str(huge), game_id, ended.version),
        ),
    )

    reply = await audit.VerifyGame(apb.VerifyGameRequest(game_id=game_id), metadata=ADMIN)

    report = json_format.MessageToDict(reply.report)
    assert not reply.valid and reply.first_tampered_position == ended.version
    assert report["replay"]["diverged_at"]["stored"]["payload"]["points"] == str(huge)


async def test_verify_all_json_is_one_object_on_standard_output_whatever_the_logs(
    store: EventStore, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    games = [await store_short(store, variant, seed=1) for variant in (Variant.SONIC, Variant.ATTACK)]
    played = next(row for row in await store.read_stream(games[1]) if row.type == "CardPlayed")
    await tamper(
        database_url,
        ("UPDATE events SET payload = '[]' WHERE game_id = %s AND version = %s", (games[1], played.version)),
    )
    program = [
        sys.executable,
        "-m",
        "service.cli",
        "verify",
        "--all",
        "--json",
        "--database-url",
        database_url,
    ]

    ran = subprocess.run(program, capture_output=True, text=True, check=False, cwd=ROOT, timeout=120)

    assert ran.returncode == 1 and "Traceback" not in ran.stderr, ran.stderr
    summary = json.loads(ran.stdout)
    assert (summary["games"], summary["invalid"]) == (2, [games[1]])
    row = next(row for row in summary["reports"] if row["game_id"] == games[1])
    assert row["first_problem"].startswith(f"position {played.version}: chain changed")

    # A verifier that fails on a game (a bug, not the log) leaves the others verified and the JSON
    # whole: the failure goes to standard error.
    def failing(*args: object, **kwargs: object) -> None:
        raise RuntimeError("verifier bug")

    monkeypatch.setattr(auditor_module, "verify_game", failing)
    code, printed, err = await cli("verify", "--all", "--json", "--database-url", database_url)
    assert code == 1 and printed["invalid"] == sorted(games)
    assert all(
        row["first_problem"] == "verifier error: RuntimeError('verifier bug')" for row in printed["reports"]
    )
    assert "audit.verify_failed" in err
