"""The service's signing key and the keys it still publishes: what signs a receipt, and what checks one.

The service signs with one key at a time (:attr:`Keyring.signer`). After a rotation the old keys' public
halves stay published (:attr:`Keyring.published`), so that every receipt a player ever got keeps
checking: a receipt names its key by id, and an arbiter needs that key's public half, not the current
one. A key is never reused under another name: the service's name in every origin is its key's name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from service.checkpoints.checkpoint import game_checkpoint
from service.checkpoints.keys import (
    KeyFormatError,
    Signer,
    Verifier,
    load_signer,
    signer_from_environment,
    write_signer,
)


@dataclass(frozen=True, slots=True)
class Keyring:
    """The current signing key and the older public keys still published (rotation)."""

    signer: Signer
    older: tuple[Verifier, ...] = ()

    @property
    def service(self) -> str:
        """The service's name: every origin it signs starts with it."""
        return self.signer.name

    @property
    def published(self) -> tuple[Verifier, ...]:
        """Every key a receipt of this service may be signed with: the current one first."""
        return (self.signer.verifier, *self.older)

    def receipt(self, game_id: str, version: int, head: bytes) -> str:
        """The signed checkpoint of ``game_id`` at ``version`` whose chain head is ``head``."""
        return game_checkpoint(self.service, game_id, version, head).sign(self.signer)


def load_keyring(key_file: Path, older: Sequence[str] = (), *, create_as: str | None = None) -> Keyring:
    """The keyring from ``$UNO_AUDIT_CHECKPOINT_KEY`` or else ``key_file``, with the ``older`` verifier
    keys still published. With ``create_as`` a missing ``key_file`` is created with a new key of that
    name (mode 0600), so a quick start signs from its first command and keeps its key across restarts.
    Raises :class:`KeyFormatError` or ``OSError``; an older key under another name is refused, since
    every receipt's origin names the service by its key's name."""
    signer = signer_from_environment()
    if signer is None:
        if not key_file.exists() and create_as is not None:
            key_file.parent.mkdir(parents=True, exist_ok=True)
            write_signer(Signer.generate(create_as), key_file)
        signer = load_signer(key_file)
    verifiers = tuple(Verifier.parse(text) for text in older)
    for verifier in verifiers:
        if verifier.name != signer.name:
            raise KeyFormatError(f"an older key is named {verifier.name!r}, the service {signer.name!r}")
    return Keyring(signer, verifiers)
