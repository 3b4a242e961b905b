"""Fair dealing: with the seed, every deal, draw and launcher press of a stored game is re-derived and
compared with the log; a card the seed did not deal is reported at its position, even when the log's
chain is intact (a dishonest dealer writes a perfectly chained log). A round the admin dealt from a fixed
deck says so, and is reported as such (tests/audit/test_fixed_decks.py has the rest)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable

from google.protobuf import json_format

from service.api.server import RunningServer
from service.app.auditor import Auditor
from service.play.simulate import SimulatedGame, play_game
from service.records.record import read_record
from service.records.verify import verify_record
from service.rules.cards import Card
from service.rules.events import CardDrawn, Event, LauncherPressed
from service.rules.options import Variant
from service.rules.violations import Rule
from service.store import EventStore
from tests.api.support import ADMIN, arranged_deck, create_game, header, new_id
from tests.projections.projection_support import store_game
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc, game_pb2_grpc
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb


def altered(
    game: SimulatedGame, pick: Callable[[Event], Event | None], skip: int = 0
) -> tuple[SimulatedGame, int]:
    """``game`` with the ``skip``-th event that ``pick`` changes replaced by its change; also the index of
    the changed command among the steps."""
    steps = list(game.steps)
    seen = 0
    for index, (command, events) in enumerate(steps):
        for at, event in enumerate(events):
            changed = pick(event)
            if changed is None:
                continue
            if seen < skip:
                seen += 1
                continue
            steps[index] = (command, (*events[:at], changed, *events[at + 1 :]))
            return dataclasses.replace(game, steps=steps), index
    raise AssertionError("nothing to change")


def other_card(card: Card) -> Card:
    return Card.parse("R0") if card != Card.parse("R0") else Card.parse("B0")


async def stored_position(store: EventStore, game_id: str, kind: str, payload_key: str, value: object) -> int:
    for row in await store.read_stream(game_id):
        if row.type == kind and row.payload.get(payload_key) == value:
            return row.version
    raise AssertionError(f"no {kind} with {payload_key}={value!r}")


async def test_a_drawn_card_the_seed_did_not_deal_is_reported_at_its_position(store: EventStore) -> None:
    game = play_game(Variant.CLASSIC, 3, seed=21)
    forged, _ = altered(
        game,
        lambda e: dataclasses.replace(e, card=other_card(e.card)) if isinstance(e, CardDrawn) else None,
        skip=3,
    )
    game_id = str(uuid.uuid4())
    await store_game(store, game_id, forged)
    rows = await store.read_stream(game_id)
    original = [r for r in rows if r.type == "CardDrawn"][3]

    report = await Auditor(store).verify(game_id, check_projections=False)

    assert report.chain.valid and not report.valid
    assert report.seed is not None and report.seed.commitment_ok is True
    assert report.seed.mismatches[0].position == original.version
    assert report.replay is not None and report.replay.diverged_at is not None
    assert report.replay.diverged_at.position == original.version


async def test_a_launcher_press_the_seed_did_not_make_is_reported(store: EventStore) -> None:
    game = play_game(Variant.ATTACK, 3, seed=5)

    def fewer(event: Event) -> Event | None:
        if isinstance(event, LauncherPressed) and event.cause is Rule.ATTACK_LAUNCHER and event.cards:
            return dataclasses.replace(event, cards=event.cards[:-1])
        return None

    forged, _ = altered(game, fewer, skip=1)
    game_id = str(uuid.uuid4())
    await store_game(store, game_id, forged)
    presses = [
        r
        for r in await store.read_stream(game_id)
        if r.type == "LauncherPressed" and r.payload["cause"] == "attack.launcher" and r.payload["cards"]
    ]
    forged_press = presses[1]

    report = await Auditor(store).verify(game_id, check_projections=False)

    assert report.chain.valid and not report.valid
    assert report.seed is not None and report.rules is not None
    assert forged_press.version in [m.position for m in report.seed.mismatches]
    assert any(v.rule is Rule.FAIR_COMMIT and v.at == forged_press.version for v in report.rules.violations)


async def test_a_deck_the_admin_fixed_verifies_valid_and_the_report_says_whose_it_was(
    server: RunningServer, stub: game_pb2_grpc.GameServiceStub, audit: audit_pb2_grpc.AuditServiceStub
) -> None:
    # The admin may deal a fixed deck (to rebuild a table game): the game still commits to a seed, which
    # deals everything else; the round says who fixed its deck, and the report says so instead of
    # finding that the seed did not deal it. Round 1 through CreateGame, round 1 of another game through
    # StartRound: both ways the admin deals one.
    deck = arranged_deck({0: ["R5"]}, "G3", players=2)
    created = await create_game(stub, players=2, fixed_deck=deck)
    started = await create_game(stub, players=2, options={"dealer_selection": "given"})
    request = pb.StartRoundRequest(header=header(started.game_id), fixed_deck=deck)
    dealt = await stub.StartRound(request, metadata=ADMIN)
    assert [e.type for e in dealt.events][:1] == ["RoundStarted"]

    for game, position in ((created, 2), (started, dealt.events[0].version)):
        rows = await server.store.read_stream(game.game_id)
        [round_started] = [row for row in rows if row.type == "RoundStarted"]
        assert (round_started.payload["fixed_by"], round_started.metadata["actor"]) == ("admin", "admin")
        reply = await audit.VerifyGame(
            apb.VerifyGameRequest(game_id=game.game_id, reveal_seed=True, command_id=new_id()), metadata=ADMIN
        )
        report = json_format.MessageToDict(reply.report)
        assert reply.valid and reply.rules_valid and reply.chain_valid, report
        assert report["seed"]["mismatches"] == []
        assert report["fixed_decks"] == [
            {
                "position": position,
                "round": 1,
                "by": "admin",
                "message": "round 1 was dealt from a fixed deck by admin, not from the seed's shuffle",
            }
        ]
        # The exported record says it too, and verifies offline.
        exported = await audit.ExportGame(apb.ExportGameRequest(game_id=game.game_id), metadata=ADMIN)
        record = read_record(exported.record)
        assert [block.start.fixed_by for block in record.rounds] == ["admin"]
        assert record.rounds[0].start.deck == tuple(Card.parse(token) for token in deck)
        offline = verify_record(record)
        assert offline.valid and [(f.round, f.by) for f in offline.fixed_decks] == [(1, "admin")]
