"""Receipts and checkpoints over gRPC, against a real server and PostgreSQL: every reply carries the
game's signed checkpoint at its version; the published keys open them; a duplicate answers the same
receipt; the adjudicator's CheckReceipts finds a rewrite that recomputed the chain; tournament
checkpoints and proofs check with the library alone; bad input is refused naming the field.
"""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import struct_pb2

from service.checkpoints import (
    CheckpointError,
    GameInclusion,
    ProofError,
    TournamentLeaf,
    Verifier,
    open_checkpoint,
    open_game_receipt,
    verify_consistency,
    verify_game_in_tournament,
)
from service.store import EventStore
from tests.rewrite import marked_at, rewrite_recomputing_chain
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as audit_pb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc as audit_grpc
from uno_audit_client.gen.uno.audit.v1 import checkpoint_pb2 as cp
from uno_audit_client.gen.uno.audit.v1 import checkpoint_pb2_grpc as cp_grpc
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import ADMIN, SCRIPT_DECK, Game, create_scripted, fails_with, header, new_id, play_script

pytestmark = pytest.mark.postgres


@pytest.fixture
def checkpoints(channel: grpc.aio.Channel) -> cp_grpc.CheckpointServiceStub:
    return cp_grpc.CheckpointServiceStub(channel)  # type: ignore[no-untyped-call]


async def _keys(checkpoints: cp_grpc.CheckpointServiceStub) -> list[Verifier]:
    reply = await checkpoints.GetCheckpointKeys(cp.GetCheckpointKeysRequest())
    assert [key.current for key in reply.keys] == [True]
    keys = [Verifier.parse(key.verifier_key) for key in reply.keys]
    assert [f"{key.key_id:08x}" for key in keys] == [key.key_id for key in reply.keys]
    return keys


async def test_every_reply_carries_the_signed_head_of_its_version(
    stub: pb_grpc.GameServiceStub, checkpoints: cp_grpc.CheckpointServiceStub, store: EventStore
) -> None:
    keys = await _keys(checkpoints)
    game = await create_scripted(stub)
    replies = [game.reply, *await play_script(stub, game)]
    rows = await store.read_stream(game.game_id)
    service = keys[0].name
    for reply in replies:
        receipt = open_game_receipt(reply.receipt, keys, service=service, game_id=game.game_id)
        assert receipt.size == reply.version
        assert receipt.root_hash == rows[reply.version - 1].hash
    latest = await checkpoints.GetCheckpoint(cp.GetCheckpointRequest(game_id=game.game_id))
    assert latest.note == replies[-1].receipt  # Ed25519 signs deterministically: the same head, the same note
    assert (latest.size, latest.root_hash) == (len(rows), rows[-1].hash.hex())


async def test_a_retried_command_answers_the_first_receipt(stub: pb_grpc.GameServiceStub) -> None:
    game = await create_scripted(stub)
    request = pb.PlayRequest(header=header(game.game_id), card="R7")
    first = await stub.Play(request, metadata=game.seat(1))
    await stub.Draw(pb.DrawRequest(header=header(game.game_id)), metadata=game.seat(2))
    again = await stub.Play(request, metadata=game.seat(1))
    assert again.duplicate and again.receipt == first.receipt and again.version == first.version


async def test_check_receipts_finds_a_rewrite_the_chain_cannot(
    channel: grpc.aio.Channel,
    stub: pb_grpc.GameServiceStub,
    checkpoints: cp_grpc.CheckpointServiceStub,
    store: EventStore,
    database_url: str,
) -> None:
    game = await create_scripted(stub)
    replies = [game.reply, *await play_script(stub, game)]
    receipts = [reply.receipt for reply in replies]
    request = cp.CheckReceiptsRequest(game_id=game.game_id, receipts=receipts)
    checked = await checkpoints.CheckReceipts(request, metadata=ADMIN)
    assert checked.valid and {c.verdict for c in checked.checks} == {"matches"}

    at = replies[3].version  # rewrite an event the fourth receipt covers, recompute every hash after it
    await rewrite_recomputing_chain(
        database_url,
        game.game_id,
        marked_at(at),
    )
    checked = await checkpoints.CheckReceipts(request, metadata=ADMIN)
    assert not checked.valid
    expected = ["matches" if reply.version < at else "rewritten" for reply in replies]
    assert [c.verdict for c in checked.checks] == expected
    assert [c.version for c in checked.checks] == [reply.version for reply in replies]

    # VerifyGame with the receipts: the chain is intact (it was recomputed), the receipts are not.
    audit = audit_grpc.AuditServiceStub(channel)  # type: ignore[no-untyped-call]
    verify = audit_pb.VerifyGameRequest(game_id=game.game_id, receipts=receipts, check_projections=False)
    verified = await audit.VerifyGame(verify, metadata=ADMIN)
    assert verified.chain_valid and not verified.valid and not verified.receipts_valid
    assert verified.first_rewritten_version == at
    verdicts = [entry["verdict"] for entry in verified.report["receipts"]]
    assert verdicts == expected
    plain = await audit.VerifyGame(
        audit_pb.VerifyGameRequest(game_id=game.game_id, check_projections=False), metadata=ADMIN
    )
    assert plain.receipts_valid and plain.first_rewritten_version == 0 and "receipts" not in plain.report


async def test_check_receipts_is_the_adjudicators_and_bounds_its_input(
    stub: pb_grpc.GameServiceStub, checkpoints: cp_grpc.CheckpointServiceStub
) -> None:
    game = await create_scripted(stub)
    request = cp.CheckReceiptsRequest(game_id=game.game_id, receipts=[game.reply.receipt])
    await fails_with(checkpoints.CheckReceipts(request), grpc.StatusCode.UNAUTHENTICATED)
    await fails_with(
        checkpoints.CheckReceipts(request, metadata=game.seat(0)), grpc.StatusCode.PERMISSION_DENIED
    )
    for receipts, field in [([""], "receipts[0]"), (["x" * (64 * 1024 + 1)], "receipts[0]")]:
        bad = cp.CheckReceiptsRequest(game_id=game.game_id, receipts=receipts)
        await fails_with(
            checkpoints.CheckReceipts(bad, metadata=ADMIN), grpc.StatusCode.INVALID_ARGUMENT, field=field
        )
    garbage = cp.CheckReceiptsRequest(game_id=game.game_id, receipts=["not a note", "a\n\n— x AAAA\n"])
    checked = await checkpoints.CheckReceipts(garbage, metadata=ADMIN)
    assert not checked.valid and [c.verdict for c in checked.checks] == ["refused", "refused"]
    unknown = cp.CheckReceiptsRequest(game_id="no-such-game", receipts=[game.reply.receipt])
    await fails_with(
        checkpoints.CheckReceipts(unknown, metadata=ADMIN), grpc.StatusCode.NOT_FOUND, reason="UNKNOWN_GAME"
    )
    await fails_with(
        checkpoints.GetCheckpoint(cp.GetCheckpointRequest(game_id="")),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="game_id",
    )


async def _finished_game(stub: pb_grpc.GameServiceStub, tournament_id: str) -> str:
    """The scripted game (a fixed deck, to one point) played to its end in ``tournament_id``."""
    reply = await stub.CreateGame(
        pb.CreateGameRequest(
            command_id=new_id(),
            variant=pb.CLASSIC,
            players=["p0", "p1", "p2"],
            fixed_deck=SCRIPT_DECK,
            target_score=1,
            tournament_id=tournament_id,
            options=_struct({"dealer_selection": "given"}),
        ),
        metadata=ADMIN,
    )
    await play_script(stub, Game(reply.game_id, [seat.token for seat in reply.seats], reply))
    return reply.game_id


def _struct(values: dict[str, str]) -> struct_pb2.Struct:
    made = struct_pb2.Struct()
    made.update(values)
    return made


async def test_tournament_checkpoints_and_proofs_check_with_the_published_key_alone(
    stub: pb_grpc.GameServiceStub, checkpoints: cp_grpc.CheckpointServiceStub
) -> None:
    keys = await _keys(checkpoints)
    service = keys[0].name
    spring = cp.GetTournamentCheckpointRequest(tournament_id="spring")
    games = [await _finished_game(stub, "spring") for _ in range(2)]
    await _finished_game(stub, "autumn")  # another tournament's game is no leaf of this one
    old = open_checkpoint((await checkpoints.GetTournamentCheckpoint(spring)).note, keys)
    games.append(await _finished_game(stub, "spring"))
    new = open_checkpoint((await checkpoints.GetTournamentCheckpoint(spring)).note, keys)
    assert (old.size, new.size) == (2, 3)
    for index, game_id in enumerate(games):
        proof = await checkpoints.ProveGame(cp.ProveGameRequest(tournament_id="spring", game_id=game_id))
        inclusion = GameInclusion(
            TournamentLeaf(
                proof.game_id,
                proof.version,
                bytes.fromhex(proof.head_hash),
                proof.variant,
                tuple(proof.players),
            ),
            proof.index,
            proof.size,
            tuple(bytes.fromhex(step) for step in proof.proof),
        )
        assert inclusion.index == index  # the order the games finished in
        verify_game_in_tournament(new, inclusion, service=service, tournament_id="spring")
        with pytest.raises(CheckpointError):  # a proof for the tree of three is no proof for the old two
            verify_game_in_tournament(old, inclusion, service=service, tournament_id="spring")
    request = cp.ProveConsistencyRequest(tournament_id="spring", old_size=2)
    consistency = await checkpoints.ProveConsistency(request)
    proof = tuple(bytes.fromhex(step) for step in consistency.proof)
    verify_consistency(2, 3, proof, old.root_hash, new.root_hash)
    with pytest.raises(ProofError):
        verify_consistency(2, 3, proof, new.root_hash, old.root_hash)
    too_big = cp.ProveConsistencyRequest(tournament_id="spring", old_size=4)
    await fails_with(
        checkpoints.ProveConsistency(too_big), grpc.StatusCode.INVALID_ARGUMENT, field="old_size"
    )
    outsider = cp.ProveGameRequest(tournament_id="spring", game_id="no-such-game")
    await fails_with(checkpoints.ProveGame(outsider), grpc.StatusCode.NOT_FOUND, reason="GAME_NOT_IN_TREE")


BAD_IDS = ["", "x" * 129, "bad\nid", "\u202e"]


@pytest.mark.parametrize("bad", BAD_IDS)
async def test_every_checkpoint_rpc_refuses_a_bad_id_naming_the_field(
    checkpoints: cp_grpc.CheckpointServiceStub, bad: str
) -> None:
    calls = [
        (checkpoints.GetCheckpoint(cp.GetCheckpointRequest(game_id=bad)), "game_id"),
        (
            checkpoints.GetTournamentCheckpoint(cp.GetTournamentCheckpointRequest(tournament_id=bad)),
            "tournament_id",
        ),
        (checkpoints.ProveGame(cp.ProveGameRequest(tournament_id=bad, game_id="g")), "tournament_id"),
        (checkpoints.ProveGame(cp.ProveGameRequest(tournament_id="t", game_id=bad)), "game_id"),
        (
            checkpoints.ProveConsistency(cp.ProveConsistencyRequest(tournament_id=bad, old_size=1)),
            "tournament_id",
        ),
        (
            checkpoints.CheckReceipts(cp.CheckReceiptsRequest(game_id=bad, receipts=["x"]), metadata=ADMIN),
            "game_id",
        ),
    ]
    for call, field in calls:
        await fails_with(call, grpc.StatusCode.INVALID_ARGUMENT, field=field)


@pytest.mark.parametrize("size", [-1, -(2**63), 2**62])
async def test_a_tree_size_out_of_range_is_refused_naming_it(
    stub: pb_grpc.GameServiceStub, checkpoints: cp_grpc.CheckpointServiceStub, size: int
) -> None:
    await _finished_game(stub, "winter")
    prove = cp.ProveGameRequest(tournament_id="winter", game_id="g", size=size)
    await fails_with(checkpoints.ProveGame(prove), grpc.StatusCode.INVALID_ARGUMENT, field="size")
    consistency = cp.ProveConsistencyRequest(tournament_id="winter", old_size=1, size=size)
    await fails_with(
        checkpoints.ProveConsistency(consistency), grpc.StatusCode.INVALID_ARGUMENT, field="size"
    )
    # A tournament whose one game is in progress has a tree of no games: no size is in range.
    await stub.CreateGame(
        pb.CreateGameRequest(
            command_id=new_id(), variant=pb.CLASSIC, players=["a", "b"], tournament_id="spring"
        )
    )
    empty = cp.ProveConsistencyRequest(tournament_id="spring", old_size=1)
    await fails_with(checkpoints.ProveConsistency(empty), grpc.StatusCode.INVALID_ARGUMENT, field="size")
    unknown = cp.ProveConsistencyRequest(tournament_id="no-games-yet", old_size=1)
    await fails_with(
        checkpoints.ProveConsistency(unknown), grpc.StatusCode.NOT_FOUND, reason="UNKNOWN_TOURNAMENT"
    )
