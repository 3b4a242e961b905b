"""Every AuditService and CheckpointService refusal names its cause: over a real gRPC channel, on a real
PostgreSQL, each reason is triggered and checked with its status code, and the refusal is shown to have
written nothing (the tables that record commands hold as many rows as before).

The reasons are those listed with the two services in protos/uno/audit/v1/ (docs/API.md);
``tests/test_proto_docs.py`` checks that every reason the code raises is listed there.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from service.api.server import RunningServer
from service.play.simulate import play_game
from service.rules.options import Variant
from service.store import VersionConflict
from tests.api.support import ADMIN, count_rows, create_game, error_info, fails_with, new_id
from tests.projections.projection_support import store_game
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc
from uno_audit_client.gen.uno.audit.v1 import checkpoint_pb2 as cp
from uno_audit_client.gen.uno.audit.v1 import checkpoint_pb2_grpc as cp_grpc

from .disputed import CATCH_PLAY_POSITION, catch_record
from .support import store_simulated
from .test_tamper import tamper

AuditStub = audit_pb2_grpc.AuditServiceStub
CheckpointStub = cp_grpc.CheckpointServiceStub

RECORDS = Path(__file__).parent.parent / "data" / "records"
UNKNOWN = "00000000-0000-0000-0000-000000000000"

NOT_FOUND = grpc.StatusCode.NOT_FOUND
FAILED = grpc.StatusCode.FAILED_PRECONDITION


@pytest.fixture
def checkpoints(channel: grpc.aio.Channel) -> CheckpointStub:
    return cp_grpc.CheckpointServiceStub(channel)  # type: ignore[no-untyped-call]


async def refused(
    database_url: str, call: Callable[[], Awaitable[Any]], code: grpc.StatusCode, reason: str
) -> grpc.aio.AioRpcError:
    """``call()`` fails with ``code`` and ErrorInfo ``reason``, and no table that records commands
    changes; the error."""
    before = await count_rows(database_url)
    error = await fails_with(call(), code, reason=reason)
    assert await count_rows(database_url) == before, f"{reason}: the refusal wrote to the database"
    return error


async def imported(audit: AuditStub, text: str) -> apb.ImportRecordReply:
    reply: apb.ImportRecordReply = await audit.ImportRecord(
        apb.ImportRecordRequest(command_id=new_id(), record=text), metadata=ADMIN
    )
    return reply


def catch_dispute(game_id: str, kind: apb.DisputeKind, position: int) -> apb.FileDisputeRequest:
    return apb.FileDisputeRequest(
        game_id=game_id, command_id=new_id(), kind=kind, position=position, claim="not so", as_seat=0
    )


# --- AuditService ----------------------------------------------------------------------------------------


async def test_an_unknown_game_is_unknown_game_on_every_audit_rpc(
    server: RunningServer, audit: AuditStub, database_url: str
) -> None:
    await store_simulated(server.store, Variant.CLASSIC, seed=2)  # a game that is not the one asked for
    calls: list[Callable[[], Awaitable[Any]]] = [
        lambda: audit.VerifyGame(apb.VerifyGameRequest(game_id=UNKNOWN), metadata=ADMIN),
        lambda: audit.AdjudicateCatch(apb.AdjudicateRequest(game_id=UNKNOWN, position=1), metadata=ADMIN),
        lambda: audit.AdjudicateChallenge(apb.AdjudicateRequest(game_id=UNKNOWN, position=1), metadata=ADMIN),
        lambda: audit.FileDispute(catch_dispute(UNKNOWN, apb.UNO_CATCH, 1), metadata=ADMIN),
        lambda: audit.RuleOnDispute(
            apb.RuleOnDisputeRequest(game_id=UNKNOWN, dispute_id="d", command_id=new_id()), metadata=ADMIN
        ),
        lambda: audit.ExportGame(apb.ExportGameRequest(game_id=UNKNOWN), metadata=ADMIN),
        lambda: audit.ReplayGame(apb.ReplayGameRequest(game_id=UNKNOWN), metadata=ADMIN),
    ]
    for call in calls:
        await refused(database_url, call, NOT_FOUND, "UNKNOWN_GAME")


async def test_an_unknown_dispute_is_unknown_dispute(
    server: RunningServer, audit: AuditStub, database_url: str
) -> None:
    game_id = await store_simulated(server.store, Variant.CLASSIC, seed=3)
    request = apb.RuleOnDisputeRequest(game_id=game_id, dispute_id="no-such-dispute", command_id=new_id())
    await refused(
        database_url, lambda: audit.RuleOnDispute(request, metadata=ADMIN), NOT_FOUND, "UNKNOWN_DISPUTE"
    )


async def test_exporting_a_game_in_progress_without_the_reveal_is_game_in_progress(
    stub: Any, audit: AuditStub, database_url: str
) -> None:
    game = await create_game(stub, players=2)
    request = apb.ExportGameRequest(game_id=game.game_id)
    await refused(database_url, lambda: audit.ExportGame(request, metadata=ADMIN), FAILED, "GAME_IN_PROGRESS")


async def test_ruling_twice_on_one_dispute_is_already_ruled(
    server: RunningServer, audit: AuditStub, database_url: str
) -> None:
    game = await imported(audit, catch_record("penalty"))
    filed = await audit.FileDispute(
        catch_dispute(game.game_id, apb.UNO_CATCH, CATCH_PLAY_POSITION), metadata=ADMIN
    )

    def rule() -> Any:
        request = apb.RuleOnDisputeRequest(
            game_id=game.game_id, dispute_id=filed.dispute_id, command_id=new_id()
        )
        return audit.RuleOnDispute(request, metadata=ADMIN)

    ruled = await rule()
    error = await refused(database_url, rule, FAILED, "ALREADY_RULED")
    assert error_info(error).metadata["ruled_at"] == str(ruled.ruled_at)


async def test_a_challenge_where_no_wild_draw_four_waits_is_nothing_to_judge(
    server: RunningServer, audit: AuditStub, database_url: str
) -> None:
    # The catch record holds no Wild Draw Four at all; at its round start (position 3) everyone holds 7.
    game_id = (await imported(audit, catch_record("penalty"))).game_id

    def adjudicate(rpc: Any, **fields: Any) -> Callable[[], Awaitable[Any]]:
        return lambda: rpc(apb.AdjudicateRequest(game_id=game_id, **fields), metadata=ADMIN)

    challenge = await refused(
        database_url,
        adjudicate(audit.AdjudicateChallenge, position=CATCH_PLAY_POSITION),
        FAILED,
        "NOTHING_TO_JUDGE",
    )
    assert challenge.details() == (
        f"nothing to judge: no Wild Draw Four waits for an answer at position {CATCH_PLAY_POSITION} "
        "(none has been played)"
    )
    catch = await refused(
        database_url, adjudicate(audit.AdjudicateCatch, position=3), FAILED, "NOTHING_TO_JUDGE"
    )
    assert catch.details() == (
        "nothing to judge: nobody holds a single card at position 3 (cards held: ann 7, bob 7, cy 7)"
    )
    # A catch of a named player is judged on that player's hand: no penalty, which costs nobody a card.
    named = await audit.AdjudicateCatch(
        apb.AdjudicateRequest(game_id=game_id, position=3, target=1), metadata=ADMIN
    )
    assert (named.verdict, named.reason) == ("no-penalty", "bob holds 7 cards, not one")


async def test_a_dispute_about_a_challenge_that_could_not_be_made_is_nothing_to_judge(
    server: RunningServer, audit: AuditStub, database_url: str
) -> None:
    game_id = (await imported(audit, catch_record("penalty"))).game_id
    filed = await audit.FileDispute(
        catch_dispute(game_id, apb.WD4_CHALLENGE, CATCH_PLAY_POSITION), metadata=ADMIN
    )
    request = apb.RuleOnDisputeRequest(game_id=game_id, dispute_id=filed.dispute_id, command_id=new_id())

    error = await refused(
        database_url, lambda: audit.RuleOnDispute(request, metadata=ADMIN), FAILED, "NOTHING_TO_JUDGE"
    )

    assert "no Wild Draw Four waits for an answer" in (error.details() or "")
    listed = await audit.ListDisputes(apb.ListDisputesRequest(game_id=game_id), metadata=ADMIN)
    assert [(d.dispute_id, d.status) for d in listed.disputes] == [(filed.dispute_id, "open")]


async def test_adjudicating_past_where_the_record_can_be_followed_is_replay_stopped(
    server: RunningServer, audit: AuditStub, database_url: str
) -> None:
    # bob plays R7, which he does not hold, at line 7 (position 8): the replay stops there.
    text = (RECORDS / "classic_violations.jsonl").read_text(encoding="utf-8")
    game_id = (await imported(audit, text)).game_id
    request = apb.AdjudicateRequest(game_id=game_id, position=9)

    error = await refused(
        database_url, lambda: audit.AdjudicateCatch(request, metadata=ADMIN), FAILED, "REPLAY_STOPPED"
    )

    assert "cannot be followed past position 8" in (error.details() or "")


async def test_a_log_edited_out_of_shape_is_log_unreadable(
    server: RunningServer, audit: AuditStub, database_url: str
) -> None:
    game_id = await store_simulated(server.store, Variant.CLASSIC, seed=4)
    await tamper(
        database_url,
        ("UPDATE events SET payload = '{}'::jsonb WHERE game_id = %s AND version = 1", (game_id,)),
    )
    request = apb.ExportGameRequest(game_id=game_id)

    error = await refused(
        database_url, lambda: audit.ExportGame(request, metadata=ADMIN), FAILED, "LOG_UNREADABLE"
    )

    assert "cannot be read as a record" in (error.details() or "")


async def test_an_import_retried_with_its_command_id_is_game_exists(
    audit: AuditStub, database_url: str
) -> None:
    text = (RECORDS / "classic_wd4_upheld.jsonl").read_text(encoding="utf-8")
    request = apb.ImportRecordRequest(command_id=new_id(), record=text)
    first = await audit.ImportRecord(request, metadata=ADMIN)

    error = await refused(
        database_url,
        lambda: audit.ImportRecord(request, metadata=ADMIN),
        grpc.StatusCode.ALREADY_EXISTS,
        "GAME_EXISTS",
    )

    assert error_info(error).metadata["game_id"] == first.game_id


async def test_a_game_that_keeps_moving_while_a_ruling_is_decided_is_game_busy(
    server: RunningServer, audit: AuditStub, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    game_id = (await imported(audit, catch_record("penalty"))).game_id
    filed = await audit.FileDispute(
        catch_dispute(game_id, apb.UNO_CATCH, CATCH_PLAY_POSITION), metadata=ADMIN
    )
    version = await server.store.stream_version(game_id)

    async def moved_on(game_id: str, expected_version: int, *args: Any, **kwargs: Any) -> Any:
        raise VersionConflict(game_id, expected_version, expected_version + 1)

    # Every append finds another writer got there first, as under a storm of concurrent writers.
    monkeypatch.setattr(server.store, "append", moved_on)
    request = apb.RuleOnDisputeRequest(game_id=game_id, dispute_id=filed.dispute_id, command_id=new_id())

    await refused(
        database_url,
        lambda: audit.RuleOnDispute(request, metadata=ADMIN),
        grpc.StatusCode.ABORTED,
        "GAME_BUSY",
    )

    assert await server.store.stream_version(game_id) == version


# --- CheckpointService -----------------------------------------------------------------------------------


async def test_an_unknown_game_is_unknown_game_on_the_checkpoint_rpcs(
    server: RunningServer, checkpoints: CheckpointStub, database_url: str
) -> None:
    await store_simulated(server.store, Variant.CLASSIC, seed=5)
    await refused(
        database_url,
        lambda: checkpoints.GetCheckpoint(cp.GetCheckpointRequest(game_id=UNKNOWN)),
        NOT_FOUND,
        "UNKNOWN_GAME",
    )
    receipts = cp.CheckReceiptsRequest(game_id=UNKNOWN, receipts=["x"])
    await refused(
        database_url,
        lambda: checkpoints.CheckReceipts(receipts, metadata=ADMIN),
        NOT_FOUND,
        "UNKNOWN_GAME",
    )


async def test_a_misspelt_tournament_is_unknown_tournament_never_an_empty_checkpoint(
    server: RunningServer, checkpoints: CheckpointStub, database_url: str
) -> None:
    await store_game(server.store, new_id(), play_game(Variant.CLASSIC, 3, 6), tournament_id="cup")
    cup = await checkpoints.GetTournamentCheckpoint(cp.GetTournamentCheckpointRequest(tournament_id="cup"))
    assert cup.size == 1
    calls: list[Callable[[], Awaitable[Any]]] = [
        lambda: checkpoints.GetTournamentCheckpoint(cp.GetTournamentCheckpointRequest(tournament_id="cpu")),
        lambda: checkpoints.ProveGame(cp.ProveGameRequest(tournament_id="cpu", game_id=UNKNOWN)),
        lambda: checkpoints.ProveConsistency(cp.ProveConsistencyRequest(tournament_id="cpu", old_size=1)),
    ]
    for call in calls:
        error = await refused(database_url, call, NOT_FOUND, "UNKNOWN_TOURNAMENT")
        assert "'cpu'" in (error.details() or "")


async def test_a_tournament_whose_games_are_all_in_progress_is_the_empty_tree(
    server: RunningServer, checkpoints: CheckpointStub
) -> None:
    await store_game(
        server.store, new_id(), play_game(Variant.CLASSIC, 3, 7), tournament_id="cup", steps=slice(0, 4)
    )

    signed = await checkpoints.GetTournamentCheckpoint(cp.GetTournamentCheckpointRequest(tournament_id="cup"))

    assert signed.size == 0 and signed.origin.endswith("/tournament/cup")
    # No game is in the empty tree (its current size asked for, not a size it has not reached).
    request = cp.ProveGameRequest(tournament_id="cup", game_id=UNKNOWN)
    await fails_with(checkpoints.ProveGame(request), NOT_FOUND, reason="GAME_NOT_IN_TREE")


async def test_a_game_not_among_the_finished_is_game_not_in_tree(
    server: RunningServer, checkpoints: CheckpointStub, database_url: str
) -> None:
    await store_game(server.store, new_id(), play_game(Variant.CLASSIC, 3, 8), tournament_id="cup")
    playing = new_id()
    await store_game(
        server.store, playing, play_game(Variant.CLASSIC, 3, 9), tournament_id="cup", steps=slice(0, 4)
    )
    request = cp.ProveGameRequest(tournament_id="cup", game_id=playing)

    await refused(database_url, lambda: checkpoints.ProveGame(request), NOT_FOUND, "GAME_NOT_IN_TREE")


async def test_a_game_whose_chain_does_not_verify_is_chain_broken(
    server: RunningServer, checkpoints: CheckpointStub, database_url: str
) -> None:
    game_id = await store_simulated(server.store, Variant.CLASSIC, seed=10)
    await tamper(
        database_url,
        (
            "UPDATE events SET payload = payload || '{\"edited\": true}'::jsonb "
            "WHERE game_id = %s AND version = 2",
            (game_id,),
        ),
    )
    request = cp.GetCheckpointRequest(game_id=game_id)

    await refused(database_url, lambda: checkpoints.GetCheckpoint(request), FAILED, "CHAIN_BROKEN")
