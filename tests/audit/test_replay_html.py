"""The arbiter's replay page without a browser: self-contained, escaped, the tables the verifier judged,
and a seat's view that shows no other hand (tests/test_replay_browser.py drives it in Chromium)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import grpc
import markupsafe
import pytest

from service.api.server import RunningServer
from service.app.auditor import Auditor
from service.audit.replay_html import SeatError, record_replay_html
from service.cli.main import main
from service.domain.entries import DisputeKind
from service.domain.errors import InvalidInput
from service.records.record import read_record, read_record_file
from service.records.verify import verify_record
from service.rules.options import Variant
from service.store import EventStore
from tests.api.support import ADMIN, fails_with
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc

from .support import store_simulated

DATA = Path(__file__).parent.parent / "data"
BOTH = DATA / "replay" / "wd4_challenge_and_catch.jsonl"
RECORDS = [*sorted((DATA / "records").glob("*.jsonl")), BOTH]
HOSTILE = "</script><script>alert(1)</script><img src=x onerror=alert(2)>"  # 62 characters


def page_of(path: Path, seat: int | None = None) -> str:
    record = read_record_file(path)
    return record_replay_html(record, verify_record(record), seat=seat, title=path.name)


def data_of(page: str) -> dict[str, Any]:
    """The per-position data the page's script renders (its one JSON blob)."""
    found = re.search(r'<script id="replay-data" type="application/json">(.*?)</script>', page, re.S)
    assert found is not None
    data: dict[str, Any] = json.loads(found.group(1))
    return data


def step_at(data: dict[str, Any], at: int) -> dict[str, Any]:
    step: dict[str, Any] = next(s for s in data["steps"] if s["at"] == at)
    return step


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.stem)
def test_the_page_is_self_contained(path: Path) -> None:
    page = page_of(path)

    assert not re.search(r"https?://", page, re.I), "the page refers to the network"
    assert not re.search(r"<(link|iframe|img|object|embed)\b", page, re.I)
    assert not re.search(r"<script[^>]*\bsrc=", page, re.I)
    assert page.count("<script") == 2  # the data and the inline script, nothing fetched


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.stem)
def test_every_line_is_a_position_with_the_verifiers_findings_on_it(path: Path) -> None:
    record = read_record_file(path)
    report = verify_record(record)
    data = data_of(record_replay_html(record, report))

    lines = [record.header.line] + [
        line for block in record.rounds for line in [block.start.line, *(a.line for a in block.actions)]
    ]
    if report.stopped_at is not None:
        lines = [line for line in lines if line <= report.stopped_at]
    assert [step["at"] for step in data["steps"]] == lines
    assert [(r["at"], r["rule"]) for r in data["rulings"]] == [(r.at, r.rule.value) for r in report.rulings]
    assert [(v["at"], v["rule"]) for v in data["violations"]] == [
        (v.at, v.rule.value) for v in report.violations
    ]
    for item in data["rulings"] + data["violations"]:
        assert data["steps"][item["step"]]["at"] == item["at"]
    last = data["steps"][-1]["table"]
    if report.stopped_at is None:  # the last position's table is the report's final table
        final = report.final
        assert {h["name"]: h["cards"] for h in last["hands"]} == {
            name: [c.token for c in hand] for name, hand in final.hands.items()
        }
        assert last["top"] == (final.top.token if final.top else None)


def test_the_tables_follow_the_challenge_and_the_catch() -> None:
    data = data_of(page_of(BOTH))

    challenged = step_at(data, 4)["table"]
    ann, bob = challenged["hands"]
    assert (ann["count"], bob["count"]) == (10, 7)  # the upheld challenge: ann took four
    assert challenged["top"] == "W+4" and challenged["colour"] == "R" and challenged["turn"] == "bob"
    ruling = next(r for r in data["rulings"] if r["at"] == 4)
    assert ruling["rule"] == "wd4.challenge.upheld" and ruling["evidence"]["matching"] == ["B2"]
    assert ruling["jumps"] == {"played_at": data["steps"].index(step_at(data, 3))}

    caught = next(r for r in data["rulings"] if r["at"] == 12)
    assert caught["rule"] == "uno.catch" and caught["evidence"]["hand"] == ["Y7"]
    assert caught["evidence"]["window_opened"] == 11
    before, after = step_at(data, 11)["table"], step_at(data, 12)["table"]
    assert before["hands"][1]["uno_window"] and before["hands"][1]["cards"] == ["Y7"]
    assert after["hands"][1]["cards"] == ["Y7", "Y2", "Y3"] and not after["hands"][1]["uno_window"]


def test_a_hostile_player_name_is_text_not_markup() -> None:
    text = BOTH.read_text().replace('"ann"', json.dumps(HOSTILE))
    record = read_record(text)
    page = record_replay_html(record, verify_record(record), title=HOSTILE)

    assert HOSTILE not in page
    assert "<script>alert" not in page and "<img" not in page
    assert page.count("<script") == 2 and page.count("</script>") == 2
    assert str(markupsafe.escape(HOSTILE)) in page  # the heading's text, escaped
    assert data_of(page)["players"][0] == HOSTILE  # and the data gives it back as it was


def test_a_seats_view_shows_its_own_hand_and_only_counts_of_the_others() -> None:
    everything = data_of(page_of(BOTH))
    ann_only = data_of(page_of(BOTH, seat=0))

    for seen, full in zip(ann_only["steps"], everything["steps"], strict=True):
        if seen["table"] is None:
            continue
        ann, bob = seen["table"]["hands"]
        assert ann["cards"] == full["table"]["hands"][0]["cards"]
        assert bob["cards"] is None and bob["count"] == full["table"]["hands"][1]["count"]
    assert any(s["table"] and s["table"]["hands"][1]["cards"] for s in everything["steps"])
    # Bob's dealt hand and his penalty cards are hidden in the events; ann's own are not.
    blob = json.dumps(ann_only["steps"])
    assert '"Y2"' not in blob and '"GS"' in blob  # bob's penalty card; his played GS is public
    dealt = next(e for e in step_at(ann_only, 2)["events"] if e["type"] == "RoundStarted")
    assert dict(dealt["fields"])["hands"][1] == [None] * 7
    assert dict(dealt["fields"])["hands"][0][0] == "W+4"
    # Evidence hands are the adjudicator's only, as every AuditService reply gives them, but that the
    # offender's hand is shown to the challenger (wd4.challenge): bob challenged ann's W+4 at 4.
    caught = next(r for r in ann_only["rulings"] if r["at"] == 12)
    assert caught["evidence"]["hand"] == [None]
    assert next(r for r in ann_only["rulings"] if r["at"] == 4)["evidence"]["matching"] == [None]
    bob_only = data_of(page_of(BOTH, seat=1))
    challenge = next(r for r in bob_only["rulings"] if r["at"] == 4)
    assert challenge["by"] == "bob" and challenge["evidence"]["matching"] == ["B2"]
    assert next(r for r in bob_only["rulings"] if r["at"] == 12)["evidence"]["hand"] == [None]


def test_a_seat_the_game_does_not_have_is_refused() -> None:
    with pytest.raises(SeatError, match="seats are 0 to 1, not 2"):
        page_of(BOTH, seat=2)


def test_the_score_chart_has_a_line_per_player_and_a_point_per_round() -> None:
    page = page_of(DATA / "records" / "sonic_scoring_230.jsonl")
    chart = re.search(r'<svg id="score-chart".*?</svg>', page, re.S)

    assert chart is not None
    players = read_record_file(DATA / "records" / "sonic_scoring_230.jsonl").header.players
    assert chart.group(0).count("<polyline") == len(players)
    assert "230" in chart.group(0)
    assert 'id="score-chart-empty"' in page_of(BOTH)  # no round ended: no chart


def test_the_command_writes_the_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "replay.html"

    assert main(["replay", "--record", str(BOTH), "--out", str(out), "--as-seat", "1"]) == 0
    assert data_of(out.read_text(encoding="utf-8"))["viewer"] == "seat 1 (bob)"
    assert main(["replay", "--record", str(BOTH), "--as-seat", "5"]) == 2
    assert "seats are 0 to 1, not 5" in capsys.readouterr().err
    assert main(["replay", "--record", str(tmp_path / "missing.jsonl")]) == 2


async def test_a_stored_game_replays_in_positions_with_its_chain(store: EventStore) -> None:
    game = await store_simulated(store, Variant.CLASSIC, seed=5, players=2)
    page = await Auditor(store).replay(game)
    data = data_of(page)

    assert data["unit"] == "position" and data["steps"][0]["label"] == "position 1"
    assert [s["at"] for s in data["steps"]] == sorted(s["at"] for s in data["steps"])
    assert "intact" in page and "revealed" in page
    assert all(h["cards"] is not None for h in data["steps"][-1]["table"]["hands"])
    seat = data_of(await Auditor(store).replay(game, seat=1))
    assert all(s["table"] is None or s["table"]["hands"][0]["cards"] is None for s in seat["steps"])
    with pytest.raises(InvalidInput):
        await Auditor(store).replay(game, seat=2)


async def test_replay_game_is_the_adjudicators(
    server: RunningServer, audit: audit_pb2_grpc.AuditServiceStub
) -> None:
    game = await store_simulated(server.store, Variant.CLASSIC, seed=6, players=2)

    reply = await audit.ReplayGame(apb.ReplayGameRequest(game_id=game), metadata=ADMIN)
    assert data_of(reply.html)["viewer"].startswith("the adjudicator")
    seat = await audit.ReplayGame(apb.ReplayGameRequest(game_id=game, as_seat=0), metadata=ADMIN)
    assert data_of(seat.html)["viewer"].startswith("seat 0")
    await fails_with(audit.ReplayGame(apb.ReplayGameRequest(game_id=game)), grpc.StatusCode.UNAUTHENTICATED)
    await fails_with(
        audit.ReplayGame(apb.ReplayGameRequest(game_id=game, as_seat=3), metadata=ADMIN),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="as_seat",
    )
    await fails_with(
        audit.ReplayGame(apb.ReplayGameRequest(game_id="no-such-game"), metadata=ADMIN),
        grpc.StatusCode.NOT_FOUND,
    )


async def test_an_imported_games_dispute_stands_at_the_position_it_disputes(store: EventStore) -> None:
    auditor = Auditor(store)
    imported = await auditor.import_record(
        BOTH.read_text(),
        tournament_id="",
        seat_token_hashes=lambda count: [bytes([seat]) * 32 for seat in range(count)],
        command_id="import-1",
        request_hash=b"import-1",
    )
    game, catch = imported.game_id, 13  # line 12, the catch, is at position 13 of an imported record
    filed = await auditor.file_dispute(
        game,
        seat=1,
        kind=DisputeKind.UNO_CATCH,
        position=catch,
        by=None,
        target=None,
        claim=HOSTILE,
        command_id="dispute-1",
        request_hash=b"dispute-1",
    )
    await auditor.rule_on_dispute(
        game, filed.filed.dispute_id, note="upheld", command_id="ruling-1", request_hash=b"ruling-1"
    )

    page = await auditor.replay(game)
    data = data_of(page)
    (dispute,) = data["disputes"]
    assert data["steps"][dispute["step"]]["at"] == catch
    assert dispute["claim"] == HOSTILE and HOSTILE not in page
    assert dispute["ruling"]["rule"] == "uno.catch" and dispute["ruling"]["evidence"]["hand"] == ["Y7"]
    assert [r["at"] for r in data["rulings"]] == [5, catch]  # the challenge (line 4) and the catch
    seen_by_bob = data_of(await auditor.replay(game, seat=1))
    assert seen_by_bob["disputes"][0]["ruling"]["evidence"]["hand"] == [None]
