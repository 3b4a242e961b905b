"""The checkpoint service: signed checkpoints of games and tournaments, the keys that check them, Merkle
proofs over a tournament's finished games, and the adjudicator's check of a player's receipts.

Everything here is public but :meth:`CheckpointService.CheckReceipts` (a checkpoint is a version and a
hash: it shows no card). Nothing is signed that does not verify: a game's head is recomputed from its
events and must equal the stored chain (:mod:`service.audit.tournaments`), else FAILED_PRECONDITION
``CHAIN_BROKEN``; nor is a tournament no game is in (NOT_FOUND ``UNKNOWN_TOURNAMENT``). A game the store
lost whole is no refusal: its genuine receipts are each ``missing``. Every refusal's reason is listed with
CheckpointService in protos/uno/audit/v1/checkpoint.proto.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from service.api.callers import Callers, Context
from service.audit.game_report import lost_game
from service.audit.tournaments import ChainBroken, UnknownTournament, game_head, tournament_leaves
from service.checkpoints import Checkpoint, TournamentLeaf, game_checkpoint, prove_game, tournament_checkpoint
from service.checkpoints.keyring import Keyring
from service.checkpoints.receipts import check_receipts
from service.checkpoints.tournament import tournament_tree
from service.domain import limits
from service.domain.errors import InvalidInput, NotFound, Precondition
from service.store import EventStore
from uno_audit_client.gen.uno.audit.v1 import checkpoint_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import checkpoint_pb2_grpc

T = TypeVar("T")


class CheckpointService(checkpoint_pb2_grpc.CheckpointServiceServicer):
    """``uno.audit.v1.CheckpointService`` over one store and the service's keyring."""

    def __init__(self, store: EventStore, keyring: Keyring, callers: Callers) -> None:
        self.store = store
        self.keyring = keyring
        self.callers = callers

    async def GetCheckpointKeys(
        self, request: pb.GetCheckpointKeysRequest, context: Context
    ) -> pb.CheckpointKeys:
        self.callers.server_caller(context)  # a malformed authorization header is refused here too
        return pb.CheckpointKeys(
            keys=[
                pb.CheckpointKey(
                    name=key.name, key_id=f"{key.key_id:08x}", verifier_key=key.encode(), current=index == 0
                )
                for index, key in enumerate(self.keyring.published)
            ]
        )

    async def GetCheckpoint(self, request: pb.GetCheckpointRequest, context: Context) -> pb.SignedCheckpoint:
        game_id = limits.identifier(request.game_id, "game_id")
        await self.callers.caller(context, game_id)
        rows = await self.store.read_stream(game_id)
        if not rows:
            raise NotFound(f"no game {game_id!r}", reason="UNKNOWN_GAME")
        head = await _verified(game_head(self.store, game_id))
        return self._signed(game_checkpoint(self.keyring.service, game_id, head.version, head.head))

    async def GetTournamentCheckpoint(
        self, request: pb.GetTournamentCheckpointRequest, context: Context
    ) -> pb.SignedCheckpoint:
        self.callers.server_caller(context)
        tournament_id = limits.identifier(request.tournament_id, "tournament_id")
        leaves = await self._leaves(tournament_id)
        return self._signed(tournament_checkpoint(self.keyring.service, tournament_id, leaves))

    async def ProveGame(self, request: pb.ProveGameRequest, context: Context) -> pb.InclusionProof:
        self.callers.server_caller(context)
        tournament_id = limits.identifier(request.tournament_id, "tournament_id")
        game_id = limits.identifier(request.game_id, "game_id")
        leaves = await self._leaves(tournament_id)
        # The current tree asked for, and it is empty: no size is out of range, the game is not in it.
        if not leaves and request.size == 0:
            raise NotFound(
                f"{game_id!r} is not in the tournament's tree: none of its games has finished",
                reason="GAME_NOT_IN_TREE",
            )
        size = _size(request.size, len(leaves), "size")
        try:
            inclusion = prove_game(leaves, game_id, size)
        except KeyError:
            raise NotFound(
                f"{game_id!r} is not among the first {size} finished games of the tournament",
                reason="GAME_NOT_IN_TREE",
            ) from None
        return pb.InclusionProof(
            tournament_id=tournament_id,
            game_id=game_id,
            version=inclusion.leaf.version,
            head_hash=inclusion.leaf.head_hash.hex(),
            index=inclusion.index,
            size=inclusion.size,
            proof=[step.hex() for step in inclusion.proof],
            leaf_format=inclusion.leaf.format,
            variant=inclusion.leaf.variant,
            players=inclusion.leaf.players or (),
        )

    async def ProveConsistency(
        self, request: pb.ProveConsistencyRequest, context: Context
    ) -> pb.ConsistencyProof:
        self.callers.server_caller(context)
        tournament_id = limits.identifier(request.tournament_id, "tournament_id")
        leaves = await self._leaves(tournament_id)
        size = _size(request.size, len(leaves), "size")
        if not 0 < request.old_size <= size:
            raise InvalidInput("old_size", f"must be 1 to {size}")
        proof = tournament_tree(leaves).consistency_proof(request.old_size, size)
        return pb.ConsistencyProof(
            tournament_id=tournament_id,
            old_size=request.old_size,
            size=size,
            proof=[step.hex() for step in proof],
        )

    async def CheckReceipts(
        self, request: pb.CheckReceiptsRequest, context: Context
    ) -> pb.CheckReceiptsReply:
        self.callers.admin(context)
        game_id = limits.identifier(request.game_id, "game_id")
        notes = limits.receipts(request.receipts, "receipts")
        rows = await self.store.read_stream(game_id)
        checks = check_receipts(
            game_id, rows, notes, service=self.keyring.service, log_keys=self.keyring.published
        )
        if not rows:  # lost (each genuine receipt missing), else NOT_FOUND UNKNOWN_GAME as before
            lost_game(game_id, checks)
        return pb.CheckReceiptsReply(
            valid=all(check.ok for check in checks),
            checks=[
                pb.ReceiptCheck(
                    index=check.index,
                    version=check.version or 0,
                    verdict=check.verdict,
                    message=check.message,
                )
                for check in checks
            ],
        )

    # --- helpers ---------------------------------------------------------------------------------------

    def _signed(self, checkpoint: Checkpoint) -> pb.SignedCheckpoint:
        return pb.SignedCheckpoint(
            note=checkpoint.sign(self.keyring.signer),
            origin=checkpoint.origin,
            size=checkpoint.size,
            root_hash=checkpoint.root_hash.hex(),
        )

    async def _leaves(self, tournament_id: str) -> list[TournamentLeaf]:
        try:
            return await _verified(tournament_leaves(self.store, tournament_id))
        except UnknownTournament as unknown:
            raise NotFound(str(unknown), reason="UNKNOWN_TOURNAMENT") from None


def _size(requested: int, available: int, field: str) -> int:
    """A tree size asked for: 0 for the current one, else 1 to the current one."""
    if requested == 0 and available > 0:
        return available
    if not 0 < requested <= available:
        raise InvalidInput(field, f"the tournament has {available} finished games; ask for 1 to {available}")
    return requested


async def _verified(work: Awaitable[T]) -> T:
    """``await work``, with a broken chain answered FAILED_PRECONDITION ``CHAIN_BROKEN``."""
    try:
        return await work
    except ChainBroken as broken:
        raise Precondition(f"{broken}: it is not signed until it verifies", reason="CHAIN_BROKEN") from None
