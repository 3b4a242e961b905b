"""Ed25519 keys for signed notes, in the encodings of the C2SP signed-note ecosystem.

A key is known by its name and its 32-bit key id, derived from the name and the public key. The text
forms are ``golang.org/x/mod/sumdb/note``'s: ``<name>+<key id>+<base64 key>`` for the verifier key, and
``PRIVATE+KEY+<name>+<key id>+<base64 seed>`` for the signer key. The only I/O here is reading and
writing key files (mode 0600) and reading one environment variable. docs/DESIGN.md ("Notes and keys").
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ALG_ED25519 = 0x01
"""The signature type byte of Ed25519 in C2SP signed-note (the only one this package signs with)."""

ED25519_KEY_SIZE = 32
ED25519_SIGNATURE_SIZE = 64
MAX_KEY_NAME = 256
"""The longest key name accepted, in UTF-8 bytes: a name is an identifier (a schema-less URL), and a
bound keeps every signature line short."""
MAX_KEY_TEXT = 1024
"""The longest key string (either form) accepted: a file or variable longer than that is not a key."""
KEY_ENV = "UNO_AUDIT_CHECKPOINT_KEY"
"""The environment variable that may hold the service's signer key (the ``PRIVATE+KEY+…`` string)."""
_PRIVATE_PREFIX = "PRIVATE+KEY+"


class KeyFormatError(ValueError):
    """A key string, key name or key file that is not well formed; the message never includes a secret."""


#: What a key name may not hold: ``+``, a Unicode space (``\s`` is ``str.isspace``), a control character, a
#: lone surrogate. (A regular expression: every reply's receipt names the key.)
_NOT_IN_NAME = re.compile("[+\\s\x00-\x1f\ud800-\udfff]")


def check_key_name(name: str) -> str:
    """``name`` if it is a valid key name, else :class:`KeyFormatError`.

    C2SP signed-note: non-empty, no Unicode space, no ``+`` (the separator of the key strings). Control
    characters are refused as well, since a signed note may not contain them at all.
    """
    if not name:
        raise KeyFormatError("a key name must not be empty")
    if len(name.encode("utf-8", "surrogatepass")) > MAX_KEY_NAME:
        raise KeyFormatError(f"a key name is at most {MAX_KEY_NAME} bytes")
    if _NOT_IN_NAME.search(name) is not None:
        raise KeyFormatError(f"a key name may not contain spaces, '+' or control characters: {name!r}")
    return name


def key_id(name: str, public_key: bytes) -> int:
    """The key id of an Ed25519 ``public_key`` (32 raw bytes) under ``name``, as a 32-bit integer."""
    if len(public_key) != ED25519_KEY_SIZE:
        raise KeyFormatError(f"an Ed25519 public key is {ED25519_KEY_SIZE} bytes, not {len(public_key)}")
    digest = hashlib.sha256(name.encode() + b"\n" + bytes([ALG_ED25519]) + public_key).digest()
    return int.from_bytes(digest[:4], "big")


def _split_key(text: str, parts: int, kind: str) -> list[str]:
    if len(text) > MAX_KEY_TEXT:
        raise KeyFormatError(f"a {kind} key is at most {MAX_KEY_TEXT} characters")
    fields = text.split("+", parts - 1)
    if len(fields) != parts:
        raise KeyFormatError(f"a {kind} key has {parts} parts separated by '+'")
    return fields


def _key_data(name: str, id_hex: str, data64: str, kind: str) -> tuple[int, bytes]:
    """The key id and the 32 key bytes of a key string's last two fields, checked."""
    check_key_name(name)
    if len(id_hex) != 8 or any(char not in "0123456789abcdefABCDEF" for char in id_hex):
        raise KeyFormatError(f"the key id of a {kind} key is 8 hexadecimal digits")
    try:
        data = base64.b64decode(data64.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise KeyFormatError(f"the key data of a {kind} key is not base64") from None
    if base64.b64encode(data).decode("ascii") != data64:  # Python would take extra padding ("==")
        raise KeyFormatError(f"the key data of a {kind} key is not in canonical base64")
    if not data or data[0] != ALG_ED25519:
        raise KeyFormatError(f"the {kind} key is not an Ed25519 key (type byte 0x01)")
    if len(data) != 1 + ED25519_KEY_SIZE:
        raise KeyFormatError(f"the {kind} key data is {len(data) - 1} bytes, not {ED25519_KEY_SIZE}")
    return int(id_hex, 16), data[1:]


@dataclass(frozen=True, slots=True)
class Verifier:
    """A public key that checks signatures: its name, key id and the 32 bytes of its Ed25519 key.

    This is what is published (``encode()``), what a player or an arbiter configures, and what must be
    kept published after a key is rotated: receipts signed by the old key verify only against it.
    """

    name: str
    key_id: int
    public_key: bytes
    _key: Ed25519PublicKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_key_name(self.name)
        if key_id(self.name, self.public_key) != self.key_id:
            raise KeyFormatError(f"the key id {self.key_id:08x} is not the id of this key and name")
        object.__setattr__(self, "_key", Ed25519PublicKey.from_public_bytes(self.public_key))

    @classmethod
    def parse(cls, text: str) -> Verifier:
        """The verifier of a ``<name>+<hex id>+<base64>`` string; :class:`KeyFormatError` if malformed,
        of another algorithm, or if the id is not the key's."""
        name, id_hex, data64 = _split_key(text.strip(), 3, "verifier")
        ident, public = _key_data(name, id_hex, data64, "verifier")
        if key_id(name, public) != ident:
            raise KeyFormatError(f"the key id {id_hex} is not the id of this key and name")
        return cls(name, ident, public)

    def encode(self) -> str:
        """The verifier key string, to publish."""
        data = base64.b64encode(bytes([ALG_ED25519]) + self.public_key).decode("ascii")
        return f"{self.name}+{self.key_id:08x}+{data}"

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` (the bytes after the key id) is this key's signature of ``message``."""
        if len(signature) != ED25519_SIGNATURE_SIZE:
            return False
        try:
            self._key.verify(signature, message)
        except InvalidSignature:
            return False
        return True


class Signer:
    """A private key that signs notes under a name. Its ``repr`` and ``str`` never show the secret."""

    __slots__ = ("_key", "key_id", "name", "verifier")

    def __init__(self, name: str, private_key: Ed25519PrivateKey) -> None:
        check_key_name(name)
        public = private_key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self.name = name
        self._key = private_key
        self.key_id = key_id(name, public)
        self.verifier = Verifier(name, self.key_id, public)

    def __repr__(self) -> str:
        return f"Signer({self.name}+{self.key_id:08x})"

    @classmethod
    def generate(cls, name: str) -> Signer:
        """A new random key under ``name`` (from the operating system's random source)."""
        return cls(name, Ed25519PrivateKey.generate())

    @classmethod
    def from_seed(cls, name: str, seed: bytes) -> Signer:
        """The key whose 32-byte Ed25519 private seed is ``seed``."""
        if len(seed) != ED25519_KEY_SIZE:
            raise KeyFormatError(f"an Ed25519 seed is {ED25519_KEY_SIZE} bytes, not {len(seed)}")
        return cls(name, Ed25519PrivateKey.from_private_bytes(seed))

    @classmethod
    def parse(cls, text: str) -> Signer:
        """The signer of a ``PRIVATE+KEY+<name>+<hex id>+<base64>`` string (surrounding whitespace, a
        file's last newline, is ignored); :class:`KeyFormatError` if malformed or if the id is not the
        id of the key the seed makes."""
        text = text.strip()
        if not text.startswith(_PRIVATE_PREFIX):
            raise KeyFormatError("a signer key starts with PRIVATE+KEY+")
        name, id_hex, data64 = _split_key(text[len(_PRIVATE_PREFIX) :], 3, "signer")
        ident, seed = _key_data(name, id_hex, data64, "signer")
        signer = cls.from_seed(name, seed)
        if signer.key_id != ident:
            raise KeyFormatError(f"the key id {id_hex} is not the id of the key this seed makes")
        return signer

    def encode(self) -> str:
        """The signer key string: a secret, for a key file or a secret store only."""
        seed = self._key.private_bytes(
            serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
        )
        data = base64.b64encode(bytes([ALG_ED25519]) + seed).decode("ascii")
        return f"{_PRIVATE_PREFIX}{self.name}+{self.key_id:08x}+{data}"

    def sign(self, message: bytes) -> bytes:
        """The Ed25519 signature of ``message`` (64 bytes, deterministic)."""
        return self._key.sign(message)


def load_signer(path: Path) -> Signer:
    """The signer key in the file at ``path``; :class:`KeyFormatError` if it cannot be read or is not
    one (the message names the file, never its content)."""
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_KEY_TEXT + 1)
    except OSError as error:
        raise KeyFormatError(f"cannot read the key file {path}: {error.strerror or error}") from None
    try:
        return Signer.parse(raw.decode("utf-8"))
    except (UnicodeDecodeError, KeyFormatError) as error:
        reason = "it is not UTF-8 text" if isinstance(error, UnicodeDecodeError) else str(error)
        raise KeyFormatError(f"the key file {path} does not hold a signer key: {reason}") from None


def signer_from_environment(
    variable: str = KEY_ENV, environ: Mapping[str, str] | None = None
) -> Signer | None:
    """The signer key in the environment variable ``variable``, ``None`` if it is unset or empty.

    For containers, where a secret arrives as a variable; a key file (:func:`load_signer`) is the
    better home where there is a choice, since a process's environment is easier to leak.
    """
    value = (os.environ if environ is None else environ).get(variable, "")
    if not value.strip():
        return None
    try:
        return Signer.parse(value)
    except KeyFormatError as error:
        raise KeyFormatError(f"${variable} does not hold a signer key: {error}") from None


def write_signer(signer: Signer, path: Path, *, force: bool = False) -> None:
    """Write ``signer``'s key string to a new file at ``path``, readable by its owner only (0600).

    An existing file is never overwritten unless ``force``: losing a signing key by accident would make
    every receipt it signed unverifiable by anyone who had not saved its public key. With ``force`` the
    new file is written beside the old one and renamed over it, so the old key is never half replaced
    and the new one is never readable by others, even for a moment.
    """
    data = (signer.encode() + "\n").encode()
    if not force:
        _write_new(path, data)
        return
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        _write_new(temporary, data)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def _write_new(path: Path, data: bytes) -> None:
    """Create ``path`` (never an existing file) with mode 0600 and ``data``; nothing is left behind if
    writing fails after the file was made."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(descriptor, 0o600)  # whatever the umask
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view) :]
        os.fsync(descriptor)
    except BaseException:
        os.close(descriptor)
        path.unlink(missing_ok=True)
        raise
    os.close(descriptor)
