"""Properties of the chain check: any single edit of a chained stream is reported once, at its position."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import assume, given
from hypothesis import strategies as st

from service.audit.chain import _row_facts, check_chain
from service.store import GENESIS_HASH, StoredEvent, chain_hash
from service.store.model import row_facts

GAME = "g"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
payloads = st.fixed_dictionaries(
    {"player": st.integers(0, 3), "card": st.sampled_from(["R1", "G2", "B3", "Y4"])}
)


def chained(contents: list[dict[str, int | str]]) -> list[StoredEvent]:
    rows, prev = [], GENESIS_HASH
    for version, payload in enumerate(contents, start=1):
        digest = chain_hash(prev, GAME, version, "CardPlayed", payload)
        rows.append(StoredEvent(version, GAME, version, "CardPlayed", payload, {}, NOW, 1, prev, digest))
        prev = digest
    return rows


streams = st.lists(payloads, min_size=3, max_size=40).map(chained)


@given(streams)
def test_an_untouched_stream_has_no_findings(rows: list[StoredEvent]) -> None:
    assert check_chain(GAME, rows, rows[-1].version) == []


@given(streams, st.data())
def test_a_changed_payload_is_reported_once_at_its_position(
    rows: list[StoredEvent], data: st.DataObject
) -> None:
    at = data.draw(st.integers(0, len(rows) - 1))
    new = data.draw(payloads)
    assume(new != rows[at].payload)
    rows[at] = dataclasses.replace(rows[at], payload=new)
    assert [(f.position, f.kind) for f in check_chain(GAME, rows)] == [(at + 1, "changed")]


@given(streams, st.data())
def test_a_deleted_event_is_reported_once_at_its_position(
    rows: list[StoredEvent], data: st.DataObject
) -> None:
    last = rows[-1].version
    at = data.draw(st.integers(0, len(rows) - 1))
    del rows[at]
    assert [(f.position, f.kind) for f in check_chain(GAME, rows, last)] == [(at + 1, "deleted")]


@given(streams, st.data())
def test_two_swapped_payloads_are_reported_once_at_the_first(
    rows: list[StoredEvent], data: st.DataObject
) -> None:
    first = data.draw(st.integers(0, len(rows) - 2))
    second = data.draw(st.integers(first + 1, len(rows) - 1))
    a, b = rows[first], rows[second]
    assume(a.payload != b.payload)
    rows[first], rows[second] = (
        dataclasses.replace(a, payload=b.payload),
        dataclasses.replace(b, payload=a.payload),
    )
    assert [(f.position, f.kind) for f in check_chain(GAME, rows)] == [(first + 1, "swapped")]


@given(streams, st.data())
def test_two_rows_that_changed_places_are_reported_once(rows: list[StoredEvent], data: st.DataObject) -> None:
    first = data.draw(st.integers(0, len(rows) - 2))
    second = data.draw(st.integers(first + 1, len(rows) - 1))
    a, b = rows[first], rows[second]
    assume(a.payload != b.payload)
    rows[first], rows[second] = (
        dataclasses.replace(b, version=a.version),
        dataclasses.replace(a, version=b.version),
    )
    assert [(f.position, f.kind) for f in check_chain(GAME, rows)] == [(first + 1, "swapped")]


@given(streams, st.data())
def test_a_rehashed_event_is_reported_at_its_position(rows: list[StoredEvent], data: st.DataObject) -> None:
    at = data.draw(st.integers(0, len(rows) - 2))  # not the last: its successor is what gives it away
    new = data.draw(payloads)
    assume(new != rows[at].payload)
    row = rows[at]
    rows[at] = dataclasses.replace(
        row, payload=new, hash=chain_hash(row.prev_hash, GAME, row.version, row.type, new)
    )
    assert [(f.position, f.kind) for f in check_chain(GAME, rows)] == [(at + 1, "changed")]


# --- row facts, written once per command ------------------------------------------------------------------

#: Metadata that compare equal and write otherwise (1, 1.0 and True; the keys 1 and True), and some that
#: write alike from unequal values (the key 1 and "1").
metadata = st.sampled_from(
    [{"a": 1}, {"a": True}, {"a": 1.0}, {"a": "1"}, {1: "a"}, {True: "a"}, {"1": "a"}, {}, [1], {"a": [1]}]
)
moments = st.sampled_from([NOW, NOW.replace(microsecond=1), NOW.astimezone(timezone(timedelta(hours=2)))])


@given(st.lists(st.tuples(st.sampled_from([2, 2, 1]), metadata, moments), max_size=12))
def test_row_facts_shared_by_a_command_are_the_ones_each_row_writes(
    described: list[tuple[int, object, datetime]],
) -> None:
    # Runs of equal rows, as a command's events are, with values that compare equal but write otherwise.
    rows = [
        StoredEvent(n, GAME, n, "CardPlayed", {}, meta, moment, 1, GENESIS_HASH, GENESIS_HASH, hash_version)
        for n, (hash_version, meta, moment) in enumerate(described, start=1)
        for _ in range(2)
    ]
    assert _row_facts(rows) == [row_facts(r.hash_version, r.metadata, r.recorded_at) for r in rows]
