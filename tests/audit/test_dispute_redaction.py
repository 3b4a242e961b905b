"""A ruling's evidence holds the hand of the challenged or caught player: through AuditService, as through
WatchGame, only the adjudicator sees those cards, and for a Wild Draw Four challenge the challenger too
(wd4.challenge: the hand is shown to the challenger). Over a real gRPC channel, on a real PostgreSQL.

Each case is a crafted live game of :mod:`tests.audit.test_adjudication` whose ruling rests on cards: an
upheld Wild Draw Four challenge (ann's hand, and B2, the blue card she held; three players) and a
penalised catch (ann's last card, G7; two players). Every seat files a dispute on it and the adjudicator
files one for ann; all are ruled. Then every identity — each seat of the game, a seat of another game,
no token, the admin — reads the rulings through every AuditService reply that can carry one to it
(ListDisputes, a retried FileDispute): the evidence must be exactly what WatchGame streams to that caller
for the same DisputeRuled entry, and name cards to the admin (and the challenger) alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from tests.api.support import ADMIN, Metadata, create_game, fails_with, new_id
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc, game_pb2_grpc
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb

from .test_adjudication import ANN, BOB, ILLEGAL, Table, down_to_one, wd4_played

AuditStub = audit_pb2_grpc.AuditServiceStub
GameStub = game_pb2_grpc.GameServiceStub
Evidence = dict[str, Any]


async def challenged(stub: GameStub) -> tuple[Table, int]:
    """bob's upheld challenge of ann's illegal Wild Draw Four (three players); its position."""
    table, _ = await wd4_played(stub, "classic", ILLEGAL, players=3)
    return table, (await table.challenge(BOB)).first


async def caught(stub: GameStub) -> tuple[Table, int]:
    """bob's catch of ann, down to G7 without calling UNO (two players); its position."""
    table, _ = await down_to_one(stub, "classic")
    return table, (await table.catch(BOB, ANN)).first


@dataclass(frozen=True, slots=True)
class Case:
    """A live game with a disputed catch or challenge, and the evidence fields that hold cards, with one
    card each must show the adjudicator (known from the game's design, not from the service)."""

    made: Callable[[GameStub], Awaitable[tuple[Table, int]]]
    kind: apb.DisputeKind
    cards: dict[str, str]
    #: The seat the rules show the evidence to, besides the adjudicator: a challenge's challenger.
    shown_to: int | None


CASES = {
    "wd4-challenge": Case(challenged, apb.WD4_CHALLENGE, {"hand": "W+4", "matching": "B2"}, BOB),
    "uno-catch": Case(caught, apb.UNO_CATCH, {"hand": "G7"}, None),
}


def evidence_of(ruling: apb.Ruling) -> Evidence:
    return json_format.MessageToDict(ruling.evidence)


async def watched_evidence(stub: GameStub, game_id: str, ruled_at: int, metadata: Metadata) -> Evidence:
    """The evidence of the DisputeRuled entry at ``ruled_at`` as WatchGame streams it to ``metadata``."""
    call = stub.WatchGame(pb.WatchGameRequest(game_id=game_id, after_version=ruled_at - 1), metadata=metadata)
    async for event in call:
        call.cancel()
        assert (event.type, event.version) == ("DisputeRuled", ruled_at)
        evidence: Evidence = json_format.MessageToDict(event.payload)["evidence"]
        return evidence
    raise AssertionError("WatchGame streamed nothing")


def assert_shown_as_watched(case: Case, evidence: Evidence, watched: Evidence, sees: bool, what: str) -> None:
    """``evidence`` is what WatchGame showed the same caller; its cards are named only to a caller who
    ``sees`` them (the admin, a challenge's challenger)."""
    assert evidence == watched, f"{what}: AuditService and WatchGame show the evidence differently"
    for field, card in case.cards.items():
        shown = evidence[field]
        assert shown, f"{what}: the evidence's {field} holds cards"
        if sees:
            assert card in shown, f"{what}: sees {card} in the {field}"
        else:
            assert shown == [None] * len(shown), f"{what}: sees the cards of the {field}: {shown}"


@pytest.mark.parametrize("name", list(CASES))
async def test_only_the_adjudicator_and_a_challenger_see_the_cards_of_a_rulings_evidence(
    stub: GameStub, audit: AuditStub, name: str
) -> None:
    case = CASES[name]
    table, position = await case.made(stub)
    other = await create_game(stub, players=2)
    game_id = table.game_id
    seats = {f"seat {seat}": table.game.seat(seat) for seat in range(len(table.game.tokens))}
    readers: dict[str, Metadata] = {**seats, "admin": ADMIN}

    def filing(as_seat: int | None = None) -> apb.FileDisputeRequest:
        request = apb.FileDisputeRequest(
            game_id=game_id,
            command_id=new_id(),
            kind=case.kind,
            position=position,
            claim="the ruling should go the other way",
        )
        if as_seat is not None:
            request.as_seat = as_seat
        return request

    filings = {who: filing(ANN if who == "admin" else None) for who in readers}
    for who, request in filings.items():
        filed = await audit.FileDispute(request, metadata=readers[who])
        await audit.RuleOnDispute(
            apb.RuleOnDisputeRequest(game_id=game_id, dispute_id=filed.dispute_id, command_id=new_id()),
            metadata=ADMIN,
        )

    for who, metadata in readers.items():
        sees = who == "admin" or (case.shown_to is not None and who == f"seat {case.shown_to}")
        listed = await audit.ListDisputes(apb.ListDisputesRequest(game_id=game_id), metadata=metadata)
        assert len(listed.disputes) == len(filings)
        for dispute in listed.disputes:
            watched = await watched_evidence(stub, game_id, dispute.ruled_at, metadata)
            what = f"ListDisputes as {who}"
            assert_shown_as_watched(case, evidence_of(dispute.ruling), watched, sees, what)

        retried = await audit.FileDispute(filings[who], metadata=metadata)
        assert retried.status == "ruled"
        watched = await watched_evidence(stub, game_id, retried.ruled_at, metadata)
        what = f"FileDispute retried by {who}"
        assert_shown_as_watched(case, evidence_of(retried.ruling), watched, sees, what)

    # Every game's disputes at once: the adjudicator's alone, cards and all.
    everything = await audit.ListDisputes(apb.ListDisputesRequest(), metadata=ADMIN)
    assert len(everything.disputes) == len(filings)
    for dispute in everything.disputes:
        watched = await watched_evidence(stub, dispute.game_id, dispute.ruled_at, ADMIN)
        assert_shown_as_watched(case, evidence_of(dispute.ruling), watched, True, "ListDisputes of all")
    for metadata in seats.values():
        await fails_with(
            audit.ListDisputes(apb.ListDisputesRequest(), metadata=metadata),
            grpc.StatusCode.PERMISSION_DENIED,
        )
    await fails_with(audit.ListDisputes(apb.ListDisputesRequest()), grpc.StatusCode.UNAUTHENTICATED)

    # A seat of another game, and no token, read no ruling of this game at all.
    strangers: tuple[Metadata | None, ...] = (other.seat(0), None)
    for stranger in strangers:
        await fails_with(
            audit.ListDisputes(apb.ListDisputesRequest(game_id=game_id), metadata=stranger),
            grpc.StatusCode.UNAUTHENTICATED,
        )
        await fails_with(
            audit.FileDispute(filings["seat 0"], metadata=stranger), grpc.StatusCode.UNAUTHENTICATED
        )
