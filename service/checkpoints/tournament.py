"""A tournament's games in one Merkle tree, its signed checkpoint, and the proof that a game is in it.

Each leaf is one game's head and, from leaf format 2 on, its variant and players by seat (format 1:
``len(id) ‖ id ‖ version ‖ head``; format 2: ``0xFF 0x02 ‖ len(id) ‖ id ‖ version ‖ head ‖ len(variant) ‖
variant ‖ count ‖ (len(name) ‖ name)…``), in the order the games were added. The origin is
``<service name>/tournament/<tournament id>``; a player proves a game counted with
:func:`verify_game_in_tournament`. docs/DESIGN.md ("Merkle trees and tournaments"), docs/CHECKPOINTS.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from service.checkpoints.checkpoint import Checkpoint, CheckpointError, Receipt
from service.checkpoints.keys import check_key_name
from service.checkpoints.merkle import HASH_SIZE, MerkleTree, leaf_hash, verify_inclusion

MAX_GAME_ID_BYTES = 1024
"""The longest game id a leaf holds, in UTF-8 bytes (the service takes ids of at most 128 characters)."""
_VERSION_BYTES = 8
#: A format-2 leaf starts with these two bytes. A format-1 leaf starts with its id's 2-byte length, at most
#: 1024, so its first byte is at most 0x04: the two formats can never encode the same bytes.
_FORMAT_2 = b"\xff\x02"
#: Bounds of a format-2 leaf's variant and names, in UTF-8 bytes, and of its players.
MAX_NAME_BYTES = 1024
MAX_PLAYERS = 255


@dataclass(frozen=True, slots=True)
class TournamentLeaf:
    """One game of a tournament: its id, its version, the hash of its event at that version and, in leaf
    format 2 (``players`` given), its variant and its players' names by seat, so that a result shown by
    name is the one signed. ``players`` ``None``: a format-1 leaf, as signed before format 2."""

    game_id: str
    version: int
    head_hash: bytes
    variant: str = ""
    players: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        size = len(_utf8(self.game_id, "a game id"))
        if not 1 <= size <= MAX_GAME_ID_BYTES:
            raise ValueError(f"a game id is 1 to {MAX_GAME_ID_BYTES} bytes in UTF-8")
        if not 0 <= self.version < 2**63:
            raise ValueError("a game's version is between 0 and 2**63 - 1")
        if len(self.head_hash) != HASH_SIZE:
            raise ValueError(f"a head hash is {HASH_SIZE} bytes")
        if self.players is None:
            if self.variant:
                raise ValueError("a format-1 leaf has no variant")
            return
        if not 1 <= len(self.players) <= MAX_PLAYERS:
            raise ValueError(f"a leaf names 1 to {MAX_PLAYERS} players")
        for text, what in (
            (self.variant, "a variant"),
            *((name, "a player's name") for name in self.players),
        ):
            if len(_utf8(text, what)) > MAX_NAME_BYTES:
                raise ValueError(f"{what} is at most {MAX_NAME_BYTES} bytes in UTF-8")

    @property
    def format(self) -> int:
        """The leaf format: 1 (id, version, head) or 2 (and the variant and players)."""
        return 1 if self.players is None else 2

    def encode(self) -> bytes:
        """The leaf's bytes (see the module's docstring)."""
        game = self.game_id.encode()
        head = (
            len(game).to_bytes(2, "big")
            + game
            + self.version.to_bytes(_VERSION_BYTES, "big")
            + bytes(self.head_hash)
        )
        if self.players is None:
            return head
        names = b"".join(_string(name) for name in self.players)
        return _FORMAT_2 + head + _string(self.variant) + len(self.players).to_bytes(1, "big") + names

    @classmethod
    def decode(cls, data: bytes) -> TournamentLeaf:
        """The leaf whose bytes are ``data``; :class:`ValueError` unless ``encode()`` gives them back."""
        formatted = data.startswith(_FORMAT_2)
        reader = _Reader(data[len(_FORMAT_2) :] if formatted else data)
        game_id = reader.string("game id")
        version = int.from_bytes(reader.take(_VERSION_BYTES, "version"), "big")
        head = reader.take(HASH_SIZE, "head hash")
        variant, players = "", None
        if formatted:
            variant = reader.string("variant")
            count = reader.take(1, "count of players")[0]
            players = tuple(reader.string("player's name") for _ in range(count))
        if reader.rest:
            raise ValueError("a leaf has bytes after its last field")
        leaf = cls(game_id, version, head, variant, players)
        if leaf.encode() != data:
            raise ValueError("a leaf's bytes are not its fields' encoding")
        return leaf

    def hash(self) -> bytes:
        """The leaf hash (RFC 6962): what an inclusion proof starts from."""
        return leaf_hash(self.encode())

    def to_json(self) -> dict[str, Any]:
        """The leaf's inputs as a proof's ``leaf`` holds them: ``game_id``, ``version``, ``head_hash`` (hex)
        and, in format 2, ``format``, ``variant`` and ``players`` (names in seat order)."""
        given: dict[str, Any] = {
            "game_id": self.game_id,
            "version": self.version,
            "head_hash": self.head_hash.hex(),
        }
        if self.players is not None:
            given.update(format=2, variant=self.variant, players=list(self.players))
        return given

    @classmethod
    def from_json(cls, given: Any) -> TournamentLeaf:
        """The leaf :meth:`to_json` gave (no ``format``: a format-1 leaf, as proofs were written before
        format 2); :class:`ValueError` for anything else."""
        if not isinstance(given, dict):
            raise ValueError("a leaf is a JSON object")
        fields = {"game_id", "version", "head_hash"}
        form = given.get("format", 1)
        if form == 2:
            fields |= {"format", "variant", "players"}
        elif form != 1 or "format" in given:
            raise ValueError(f"an unknown leaf format: {form!r}")
        if set(given) != fields:
            raise ValueError(f"a format-{form} leaf has exactly the fields {', '.join(sorted(fields))}")
        game_id, version, head, variant, players = (
            given["game_id"],
            given["version"],
            given["head_hash"],
            given.get("variant", ""),
            given.get("players"),
        )
        texts = [game_id, head, variant, *(players if isinstance(players, list) else [])]
        if not all(isinstance(text, str) for text in texts) or type(version) is not int:
            raise ValueError("a leaf's id, head, variant and names are strings, its version an integer")
        if players is not None and not isinstance(players, list):
            raise ValueError("a leaf's players are a list of names")
        if len(head) != 2 * HASH_SIZE or head != head.lower():
            raise ValueError(f"a head hash is {HASH_SIZE} bytes of lower-case hex")
        return cls(
            game_id, version, bytes.fromhex(head), variant, None if players is None else tuple(players)
        )


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:
        raise ValueError(f"{what} is valid Unicode text (it contains a lone surrogate)") from None


def _string(text: str) -> bytes:
    """``uint16(len) ‖ UTF-8``: how a format-2 leaf holds each text."""
    data = text.encode()
    return len(data).to_bytes(2, "big") + data


class _Reader:
    """A leaf's bytes, read field by field; :class:`ValueError` naming the field that is cut short."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    @property
    def rest(self) -> int:
        return len(self.data) - self.at

    def take(self, size: int, what: str) -> bytes:
        if self.rest < size:
            raise ValueError(f"a leaf ends before its {what}")
        self.at += size
        return self.data[self.at - size : self.at]

    def string(self, what: str) -> str:
        size = int.from_bytes(self.take(2, f"{what}'s length"), "big")
        try:
            return self.take(size, what).decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"a leaf's {what} is UTF-8") from None


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
