"""Signed checkpoints of games and tournaments: receipts a player keeps and an arbiter checks.

The store chains each game's events by hash, so the hash of the event at version ``v`` (the game's
*head* at ``v``) commits to the whole game up to there. A hash chain alone only helps someone who holds
a copy of it, though: whoever runs the database can rewrite a game and its hashes together. A signed
checkpoint closes that gap. The service signs, with its Ed25519 key, the statement "game ``G`` at
version ``v`` has head ``h``" as a C2SP checkpoint (``<service>/game/<G>``, ``v``, ``h``) in the C2SP
signed-note format (:mod:`.note`, :mod:`.checkpoint`), and hands it to the players.

**What a player keeps**: that signed note, byte for byte (a :class:`Receipt` is its opened form). It is
a few hundred bytes of text, and it needs nothing else to be checked later except the service's public
verifier key, which the service publishes (all of its keys, old ones included).

**What an arbiter does with it**: open the receipt with the service's published keys
(:func:`open_game_receipt`; any witness co-signatures the tournament rules require, with a threshold),
then recompute the game's hash chain from the log or the game record under dispute and compare the hash
of event ``receipt.size`` with ``receipt.root_hash``. Equal: the history shown is the one the service
signed to the player. Different: the history was changed after the receipt was signed, and the
receipt, which only the service's key could have made, proves it.

Tournaments put their games' heads in an RFC 6962 Merkle tree (:mod:`.merkle`, :mod:`.tournament`)
and sign its head the same way; an inclusion proof shows that one game counted in the tournament, and a
consistency proof that a later checkpoint of the tournament only added games to an earlier one.

Witnesses (:func:`cosign`) add their signatures to a checkpoint after checking the service's, so that a
service cannot show different players different histories without someone else signing both.

Keys (:mod:`.keys`) are the Go ``sumdb/note`` key strings; ``uno-audit keygen`` makes one. Everything
here is pure computation over bytes, except reading and writing key files.
"""

from service.checkpoints.checkpoint import (
    Checkpoint,
    CheckpointError,
    Receipt,
    ThresholdError,
    cosign,
    game_checkpoint,
    game_origin,
    open_checkpoint,
    open_game_receipt,
)
from service.checkpoints.keys import (
    KEY_ENV,
    KeyFormatError,
    Signer,
    Verifier,
    check_key_name,
    key_id,
    load_signer,
    signer_from_environment,
    write_signer,
)
from service.checkpoints.merkle import (
    EMPTY_ROOT,
    MerkleTree,
    ProofError,
    leaf_hash,
    node_hash,
    verify_consistency,
    verify_inclusion,
)
from service.checkpoints.note import (
    MAX_LINE_BYTES,
    MAX_NOTE_BYTES,
    MAX_SIGNATURES,
    InvalidSignatureError,
    Note,
    NoteError,
    NoteVerificationError,
    OpenedNote,
    Signature,
    UnverifiedNoteError,
    open_note,
    parse_note,
    sign_checked,
    sign_text,
)
from service.checkpoints.tournament import (
    GameInclusion,
    TournamentLeaf,
    prove_game,
    tournament_checkpoint,
    tournament_origin,
    tournament_tree,
    verify_game_in_tournament,
)

__all__ = [
    "EMPTY_ROOT",
    "KEY_ENV",
    "MAX_LINE_BYTES",
    "MAX_NOTE_BYTES",
    "MAX_SIGNATURES",
    "Checkpoint",
    "CheckpointError",
    "GameInclusion",
    "InvalidSignatureError",
    "KeyFormatError",
    "MerkleTree",
    "Note",
    "NoteError",
    "NoteVerificationError",
    "OpenedNote",
    "ProofError",
    "Receipt",
    "Signature",
    "Signer",
    "ThresholdError",
    "TournamentLeaf",
    "UnverifiedNoteError",
    "Verifier",
    "check_key_name",
    "cosign",
    "game_checkpoint",
    "game_origin",
    "key_id",
    "leaf_hash",
    "load_signer",
    "node_hash",
    "open_checkpoint",
    "open_game_receipt",
    "open_note",
    "parse_note",
    "prove_game",
    "sign_checked",
    "sign_text",
    "signer_from_environment",
    "tournament_checkpoint",
    "tournament_origin",
    "tournament_tree",
    "verify_consistency",
    "verify_game_in_tournament",
    "verify_inclusion",
    "write_signer",
]
