"""A tournament's games in one Merkle tree, its signed checkpoint, and the proof that a game is in it.

Each leaf is one game's head, ``len(game id) ‖ game id ‖ version ‖ head hash`` (UTF-8 id of 1 to
:data:`MAX_GAME_ID_BYTES` bytes after a 2-byte length, an 8-byte version, the 32-byte hash), in the order
the games were added. The origin is ``<service name>/tournament/<tournament id>``; a player proves a game
counted with :func:`verify_game_in_tournament`. docs/DESIGN.md ("Merkle trees and tournaments").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from service.checkpoints.checkpoint import Checkpoint, CheckpointError, Receipt
from service.checkpoints.keys import check_key_name
from service.checkpoints.merkle import HASH_SIZE, MerkleTree, leaf_hash, verify_inclusion

MAX_GAME_ID_BYTES = 1024
"""The longest game id a leaf holds, in UTF-8 bytes (the service takes ids of at most 128 characters)."""
_VERSION_BYTES = 8


@dataclass(frozen=True, slots=True)
class TournamentLeaf:
    """One game of a tournament: its id, its version, and the hash of its event at that version."""

    game_id: str
    version: int
    head_hash: bytes

    def __post_init__(self) -> None:
        try:
            size = len(self.game_id.encode())
        except UnicodeEncodeError:
            raise ValueError("a game id is valid Unicode text (it contains a lone surrogate)") from None
        if not 1 <= size <= MAX_GAME_ID_BYTES:
            raise ValueError(f"a game id is 1 to {MAX_GAME_ID_BYTES} bytes in UTF-8")
        if not 0 <= self.version < 2**63:
            raise ValueError("a game's version is between 0 and 2**63 - 1")
        if len(self.head_hash) != HASH_SIZE:
            raise ValueError(f"a head hash is {HASH_SIZE} bytes")

    def encode(self) -> bytes:
        """The leaf's bytes (see the module's docstring)."""
        game = self.game_id.encode()
        return (
            len(game).to_bytes(2, "big")
            + game
            + self.version.to_bytes(_VERSION_BYTES, "big")
            + bytes(self.head_hash)
        )

    @classmethod
    def decode(cls, data: bytes) -> TournamentLeaf:
        """The leaf whose bytes are ``data``; :class:`ValueError` unless ``encode()`` gives them back."""
        if len(data) < 2:
            raise ValueError("a leaf starts with the length of its game id")
        size = int.from_bytes(data[:2], "big")
        if len(data) != 2 + size + _VERSION_BYTES + HASH_SIZE:
            raise ValueError("a leaf is its game id, an 8-byte version and a 32-byte hash")
        try:
            game_id = data[2 : 2 + size].decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("a leaf's game id is UTF-8") from None
        version = int.from_bytes(data[2 + size : 2 + size + _VERSION_BYTES], "big")
        return cls(game_id, version, data[2 + size + _VERSION_BYTES :])

    def hash(self) -> bytes:
        """The leaf hash (RFC 6962): what an inclusion proof starts from."""
        return leaf_hash(self.encode())


def tournament_origin(service: str, tournament_id: str) -> str:
    """``<service>/tournament/<tournament id>``: the origin of a tournament's checkpoints."""
    check_key_name(service)
    if not tournament_id or "\n" in tournament_id:
        raise CheckpointError("a tournament id is one non-empty line")
    return f"{service}/tournament/{tournament_id}"


def tournament_tree(leaves: Iterable[TournamentLeaf]) -> MerkleTree:
    """The Merkle tree of ``leaves``, in their order; :class:`ValueError` if a game is there twice."""
    seen: set[str] = set()
    encoded: list[bytes] = []
    for leaf in leaves:
        if leaf.game_id in seen:
            raise ValueError(f"the game {leaf.game_id!r} is in the tournament twice")
        seen.add(leaf.game_id)
        encoded.append(leaf.encode())
    return MerkleTree(encoded)


def tournament_checkpoint(service: str, tournament_id: str, leaves: Sequence[TournamentLeaf]) -> Checkpoint:
    """The checkpoint of a tournament whose games are ``leaves``: size, the number of games; root hash,
    the tree head."""
    tree = tournament_tree(leaves)
    return Checkpoint(tournament_origin(service, tournament_id), tree.size, tree.root())


@dataclass(frozen=True, slots=True)
class GameInclusion:
    """That ``leaf`` is leaf ``index`` of a tournament's tree of ``size`` leaves: the inclusion proof a
    player keeps beside the tournament's receipt."""

    leaf: TournamentLeaf
    index: int
    size: int
    proof: tuple[bytes, ...]


def prove_game(leaves: Sequence[TournamentLeaf], game_id: str, size: int | None = None) -> GameInclusion:
    """The inclusion of ``game_id`` in the tree of the first ``size`` of ``leaves`` (all by default)."""
    tree = tournament_tree(leaves)
    size = tree.size if size is None else size
    for index, leaf in enumerate(leaves[:size]):
        if leaf.game_id == game_id:
            return GameInclusion(leaf, index, size, tree.inclusion_proof(index, size))
    raise KeyError(f"the game {game_id!r} is not among the first {size} games of the tournament")


def verify_game_in_tournament(
    receipt: Receipt, inclusion: GameInclusion, *, service: str, tournament_id: str
) -> None:
    """Check that ``inclusion`` proves its game is in the tournament checkpoint of ``receipt`` (already
    opened and verified, :func:`~service.checkpoints.checkpoint.open_checkpoint`); raises
    :class:`CheckpointError` for a receipt of another tournament or another size, and
    :class:`~service.checkpoints.merkle.ProofError` for a proof that does not lead to its root."""
    expected = tournament_origin(service, tournament_id)
    if receipt.origin != expected:
        raise CheckpointError(f"the checkpoint is of {receipt.origin!r}, not of {expected!r}")
    if receipt.size != inclusion.size:
        raise CheckpointError(
            f"the proof is for a tree of {inclusion.size} games, the checkpoint's has {receipt.size}"
        )
    verify_inclusion(
        inclusion.leaf.hash(), inclusion.index, inclusion.size, inclusion.proof, receipt.root_hash
    )
