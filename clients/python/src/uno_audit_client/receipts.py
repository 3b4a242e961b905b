"""Receipts: the signed checkpoint every command's reply carries, kept and checked as a player would.

A receipt is a C2SP signed note (https://c2sp.org/signed-note) whose text is a checkpoint — the origin
``<service>/game/<game id>``, the game's version, the base64 chain head — signed with the service's Ed25519
key, whose published form is ``<name>+<hex key id>+<base64 key>``. :func:`open_receipt` checks one;
:class:`ReceiptBook` keeps every receipt of a session and refuses a forged one, or two receipts that
give one version two heads (a history forked before the player's eyes).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

#: The largest signed note accepted, in bytes: the service's own bound.
MAX_NOTE_BYTES = 64 * 1024
#: The type byte of an Ed25519 key in a signed-note verifier key.
ALG_ED25519 = 0x01
SIGNATURE_PREFIX = "— "  # U+2014 EM DASH and a space start every signature line
HEAD_SIZE = 32
_SIZE = re.compile(r"0|[1-9][0-9]{0,18}")


class ReceiptError(ValueError):
    """A receipt that proves nothing: malformed, signed by no trusted key (or badly by one), another game's,
    another version's than its reply, or contradicting a receipt kept before."""


def _b64(text: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ReceiptError(f"{what} is not base64") from None
    if base64.b64encode(raw).decode("ascii") != text:  # the one encoding: a note must round-trip
        raise ReceiptError(f"{what} is not in canonical base64")
    return raw


@dataclass(frozen=True, slots=True)
class Verifier:
    """A published verifier key: its name (the service's), its 32-bit key id and its Ed25519 public key."""

    name: str
    key_id: int
    public_key: bytes
    _key: Ed25519PublicKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name or any(c == "+" or c.isspace() or ord(c) < 0x20 for c in self.name):
            raise ReceiptError(
                f"a key name is non-empty, without spaces, '+' or control characters: {self.name!r}"
            )
        if len(self.public_key) != 32:
            raise ReceiptError("an Ed25519 public key is 32 bytes")
        digest = hashlib.sha256(self.name.encode() + b"\n" + bytes([ALG_ED25519]) + self.public_key).digest()
        if int.from_bytes(digest[:4], "big") != self.key_id:
            raise ReceiptError(f"the key id {self.key_id:08x} is not the id of this key and name")
        object.__setattr__(self, "_key", Ed25519PublicKey.from_public_bytes(self.public_key))

    @classmethod
    def parse(cls, text: str) -> Verifier:
        """The key of a ``<name>+<hex key id>+<base64>`` string (``GetCheckpointKeys``' ``verifier_key``,
        or ``uno-audit keygen``'s public line); :class:`ReceiptError` if it is not one."""
        parts = text.strip().split("+", 2)  # the base64 key may hold a "+" itself
        if len(parts) != 3 or len(parts[1]) != 8:
            raise ReceiptError("a verifier key is '<name>+<8 hex digits>+<base64 key>'")
        name, id_hex, data64 = parts
        try:
            ident = int(id_hex, 16)
        except ValueError:
            raise ReceiptError("a verifier key's id is 8 hexadecimal digits") from None
        data = _b64(data64, "the verifier key's data")
        if len(data) != 33 or data[0] != ALG_ED25519:
            raise ReceiptError("the verifier key is not an Ed25519 key")
        return cls(name, ident, data[1:])

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is this key's Ed25519 signature of ``message``."""
        try:
            self._key.verify(signature, message)
        except InvalidSignature:
            return False
        return True


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """What a verified receipt states: game ``game_id`` of ``service`` had chain head ``head`` at
    ``version``."""

    service: str
    game_id: str
    version: int
    head: bytes


def open_receipt(
    note: str, keys: Iterable[Verifier], *, game_id: str, service: str | None = None
) -> Checkpoint:
    """Check ``note``: a signed note, signed by one of ``keys`` (every signature by a known key must
    verify), stating a checkpoint of ``game_id`` at ``service`` (by default, the name of the key that
    signed it: the service is named after its key). Raises :class:`ReceiptError` saying why not."""
    data = note.encode()
    if len(data) > MAX_NOTE_BYTES:
        raise ReceiptError(f"a receipt is at most {MAX_NOTE_BYTES} bytes")
    split = note.rfind("\n\n")
    if split < 0 or not note.endswith("\n"):
        raise ReceiptError("a receipt is a signed note: text, a blank line, signature lines")
    text, lines = note[: split + 1], note[split + 2 : -1].split("\n")
    known = {(key.name, key.key_id): key for key in keys}
    signers: list[str] = []
    for line in lines:
        if not line.startswith(SIGNATURE_PREFIX) or " " not in line[len(SIGNATURE_PREFIX) :]:
            raise ReceiptError("a signature line is '— <key name> <base64 signature>'")
        name, _, data64 = line[len(SIGNATURE_PREFIX) :].partition(" ")
        raw = _b64(data64, f"the signature of {name!r}")
        if len(raw) <= 4:
            raise ReceiptError(f"the signature of {name!r} is too short")
        key = known.get((name, int.from_bytes(raw[:4], "big")))
        if key is None:
            continue  # a key not trusted here (a witness, say): it proves nothing, and refutes nothing
        if not key.verify(text.encode(), raw[4:]):
            raise ReceiptError(f"invalid signature for key {name}+{key.key_id:08x}: the receipt is forged")
        signers.append(name)
    if not signers:
        raise ReceiptError("the receipt has no signature by a trusted key")
    body = text[:-1].split("\n")
    if len(body) != 3:
        raise ReceiptError("a game's receipt states an origin, a version and a head, nothing else")
    origin, size, head64 = body
    expected = f"{service or signers[0]}/game/{game_id}"
    if origin != expected:
        raise ReceiptError(f"the receipt is of {origin!r}, not of {expected!r}")
    if not _SIZE.fullmatch(size):
        raise ReceiptError(f"a receipt's version is a decimal number: {size!r}")
    head = _b64(head64, "the receipt's head")
    if len(head) != HEAD_SIZE:
        raise ReceiptError(f"a receipt's head is {HEAD_SIZE} bytes")
    return Checkpoint(service or signers[0], game_id, int(size), head)


@dataclass(frozen=True, slots=True)
class Receipt:
    """A reply's receipt as a player keeps it: for which game, which seat's command (``None`` for the
    creation), at which version, and the signed note byte for byte (what an arbiter is shown)."""

    game_id: str
    seat: int | None
    version: int
    receipt: str

    def to_json(self) -> dict[str, Any]:
        """The receipt as one line of a receipts file (``uno-audit verify --receipts`` reads them)."""
        return {"game_id": self.game_id, "seat": self.seat, "version": self.version, "receipt": self.receipt}


class ReceiptBook:
    """Every receipt a client was given, in order, each checked as it is kept when keys are known.

    A receipt is refused (:class:`ReceiptError`, and not kept) when it is not a receipt of its game signed
    by one of the trusted keys, when it names another version than the reply it came with, or when an
    earlier receipt gave the same version of the game another head: the service showed two histories.
    """

    def __init__(self, keys: Sequence[Verifier] = (), *, service: str | None = None) -> None:
        self.keys: list[Verifier] = list(keys)
        self.service = service
        self.kept: list[Receipt] = []
        self._heads: dict[tuple[str, int], bytes] = {}

    def __iter__(self) -> Iterator[Receipt]:
        return iter(self.kept)

    def __len__(self) -> int:
        return len(self.kept)

    def check(self, receipt: Receipt) -> Checkpoint:
        """Check ``receipt`` against the trusted keys and the receipts kept so far, keeping nothing."""
        if not self.keys:
            raise ReceiptError("no trusted key to check the receipt with")
        checkpoint = open_receipt(receipt.receipt, self.keys, game_id=receipt.game_id, service=self.service)
        if checkpoint.version != receipt.version:
            raise ReceiptError(
                f"the receipt is of version {checkpoint.version}, its reply of version {receipt.version}"
            )
        earlier = self._heads.get((receipt.game_id, checkpoint.version))
        if earlier is not None and earlier != checkpoint.head:
            raise ReceiptError(
                f"two receipts give version {checkpoint.version} of game {receipt.game_id} different heads: "
                "the service showed two histories"
            )
        return checkpoint

    def keep(self, receipt: Receipt, *, check: bool = True) -> Checkpoint | None:
        """Keep ``receipt``, checked first unless ``check`` is false; what it states (``None`` unchecked)."""
        checkpoint = self.check(receipt) if check else None
        if checkpoint is not None:
            self._heads[(receipt.game_id, checkpoint.version)] = checkpoint.head
        self.kept.append(receipt)
        return checkpoint

    def of(self, game_id: str) -> list[Receipt]:
        """The receipts kept for ``game_id``, in the order they came."""
        return [receipt for receipt in self.kept if receipt.game_id == game_id]

    def jsonl(self, game_id: str | None = None) -> str:
        """The receipts (of ``game_id``, or all) as a receipts file: one JSON object per line."""
        chosen = self.kept if game_id is None else self.of(game_id)
        return "".join(json.dumps(receipt.to_json()) + "\n" for receipt in chosen)
