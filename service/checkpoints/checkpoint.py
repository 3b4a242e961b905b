"""Checkpoints (https://c2sp.org/tlog-checkpoint): a log's size and head, signed, and what a reader keeps.

A checkpoint's note text is three lines (origin, size, base64 root hash) and optional extension lines.
For a game the origin is ``<service name>/game/<game id>``, the size its version and the root hash the
``hash`` of event ``size``; the player keeps the signed note, a :class:`Receipt`. Witnesses add their
signatures (:func:`cosign`), and a reader may demand ``k`` of them (:func:`open_checkpoint`).
docs/DESIGN.md ("A game's checkpoint and its receipts").
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from dataclasses import dataclass

from service.checkpoints.keys import Signer, Verifier, check_key_name
from service.checkpoints.merkle import HASH_SIZE, MAX_TREE_SIZE
from service.checkpoints.note import (
    MAX_LINE_BYTES,
    Note,
    NoteError,
    NoteVerificationError,
    Signature,
    UnverifiedNoteError,
    known_keys,
    open_note,
    parse_note,
    sign_checked,
)

_SIZE = re.compile(r"0|[1-9][0-9]{0,18}")


class CheckpointError(NoteError):
    """A note whose text is not a checkpoint, or a checkpoint of another log than the one expected."""


class ThresholdError(NoteVerificationError):
    """A checkpoint that the service signed but that too few of the trusted witnesses co-signed."""

    def __init__(self, found: int, threshold: int) -> None:
        super().__init__(
            f"{found} of the trusted witnesses co-signed the checkpoint; {threshold} are required"
        )
        self.found = found
        self.threshold = threshold


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A log's origin, size and root hash, and its extension lines (none here: they are opaque to
    monitors, and the specification advises against them)."""

    origin: str
    size: int
    root_hash: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.origin or "\n" in self.origin:
            raise CheckpointError("a checkpoint's origin is one non-empty line")
        if not 0 <= self.size <= MAX_TREE_SIZE:
            raise CheckpointError(f"a checkpoint's size is between 0 and {MAX_TREE_SIZE}")
        if len(self.root_hash) != HASH_SIZE:
            raise CheckpointError(f"a checkpoint's root hash is {HASH_SIZE} bytes")
        if any(not line or "\n" in line for line in self.extensions):
            raise CheckpointError("a checkpoint's extension lines are non-empty lines")
        Note(self.body())  # the note rules: characters and line lengths

    def body(self) -> str:
        """The note text: every line, the last one included, ends with a newline."""
        root = base64.b64encode(self.root_hash).decode("ascii")
        return "".join(f"{line}\n" for line in (self.origin, str(self.size), root, *self.extensions))

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        """The checkpoint a note's text states; :class:`CheckpointError` unless ``body()`` of the result
        is ``text`` exactly."""
        if not text.endswith("\n"):
            raise CheckpointError("a checkpoint's text ends with a newline")
        lines = text[:-1].split("\n")
        if len(lines) < 3:
            raise CheckpointError("a checkpoint has an origin, a size and a root hash line")
        origin, size, root64, *extensions = lines
        if any(len(line.encode()) > MAX_LINE_BYTES for line in lines):
            raise CheckpointError(f"a checkpoint's line is at most {MAX_LINE_BYTES} bytes")
        if not _SIZE.fullmatch(size):
            raise CheckpointError(f"a checkpoint's size is a decimal number without leading zeros: {size!r}")
        try:
            root = base64.b64decode(root64.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError):
            raise CheckpointError("a checkpoint's root hash is base64") from None
        if base64.b64encode(root).decode("ascii") != root64:
            raise CheckpointError("a checkpoint's root hash is in canonical base64")
        checkpoint = cls(origin, int(size), root, tuple(extensions))
        if checkpoint.body() != text:  # cannot happen by construction; a parser bug must not pass
            raise CheckpointError("the checkpoint does not round-trip")
        return checkpoint

    def sign(self, signer: Signer) -> str:
        """The signed note of this checkpoint by ``signer``: what the service hands out."""
        return sign_checked(Note(self.body()), signer)


def game_origin(service: str, game_id: str) -> str:
    """``<service>/game/<game id>``: the origin of a game's checkpoints."""
    check_key_name(service)
    if not game_id or "\n" in game_id:
        raise CheckpointError("a game id is one non-empty line")
    return f"{service}/game/{game_id}"


def game_checkpoint(service: str, game_id: str, version: int, head_hash: bytes) -> Checkpoint:
    """The checkpoint of ``game_id`` at ``version``, whose event ``version`` has ``head_hash`` (the
    store's ``GENESIS_HASH``, 32 zero bytes, for version 0)."""
    return Checkpoint(game_origin(service, game_id), version, head_hash)


@dataclass(frozen=True, slots=True)
class Receipt:
    """A signed checkpoint that was opened and verified: the note exactly as issued (what to keep and
    to show an arbiter), the checkpoint it states, and the signatures that verified.

    ``log_signatures`` are by the service's keys, ``witness_signatures`` by trusted witnesses' keys
    (each witness once), ``unverified`` by keys the reader did not trust or know.
    """

    note: str
    checkpoint: Checkpoint
    log_signatures: tuple[Signature, ...]
    witness_signatures: tuple[Signature, ...]
    unverified: tuple[Signature, ...]

    @property
    def origin(self) -> str:
        return self.checkpoint.origin

    @property
    def size(self) -> int:
        return self.checkpoint.size

    @property
    def root_hash(self) -> bytes:
        return self.checkpoint.root_hash

    def witnesses(self) -> frozenset[str]:
        """The names of the trusted witnesses whose signature verified."""
        return frozenset(sig.name for sig in self.witness_signatures)


def open_checkpoint(
    note: str | bytes,
    log_keys: Iterable[Verifier],
    *,
    witnesses: Iterable[Verifier] = (),
    threshold: int = 0,
) -> Receipt:
    """Open a signed checkpoint: it must be signed by one of ``log_keys`` (the service's, the current
    key and the older ones still published) and co-signed by at least ``threshold`` distinct
    witnesses of ``witnesses``.

    A witness counts once however many of its signatures the note carries, and however many of its
    keys (by name) are trusted: a threshold counts independent parties, not keys. A witness key under
    a name of the service's keys is ignored: the service never witnesses itself. Any signature by a
    known key that does not verify refuses the whole note. Raises
    :class:`~service.checkpoints.note.NoteError` (or :class:`CheckpointError`) for a malformed note,
    :class:`UnverifiedNoteError` without a valid service signature, :class:`InvalidSignatureError`, or
    :class:`ThresholdError`.
    """
    if threshold < 0:
        raise ValueError("a witness threshold is 0 or more")
    logs = known_keys(log_keys)
    log_names = {name for name, _ in logs}
    trusted = {key: verifier for key, verifier in known_keys(witnesses).items() if key[0] not in log_names}
    opened = open_note(note, [*logs.values(), *trusted.values()])
    checkpoint = Checkpoint.parse(opened.text)
    by_log = tuple(sig for sig in opened.verified if sig.key in logs)
    if not by_log:
        raise UnverifiedNoteError(opened)
    by_witness: list[Signature] = []
    for sig in opened.verified:
        if sig.key in trusted and all(sig.name != seen.name for seen in by_witness):
            by_witness.append(sig)
    if len(by_witness) < threshold:
        raise ThresholdError(len(by_witness), threshold)
    text = note.decode() if isinstance(note, bytes) else note
    return Receipt(text, checkpoint, by_log, tuple(by_witness), opened.unverified)


def open_game_receipt(
    note: str | bytes,
    log_keys: Iterable[Verifier],
    *,
    service: str,
    game_id: str,
    witnesses: Iterable[Verifier] = (),
    threshold: int = 0,
) -> Receipt:
    """:func:`open_checkpoint`, and the checkpoint must be ``game_id``'s at ``service``
    (:class:`CheckpointError` if it is another log's: a valid receipt for another game proves nothing
    about this one)."""
    receipt = open_checkpoint(note, log_keys, witnesses=witnesses, threshold=threshold)
    expected = game_origin(service, game_id)
    if receipt.origin != expected:
        raise CheckpointError(f"the checkpoint is of {receipt.origin!r}, not of {expected!r}")
    if receipt.checkpoint.extensions:
        raise CheckpointError("a game checkpoint has no extension lines")
    return receipt


def cosign(note: str | bytes, witness: Signer, log_keys: Iterable[Verifier]) -> str:
    """``note`` with ``witness``'s signature line added at the end, after checking that it is a
    checkpoint signed by one of ``log_keys``.

    The text and every other signature line are kept byte for byte (so the service's signature and
    other witnesses' still verify); an older signature by the same witness key is replaced. A witness
    that co-signs states that it saw this checkpoint from this log: its further checks (consistency
    with the last checkpoint it co-signed for the origin) are its own policy, before calling this.
    """
    receipt = open_checkpoint(note, log_keys)
    parsed = parse_note(receipt.note)
    signed = parsed.sign(witness)
    if signed.text != parsed.text:  # by construction; a witness must never alter what it signs
        raise CheckpointError("co-signing changed the note text")
    return signed.format()
