"""C2SP signed notes (https://c2sp.org/signed-note): a text, a blank line, one signature line per key.

The format is ``golang.org/x/mod/sumdb/note``'s, so notes open with the Go package and the other way
round. A note round-trips byte for byte (:func:`parse_note`, :meth:`Note.format`), is bounded
(:data:`MAX_NOTE_BYTES`, :data:`MAX_LINE_BYTES`, :data:`MAX_SIGNATURES`), and is a :class:`NoteError` when
malformed; :func:`open_note` lists signatures by unknown keys apart. docs/DESIGN.md ("Notes and keys").
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from service.checkpoints.keys import KeyFormatError, Signer, Verifier, check_key_name

MAX_NOTE_BYTES = 64 * 1024
"""The largest signed note accepted, in bytes (UTF-8)."""
MAX_LINE_BYTES = 4096
"""The longest line accepted (text or signature), in bytes, newline excluded."""
MAX_SIGNATURES = 16
"""The most signature lines a note may carry: the least the specification lets a verifier accept."""
SIGNATURE_PREFIX = "— "
"""What every signature line starts with: U+2014 EM DASH, then a space."""
KEY_ID_SIZE = 4


class NoteError(ValueError):
    """A note that is not well formed, or a note this package will not make (it would not round-trip)."""


class NoteVerificationError(Exception):
    """A well-formed note whose signatures do not prove what was asked of them."""


class InvalidSignatureError(NoteVerificationError):
    """A signature by a known key (name and key id) that does not verify: the whole note is refused."""

    def __init__(self, name: str, key_id: int) -> None:
        super().__init__(f"invalid signature for key {name}+{key_id:08x}")
        self.name = name
        self.key_id = key_id


class UnverifiedNoteError(NoteVerificationError):
    """A well-formed note that no known key signed; ``opened`` has its signatures, all unverified."""

    def __init__(self, opened: OpenedNote) -> None:
        super().__init__("the note has no signature by a known key")
        self.opened = opened


@dataclass(frozen=True, slots=True)
class Signature:
    """One signature line: the key's name and id, and the signature bytes that follow the id."""

    name: str
    key_id: int
    signature: bytes

    def __post_init__(self) -> None:
        try:
            check_key_name(self.name)
        except KeyFormatError as error:
            raise NoteError(f"bad signature line: {error}") from None
        if not 0 <= self.key_id < 2**32:
            raise NoteError("a key id is 32 bits")
        if not self.signature:
            raise NoteError("a signature line holds a signature after the key id")

    @property
    def key(self) -> tuple[str, int]:
        """(name, key id): what identifies the key that made the signature."""
        return self.name, self.key_id

    def line(self) -> str:
        """The signature line, newline included."""
        data = base64.b64encode(self.key_id.to_bytes(KEY_ID_SIZE, "big") + self.signature).decode("ascii")
        return f"{SIGNATURE_PREFIX}{self.name} {data}\n"


@dataclass(frozen=True, slots=True)
class Note:
    """A note: its text (ending in a newline) and its signatures, in the order of their lines.

    Building one checks it, so every :class:`Note` formats to a note that :func:`parse_note` reads back
    as the same value.
    """

    text: str
    signatures: tuple[Signature, ...] = ()

    def __post_init__(self) -> None:
        _check_text(self.text)
        if len(self.signatures) > MAX_SIGNATURES:
            raise NoteError(f"a note carries at most {MAX_SIGNATURES} signatures")
        size = len(self.text.encode()) + 1 + sum(len(sig.line().encode()) for sig in self.signatures)
        if size > MAX_NOTE_BYTES:
            raise NoteError(f"a signed note is at most {MAX_NOTE_BYTES} bytes")
        for sig in self.signatures:
            if len(sig.line().encode()) - 1 > MAX_LINE_BYTES:
                raise NoteError(f"a signature line is at most {MAX_LINE_BYTES} bytes")

    def format(self) -> str:
        """The signed note: the text, a blank line, the signature lines. A note with no signature is
        not a signed note (:class:`NoteError`)."""
        if not self.signatures:
            raise NoteError("a signed note has at least one signature")
        return self.text + "\n" + "".join(sig.line() for sig in self.signatures)

    def sign(self, *signers: Signer) -> Note:
        """This note with a signature by each of ``signers`` added after the existing ones.

        An existing signature by the same key (name and key id) as one of the signers is dropped, as
        ``golang.org/x/mod/sumdb/note.Sign`` does: a key signs a note once. Every other signature line
        and the text stay exactly as they were, so signatures already on the note still verify.
        """
        new = [Signature(s.name, s.key_id, s.sign(self.text.encode())) for s in signers]
        replaced = {sig.key for sig in new}
        kept = [sig for sig in self.signatures if sig.key not in replaced]
        return Note(self.text, (*kept, *new))


def sign_checked(note: Note, signer: Signer) -> str:
    """``note.sign(signer).format()`` for a note with no signature yet: the text, a blank line and the
    one signature line, without building and checking the note a second and third time (every reply's
    receipt is signed this way). Still :class:`NoteError` if the signature makes the note too long."""
    if note.signatures:
        return note.sign(signer).format()
    line = Signature(signer.name, signer.key_id, signer.sign(note.text.encode())).line()
    signed = f"{note.text}\n{line}"
    if len(signed.encode()) > MAX_NOTE_BYTES:
        raise NoteError(f"a signed note is at most {MAX_NOTE_BYTES} bytes")
    return signed


def _check_text(text: str) -> None:
    if not text.endswith("\n"):
        raise NoteError("a note's text ends with a newline")
    _check_characters(text)
    for line in text[:-1].split("\n"):
        if len(line.encode()) > MAX_LINE_BYTES:
            raise NoteError(f"a note's line is at most {MAX_LINE_BYTES} bytes")


#: What a note's text may not hold: a control character but the newline, or a lone surrogate.
_FORBIDDEN = re.compile("[\x00-\x09\x0b-\x1f\ud800-\udfff]")


def _check_characters(text: str) -> None:
    # One regular expression, not a loop over the characters: every reply's receipt is checked.
    found = _FORBIDDEN.search(text)
    if found is not None:
        raise NoteError(f"a note may not contain the control character U+{ord(found.group()):04X}")


def parse_note(message: bytes | str) -> Note:
    """The note ``message`` holds, signatures unchecked; :class:`NoteError` if it is not exactly a
    signed note (``Note.format`` of the result gives ``message`` back, byte for byte)."""
    if isinstance(message, str):
        try:
            data = message.encode()
        except UnicodeEncodeError:
            raise NoteError("a note is valid UTF-8 (it contains a lone surrogate)") from None
    else:
        data = bytes(message)
    if len(data) > MAX_NOTE_BYTES:
        raise NoteError(f"a signed note is at most {MAX_NOTE_BYTES} bytes")
    try:
        text_all = data.decode("utf-8")
    except UnicodeDecodeError:
        raise NoteError("a note is valid UTF-8") from None
    _check_characters(text_all)
    split = text_all.rfind("\n\n")
    if split < 0:
        raise NoteError("a signed note has a blank line before its signatures")
    text, block = text_all[: split + 1], text_all[split + 2 :]
    if not block or not block.endswith("\n"):
        raise NoteError("a signed note ends with signature lines, each ending in a newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise NoteError(f"a note carries at most {MAX_SIGNATURES} signatures")
    note = Note(text, tuple(_parse_signature(line) for line in lines))
    if note.format().encode() != data:  # cannot happen by construction; a parser bug must not pass
        raise NoteError("the note does not round-trip")
    return note


def _parse_signature(line: str) -> Signature:
    if len(line.encode()) > MAX_LINE_BYTES:
        raise NoteError(f"a signature line is at most {MAX_LINE_BYTES} bytes")
    if not line.startswith(SIGNATURE_PREFIX):
        raise NoteError("a signature line starts with an em dash and a space")
    name, space, data64 = line[len(SIGNATURE_PREFIX) :].partition(" ")
    if not space:
        raise NoteError("a signature line is '— <key name> <base64 signature>'")
    try:
        raw = base64.b64decode(data64.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise NoteError(f"the signature of {name!r} is not base64") from None
    if base64.b64encode(raw).decode("ascii") != data64:
        raise NoteError(f"the signature of {name!r} is not in canonical base64")
    if len(raw) <= KEY_ID_SIZE:
        raise NoteError(f"the signature of {name!r} is too short")
    return Signature(name, int.from_bytes(raw[:KEY_ID_SIZE], "big"), raw[KEY_ID_SIZE:])


@dataclass(frozen=True, slots=True)
class OpenedNote:
    """A note whose signatures were checked: those by known keys that verified (each key once), and
    those by keys that were not known, which prove nothing (each distinct line once)."""

    note: Note
    verified: tuple[Signature, ...]
    unverified: tuple[Signature, ...]

    @property
    def text(self) -> str:
        return self.note.text


def known_keys(verifiers: Iterable[Verifier]) -> dict[tuple[str, int], Verifier]:
    """``verifiers`` by (name, key id). Two different keys with the same name and id are refused: one
    of them would be taken for the other (the id is short on purpose, so a collision can be made)."""
    known: dict[tuple[str, int], Verifier] = {}
    for verifier in verifiers:
        key = (verifier.name, verifier.key_id)
        if key in known and known[key].public_key != verifier.public_key:
            raise KeyFormatError(f"ambiguous key {verifier.name}+{verifier.key_id:08x}: two keys have it")
        known[key] = verifier
    return known


def open_note(message: bytes | str, verifiers: Iterable[Verifier]) -> OpenedNote:
    """Parse ``message`` and check its signatures against ``verifiers``.

    As the specification says: a signature by an unknown key is kept but not verified; a signature by
    a known key (name *and* key id) must verify, else the whole note is refused
    (:class:`InvalidSignatureError`); with no verified signature at all, :class:`UnverifiedNoteError`.
    Malformed notes are :class:`NoteError`.
    """
    note = parse_note(message)
    known = known_keys(verifiers)
    message_bytes = note.text.encode()
    verified: list[Signature] = []
    unverified: list[Signature] = []
    for sig in note.signatures:
        verifier = known.get(sig.key)
        if verifier is None:
            if sig not in unverified:
                unverified.append(sig)
            continue
        if not verifier.verify(message_bytes, sig.signature):
            raise InvalidSignatureError(sig.name, sig.key_id)
        if all(sig.key != seen.key for seen in verified):
            verified.append(sig)
    opened = OpenedNote(note, tuple(verified), tuple(unverified))
    if not verified:
        raise UnverifiedNoteError(opened)
    return opened


def sign_text(text: str, signers: Sequence[Signer]) -> str:
    """The signed note of ``text`` (ending in a newline) signed by each of ``signers``, in order."""
    if not signers:
        raise NoteError("a signed note has at least one signature")
    return Note(text).sign(*signers).format()
