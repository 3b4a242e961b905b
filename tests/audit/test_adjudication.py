"""AdjudicateCatch and AdjudicateChallenge on crafted live games, over a real gRPC channel.

Every game here is played through GameService on a real PostgreSQL: the admin deals a fixed deck and
acts for each seat, so the hands are known card by card. The scenarios mirror
``tests/test_verify_rulings.py`` (there as records, here as live games), and every verdict kind is
asked for in every rule set that has it. Positions are never taken from the adjudicator: each is
computed from the CommandReply versions the game service answered (a command's first event is at the
version before it plus one).

Seats: ann is seat 0 ("p0"), bob seat 1 ("p1"), cy seat 2 ("p2"); the last seat deals, so ann starts.
The live service refuses an invalid catch or challenge (nothing is appended), so those verdicts are
asked for as a dispute would ask: "at this position, this player tried to catch (challenge)".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

from service.api.server import RunningServer
from tests.api.shared_server import shared_address, shared_channel, shared_server  # noqa: F401
from tests.api.support import ADMIN, Game, arranged_deck, create_game, fails_with, header
from tests.test_verify_rulings import WILDS_BLOCK  # the same cases, over the live service
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc, game_pb2_grpc
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb

# Every test plays games of its own and reads nothing else: one server for the module.
pytestmark = pytest.mark.asyncio(loop_scope="module")

AuditStub = audit_pb2_grpc.AuditServiceStub
GameStub = game_pb2_grpc.GameServiceStub

ANN, BOB, CY = 0, 1, 2
NAME = {ANN: "p0", BOB: "p1", CY: "p2"}

#: The rule sets by their record names (also the names of their decks in ``DECKS``).
VARIANT = {"classic": pb.CLASSIC, "sonic": pb.SONIC, "attack": pb.ATTACK, "mario-kart": pb.MARIO_KART}
CATCH_VARIANTS = list(VARIANT)
WD4_VARIANTS = ["classic", "sonic", "mario-kart"]  # UNO Attack has no Wild Draw Four


# --- Playing a crafted game ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Step:
    """One accepted command: the positions of its first and last events, and the reply."""

    first: int
    last: int
    reply: pb.CommandReply

    @property
    def types(self) -> list[str]:
        return [e.type for e in self.reply.events]


class Table:
    """A crafted game, driven by the admin acting for each seat; it tracks the game's version."""

    def __init__(self, stub: GameStub, game: Game) -> None:
        self.stub = stub
        self.game = game
        self.version = game.reply.version

    @property
    def game_id(self) -> str:
        return self.game.game_id

    def header(self, seat: int) -> pb.CommandHeader:
        return header(self.game_id, as_seat=seat)

    def _step(self, reply: pb.CommandReply) -> Step:
        step = Step(self.version + 1, reply.version, reply)
        assert step.last >= step.first
        # The reply's own events carry the versions we infer.
        assert [e.version for e in reply.events] == list(range(step.first, step.last + 1))
        self.version = reply.version
        return step

    async def play(self, seat: int, card: str, *, colour: str = "", uno: bool = False) -> Step:
        request = pb.PlayRequest(header=self.header(seat), card=card, colour=colour, uno=uno)
        return self._step(await self.stub.Play(request, metadata=ADMIN))

    async def call_uno(self, seat: int) -> Step:
        request = pb.CallUnoRequest(header=self.header(seat))
        return self._step(await self.stub.CallUno(request, metadata=ADMIN))

    async def catch(self, seat: int, target: int) -> Step:
        request = pb.CatchRequest(header=self.header(seat), target=target)
        return self._step(await self.stub.Catch(request, metadata=ADMIN))

    async def challenge(self, seat: int) -> Step:
        request = pb.ChallengeRequest(header=self.header(seat))
        return self._step(await self.stub.Challenge(request, metadata=ADMIN))

    async def accept(self, seat: int) -> Step:
        request = pb.AcceptRequest(header=self.header(seat))
        return self._step(await self.stub.Accept(request, metadata=ADMIN))

    async def refused_catch(self, seat: int, target: int) -> None:
        """The live service refuses this catch (``uno.catch.invalid``) and appends nothing."""
        request = pb.CatchRequest(header=self.header(seat), target=target)
        await fails_with(
            self.stub.Catch(request, metadata=ADMIN),
            grpc.StatusCode.FAILED_PRECONDITION,
            reason="uno.catch.invalid",
        )
        await self.assert_version()

    async def assert_version(self) -> None:
        view = await self.stub.GetGame(pb.GetGameRequest(game_id=self.game_id), metadata=ADMIN)
        assert view.version == self.version


async def deal(
    stub: GameStub,
    variant: str,
    hands: dict[int, list[str]],
    first: str,
    *,
    players: int = 2,
    options: dict[str, Any] | None = None,
) -> Table:
    """A game of ``variant`` dealt ``hands`` with ``first`` turned up; the last seat deals, ann starts."""
    dealer = players - 1
    deck = arranged_deck(hands, first, players=players, dealer=dealer, deck=variant)
    game = await create_game(
        stub,
        variant=VARIANT[variant],
        players=players,
        fixed_deck=deck,
        options={"dealer_selection": "given", **(options or {})},
        dealer=dealer,
    )
    view = game.reply.view
    assert (view.awaiting, view.turn, view.top) == ("play", ANN, first)
    for seat, cards in hands.items():
        assert Counter(view.hands[seat].cards) == Counter(cards)
    return Table(stub, game)


def hand_of(step: Step, seat: int) -> list[str]:
    return list(step.reply.view.hands[seat].cards)


# --- Asking the adjudicator ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Judge:
    """The adjudicator's two RPCs; every call also checks that adjudicating appends nothing."""

    server: RunningServer
    audit: AuditStub

    async def catch(
        self, game_id: str, position: int, *, by: int | None = None, target: int | None = None
    ) -> apb.Ruling:
        request = apb.AdjudicateRequest(game_id=game_id, position=position, by=by, target=target)
        return await self._ask(game_id, self.audit.AdjudicateCatch(request, metadata=ADMIN))

    async def challenge(self, game_id: str, position: int, *, by: int | None = None) -> apb.Ruling:
        request = apb.AdjudicateRequest(game_id=game_id, position=position, by=by)
        return await self._ask(game_id, self.audit.AdjudicateChallenge(request, metadata=ADMIN))

    async def refused_challenge(self, game_id: str, position: int, *, by: int | None = None) -> str:
        """The refusal of a challenge at a position where none can be judged (nothing appended); its
        message."""
        request = apb.AdjudicateRequest(game_id=game_id, position=position, by=by)
        before = await self.server.store.stream_version(game_id)
        error = await fails_with(
            self.audit.AdjudicateChallenge(request, metadata=ADMIN),
            grpc.StatusCode.FAILED_PRECONDITION,
            reason="NOTHING_TO_JUDGE",
        )
        assert await self.server.store.stream_version(game_id) == before, "a refusal appended to the log"
        return error.details() or ""

    async def _ask(self, game_id: str, call: Awaitable[apb.Ruling]) -> apb.Ruling:
        before = await self.server.store.stream_version(game_id)
        ruling = await call
        assert await self.server.store.stream_version(game_id) == before, "adjudicating appended to the log"
        return ruling


@pytest.fixture
def judge(server: RunningServer, audit: AuditStub) -> Judge:
    return Judge(server, audit)


def evidence(ruling: apb.Ruling) -> dict[str, Any]:
    """The ruling's evidence as plain JSON values (Struct numbers are floats: 9.0 == 9)."""
    return json_format.MessageToDict(ruling.evidence)


def heading(ruling: apb.Ruling) -> tuple[Any, ...]:
    """What the ruling decides: kind, verdict, rule, by, against, position, recorded."""
    return (
        ruling.kind,
        ruling.verdict,
        ruling.rule,
        ruling.by,
        ruling.against,
        ruling.position,
        ruling.recorded,
    )


# --- UNO catches -----------------------------------------------------------------------------------------
#
# Two players. ann plays five cards that keep the turn with her (Skip, and Reverse, which with two players
# acts as Skip), then Y1, which leaves her holding G7 alone: her UNO window opens with the Y1 play, and it
# is bob's turn. Every rule set's deck has these cards, and no launcher press is involved.

ANN_UNO = ["RS", "RS", "RR", "YR", "YS", "Y1", "G7"]
BOB_UNO = ["G1", "B2", "B3", "Y4", "Y5", "G5", "G6"]
KEEPS_THE_TURN = ["RS", "RS", "RR", "YR", "YS"]


async def down_to_one(stub: GameStub, variant: str, *, uno: bool = False) -> tuple[Table, Step]:
    """ann down to G7, with or without calling UNO on the play; the table and ann's last play."""
    table = await deal(stub, variant, {ANN: ANN_UNO, BOB: BOB_UNO}, "R9")
    for card in KEEPS_THE_TURN:
        step = await table.play(ANN, card)
        assert step.reply.view.turn == ANN, card
    last = await table.play(ANN, "Y1", uno=uno)
    view = last.reply.view
    assert hand_of(last, ANN) == ["G7"]
    assert (view.turn, view.top, view.colour) == (BOB, "Y1", "Y")
    assert view.exposed == (-1 if uno else ANN)
    return table, last


@pytest.mark.parametrize("variant", CATCH_VARIANTS)
async def test_a_recorded_catch_while_the_window_is_open_earns_the_penalty(
    stub: GameStub, judge: Judge, variant: str
) -> None:
    table, y1 = await down_to_one(stub, variant)
    caught = await table.catch(BOB, ANN)
    # The penalty: two cards, or in UNO Attack two presses of the launcher.
    penalty = ["LauncherPressed"] * 2 if variant == "attack" else ["CardsTaken"]
    assert caught.types == ["UnoCaught", *penalty]
    if variant != "attack":
        assert caught.reply.view.hand_sizes[ANN] == 3

    ruling = await judge.catch(table.game_id, caught.first)

    assert heading(ruling) == (apb.UNO_CATCH, "penalty", "uno.catch", "p1", "p0", caught.first, True)
    assert ruling.reason == ""
    assert evidence(ruling) == {
        "hand": ["G7"],
        "active_colour": "Y",
        "top": "Y1",
        "window_opened": y1.first,
        "window_closed": None,
        "called": None,
    }
    # Any position among the catch's events names the same recorded catch.
    again = await judge.catch(table.game_id, caught.last)
    assert heading(again) == (apb.UNO_CATCH, "penalty", "uno.catch", "p1", "p0", caught.last, True)
    assert evidence(again) == evidence(ruling)


@pytest.mark.parametrize("variant", CATCH_VARIANTS)
async def test_a_catch_made_right_after_the_play_earns_the_penalty(
    stub: GameStub, judge: Judge, variant: str
) -> None:
    # Nobody caught ann in the log; the adjudicator judges a catch right after her play, by default of
    # the player whose window is open, by the other player.
    table, y1 = await down_to_one(stub, variant)

    ruling = await judge.catch(table.game_id, y1.last)

    assert heading(ruling) == (apb.UNO_CATCH, "penalty", "uno.catch", "p1", "p0", y1.last, False)
    assert ruling.reason == ""
    assert evidence(ruling) == {
        "hand": ["G7"],
        "active_colour": "Y",
        "top": "Y1",
        "window_opened": y1.first,
        "window_closed": None,
        "called": None,
    }
    explicit = await judge.catch(table.game_id, y1.last, by=BOB, target=ANN)
    assert heading(explicit) == heading(ruling)


@pytest.mark.parametrize("variant", CATCH_VARIANTS)
async def test_a_catch_after_the_window_closed_earns_nothing(
    stub: GameStub, judge: Judge, variant: str
) -> None:
    table, y1 = await down_to_one(stub, variant)
    closing = await table.play(BOB, "G1")  # bob's turn action closes ann's window
    assert closing.reply.view.exposed == -1
    await table.refused_catch(BOB, ANN)

    ruling = await judge.catch(table.game_id, closing.last, by=BOB, target=ANN)

    assert heading(ruling) == (
        apb.UNO_CATCH,
        "no-penalty",
        "uno.catch.invalid",
        "p1",
        "p0",
        closing.last,
        False,
    )
    assert ruling.reason == f"window closed at position {closing.first}"
    assert evidence(ruling) == {
        "hand": ["G7"],
        "active_colour": "G",
        "top": "G1",
        "window_opened": y1.first,
        "window_closed": closing.first,
        "called": None,
    }
    # The same catch, claimed as made before bob's play, would have earned the penalty.
    earlier = await judge.catch(table.game_id, y1.last, by=BOB, target=ANN)
    assert (earlier.verdict, earlier.rule, earlier.position) == ("penalty", "uno.catch", y1.last)


@pytest.mark.parametrize("variant", CATCH_VARIANTS)
async def test_a_catch_of_a_player_who_called_with_the_play_earns_nothing(
    stub: GameStub, judge: Judge, variant: str
) -> None:
    table, y1 = await down_to_one(stub, variant, uno=True)
    await table.refused_catch(BOB, ANN)

    ruling = await judge.catch(table.game_id, y1.last, by=BOB, target=ANN)

    assert heading(ruling) == (
        apb.UNO_CATCH,
        "no-penalty",
        "uno.catch.invalid",
        "p1",
        "p0",
        y1.last,
        False,
    )
    assert ruling.reason == f"p0 called UNO at position {y1.first}"
    assert evidence(ruling) == {
        "hand": ["G7"],
        "active_colour": "Y",
        "top": "Y1",
        "window_opened": None,  # calling with the play opens no window
        "window_closed": None,
        "called": y1.first,
    }


@pytest.mark.parametrize("variant", CATCH_VARIANTS)
async def test_a_catch_of_a_player_who_called_separately_earns_nothing(
    stub: GameStub, judge: Judge, variant: str
) -> None:
    table, y1 = await down_to_one(stub, variant)
    called = await table.call_uno(ANN)
    assert called.types == ["UnoCalled"]
    assert (called.reply.view.exposed, called.reply.view.turn) == (-1, BOB)
    await table.refused_catch(BOB, ANN)

    ruling = await judge.catch(table.game_id, called.last, by=BOB, target=ANN)

    assert heading(ruling) == (
        apb.UNO_CATCH,
        "no-penalty",
        "uno.catch.invalid",
        "p1",
        "p0",
        called.last,
        False,
    )
    assert ruling.reason == f"p0 called UNO at position {called.first}"
    assert evidence(ruling) == {
        "hand": ["G7"],
        "active_colour": "Y",
        "top": "Y1",
        "window_opened": y1.first,
        "window_closed": None,
        "called": called.first,
    }


@pytest.mark.parametrize("variant", CATCH_VARIANTS)
async def test_a_self_catch_earns_nothing(stub: GameStub, judge: Judge, variant: str) -> None:
    table, y1 = await down_to_one(stub, variant)
    await table.refused_catch(ANN, ANN)

    ruling = await judge.catch(table.game_id, y1.last, by=ANN, target=ANN)

    assert heading(ruling) == (
        apb.UNO_CATCH,
        "no-penalty",
        "uno.catch.invalid",
        "p0",
        "p0",
        y1.last,
        False,
    )
    assert ruling.reason == "p0 cannot catch themself"
    assert evidence(ruling) == {
        "hand": ["G7"],
        "active_colour": "Y",
        "top": "Y1",
        "window_opened": y1.first,  # the window is open: only the catcher is wrong
        "window_closed": None,
        "called": None,
    }


@pytest.mark.parametrize("variant", CATCH_VARIANTS)
async def test_a_catch_of_a_player_holding_more_than_one_card_earns_nothing(
    stub: GameStub, judge: Judge, variant: str
) -> None:
    table, y1 = await down_to_one(stub, variant)
    await table.refused_catch(ANN, BOB)

    ruling = await judge.catch(table.game_id, y1.last, by=ANN, target=BOB)

    assert heading(ruling) == (
        apb.UNO_CATCH,
        "no-penalty",
        "uno.catch.invalid",
        "p0",
        "p1",
        y1.last,
        False,
    )
    assert ruling.reason == f"p1 holds {len(BOB_UNO)} cards, not one"
    found = evidence(ruling)
    assert Counter(found["hand"]) == Counter(BOB_UNO)
    assert (found["window_opened"], found["window_closed"], found["called"]) == (None, None, None)


# --- Wild Draw Four challenges ---------------------------------------------------------------------------
#
# Blue 3 turned up; ann plays Wild Draw Four naming red; bob, her victim, answers.

ILLEGAL = ["W+4", "B2", "G5", "Y7", "R1", "Y3", "G8"]  # ann holds B2, of the active colour
LEGAL = ["W+4", "G5", "Y7", "R1", "Y3", "G8", "G9"]  # no blue card
BOB_WD4 = ["R3", "R4", "G1", "G2", "Y5", "Y6", "B9"]
CY_WD4 = ["G3", "G4", "Y8", "Y9", "B5", "B6", "R8"]


async def wd4_played(
    stub: GameStub,
    variant: str,
    ann: list[str],
    *,
    players: int = 2,
    options: dict[str, Any] | None = None,
) -> tuple[Table, Step]:
    """ann's Wild Draw Four on B3, naming red, waiting for bob's answer; the table and the play."""
    hands = {ANN: ann, BOB: BOB_WD4, CY: CY_WD4}
    table = await deal(
        stub, variant, {seat: hands[seat] for seat in range(players)}, "B3", players=players, options=options
    )
    played = await table.play(ANN, "W+4", colour="R")
    view = played.reply.view
    assert (view.awaiting, view.turn, view.top, view.colour) == ("wd4-response", BOB, "W+4", "R")
    return table, played


def challenge_evidence(ann: list[str], matching: list[str], played_at: int) -> dict[str, Any]:
    return {
        "hand": Counter(ann),
        "active_colour": "B",
        "top": "B3",
        "matching": Counter(matching),
        "played_at": played_at,
    }


def challenge_found(ruling: apb.Ruling) -> dict[str, Any]:
    """The challenge evidence, with the hand and the matching cards as multisets."""
    found = evidence(ruling)
    return {
        **found,
        "hand": Counter(found["hand"]),
        "matching": Counter(found["matching"]),
    }


@pytest.mark.parametrize("variant", WD4_VARIANTS)
async def test_a_recorded_challenge_of_an_illegal_wild_draw_four_is_upheld(
    stub: GameStub, judge: Judge, variant: str
) -> None:
    table, wd4 = await wd4_played(stub, variant, ILLEGAL)
    challenged = await table.challenge(BOB)
    # Upheld live: ann takes four, bob draws nothing and plays on.
    assert challenged.types[0] == "Wd4Challenged"
    assert list(challenged.reply.view.hand_sizes) == [len(ILLEGAL) - 1 + 4, len(BOB_WD4)]
    assert challenged.reply.view.turn == BOB

    ruling = await judge.challenge(table.game_id, challenged.first)

    assert heading(ruling) == (
        apb.WD4_CHALLENGE,
        "upheld",
        "wd4.challenge.upheld",
        "p1",
        "p0",
        challenged.first,
        True,
    )
    assert ruling.reason == ""
    assert challenge_found(ruling) == challenge_evidence(ILLEGAL, ["B2"], wd4.first)
    assert evidence(ruling)["matching"] == ["B2"]


@pytest.mark.parametrize("variant", WD4_VARIANTS)
async def test_a_recorded_challenge_of_a_legal_wild_draw_four_fails(
    stub: GameStub, judge: Judge, variant: str
) -> None:
    table, wd4 = await wd4_played(stub, variant, LEGAL)
    challenged = await table.challenge(BOB)
    # Failed live: bob takes six and loses the turn.
    assert challenged.types[0] == "Wd4Challenged"
    assert list(challenged.reply.view.hand_sizes) == [len(LEGAL) - 1, len(BOB_WD4) + 6]
    assert challenged.reply.view.turn == ANN

    ruling = await judge.challenge(table.game_id, challenged.last)

    assert heading(ruling) == (
        apb.WD4_CHALLENGE,
        "failed",
        "wd4.challenge.failed",
        "p1",
        "p0",
        challenged.last,
        True,
    )
    assert ruling.reason == ""
    assert challenge_found(ruling) == challenge_evidence(LEGAL, [], wd4.first)
    assert evidence(ruling)["matching"] == []


@pytest.mark.parametrize("variant", WD4_VARIANTS)
@pytest.mark.parametrize(
    ("ann", "verdict", "matching"),
    [(ILLEGAL, "upheld", ["B2"]), (LEGAL, "failed", [])],
    ids=["illegal", "legal"],
)
async def test_a_challenge_not_made_is_judged_as_made_right_after_the_wild_draw_four(
    stub: GameStub, judge: Judge, variant: str, ann: list[str], verdict: str, matching: list[str]
) -> None:
    # bob accepted; his dispute says he would have challenged. The challenge is judged right after the
    # Wild Draw Four, by default by its victim.
    table, wd4 = await wd4_played(stub, variant, ann)
    accepted = await table.accept(BOB)
    assert accepted.types[0] == "Wd4Accepted"

    ruling = await judge.challenge(table.game_id, wd4.last)

    rule = f"wd4.challenge.{verdict}"
    assert heading(ruling) == (apb.WD4_CHALLENGE, verdict, rule, "p1", "p0", wd4.last, False)
    assert challenge_found(ruling) == challenge_evidence(ann, matching, wd4.first)
    assert heading(await judge.challenge(table.game_id, wd4.last, by=BOB)) == heading(ruling)

    # After the acceptance no Wild Draw Four waits: there is nothing to judge, whatever ann held. A
    # "failed" verdict would read as bob's six cards.
    for by in (BOB, None):
        late = await judge.refused_challenge(table.game_id, accepted.last, by=by)
        assert late == (
            f"nothing to judge: no Wild Draw Four waits for an answer at position {accepted.last} "
            f"(the last was played at position {wd4.first})"
        )


@pytest.mark.parametrize(("variant", "options", "wild", "upheld"), WILDS_BLOCK)
async def test_the_wilds_block_rule_decides_a_challenge(
    stub: GameStub, judge: Judge, variant: str, options: dict[str, Any], wild: str, upheld: bool
) -> None:
    ann = ["W+4", wild, "G5", "Y7", "R1", "Y3", "G8"]  # no blue card, but another wild
    table, wd4 = await wd4_played(stub, variant, ann, options=options)
    challenged = await table.challenge(BOB)
    sizes = [len(ann) - 1 + 4, len(BOB_WD4)] if upheld else [len(ann) - 1, len(BOB_WD4) + 6]
    assert list(challenged.reply.view.hand_sizes) == sizes

    recorded = await judge.challenge(table.game_id, challenged.first)
    unrecorded = await judge.challenge(table.game_id, wd4.last)

    verdict = "upheld" if upheld else "failed"
    matching = [wild] if upheld else []
    for ruling, position, is_recorded in ((recorded, challenged.first, True), (unrecorded, wd4.last, False)):
        assert heading(ruling) == (
            apb.WD4_CHALLENGE,
            verdict,
            f"wd4.challenge.{verdict}",
            "p1",
            "p0",
            position,
            is_recorded,
        )
        assert challenge_found(ruling) == challenge_evidence(ann, matching, wd4.first)
        assert evidence(ruling)["matching"] == matching


async def test_a_challenge_by_someone_other_than_the_victim_fails(stub: GameStub, judge: Judge) -> None:
    table, wd4 = await wd4_played(stub, "classic", ILLEGAL, players=3)
    await fails_with(
        stub.Challenge(pb.ChallengeRequest(header=table.header(CY)), metadata=ADMIN),
        grpc.StatusCode.FAILED_PRECONDITION,
        reason="wd4.challenge",
    )
    await table.assert_version()

    ruling = await judge.challenge(table.game_id, wd4.last, by=CY)

    assert heading(ruling) == (apb.WD4_CHALLENGE, "failed", "wd4.challenge", "p2", "p0", wd4.last, False)
    assert ruling.reason == "only p1, the Wild Draw Four's victim, may answer it"
    assert evidence(ruling) == {"played_at": wd4.first}
    # bob, the victim, would have won the same challenge.
    victim = await judge.challenge(table.game_id, wd4.last)
    assert (victim.by, victim.verdict, victim.rule) == ("p1", "upheld", "wd4.challenge.upheld")


# --- Roles and input -------------------------------------------------------------------------------------


async def test_only_the_adjudicator_adjudicates_and_bad_input_is_refused(
    server: RunningServer, stub: GameStub, audit: AuditStub
) -> None:
    table, y1 = await down_to_one(stub, "classic")
    game_id = table.game_id
    before = await server.store.stream_version(game_id)
    assert before == y1.last

    def asking(**fields: Any) -> apb.AdjudicateRequest:
        return apb.AdjudicateRequest(**{"game_id": game_id, "position": y1.last, **fields})

    refusals = [
        (asking(position=0), "position"),
        (asking(position=-3), "position"),
        (asking(position=before + 1), "position"),  # past the game's version
        (asking(by=2), "by"),  # two players: seats 0 and 1
        (asking(by=-1), "by"),
        (asking(target=2), "target"),
        (asking(target=-1), "target"),
        (asking(game_id=""), "game_id"),
    ]
    for rpc in (audit.AdjudicateCatch, audit.AdjudicateChallenge):
        await fails_with(rpc(asking()), grpc.StatusCode.UNAUTHENTICATED)
        for seat in (ANN, BOB):
            await fails_with(rpc(asking(), metadata=table.game.seat(seat)), grpc.StatusCode.PERMISSION_DENIED)
        for request, field in refusals:
            await fails_with(rpc(request, metadata=ADMIN), grpc.StatusCode.INVALID_ARGUMENT, field=field)
        await fails_with(
            rpc(asking(game_id="00000000-0000-0000-0000-000000000000"), metadata=ADMIN),
            grpc.StatusCode.NOT_FOUND,
            reason="UNKNOWN_GAME",
        )
        # The first and the last positions are in range: judged, or refused as holding nothing to judge
        # (no card dealt at position 1; no Wild Draw Four at the last), never as out of range.
        await fails_with(
            rpc(asking(position=1), metadata=ADMIN),
            grpc.StatusCode.FAILED_PRECONDITION,
            reason="NOTHING_TO_JUDGE",
        )
    ruling = await audit.AdjudicateCatch(asking(position=before), metadata=ADMIN)
    assert (ruling.position, ruling.recorded, ruling.verdict) == (before, False, "penalty")
    await fails_with(
        audit.AdjudicateChallenge(asking(position=before), metadata=ADMIN),
        grpc.StatusCode.FAILED_PRECONDITION,
        reason="NOTHING_TO_JUDGE",
    )

    assert await server.store.stream_version(game_id) == before  # adjudicating appends nothing
    # The game goes on as if nothing had been asked.
    await table.play(BOB, "G1")
