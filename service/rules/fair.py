"""Fair dealing (digest ``fair.commit``): every shuffle and launcher press derived from a secret seed.

The algorithm is fixed and independent of the Python version (it never touches :mod:`random`): an
HMAC-SHA256 counter stream per purpose label, ``below(n)`` without modulo bias, Fisher–Yates on the
canonical deck order, and launcher presses against cumulative weights. docs/DESIGN.md ("Fair dealing")
states it step by step, with the labels the engine uses.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import struct
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

_TWO_64 = 1 << 64
_FOUR_WORDS = struct.Struct(">4Q")  # one HMAC-SHA256 block: four big-endian unsigned 64-bit words
SEED_BYTES = 32


def new_seed() -> bytes:
    """A fresh secret game seed from the operating system's CSPRNG."""
    return secrets.token_bytes(SEED_BYTES)


def commitment(seed: bytes) -> str:
    """The hex SHA-256 of ``seed``, published when the game is created."""
    return hashlib.sha256(seed).hexdigest()


class Stream:
    """The integers of one labelled HMAC-SHA256 counter stream (see the module docstring)."""

    __slots__ = ("_buffer", "_counter", "_keyed", "_label", "_next")

    def __init__(self, seed: bytes, label: str) -> None:
        # HMAC keyed once: each block copies this state, which costs half of keying HMAC again (a deal
        # shuffles 108 cards, 27 blocks).
        self._keyed = hmac.new(seed, digestmod=hashlib.sha256)
        self._label = label.encode() + b":"
        self._counter = 0
        self._buffer: tuple[int, ...] = ()
        self._next = 0

    def _next_u64(self) -> int:
        if self._next == len(self._buffer):
            mac = self._keyed.copy()
            mac.update(self._label + str(self._counter).encode())
            block = mac.digest()
            self._counter += 1
            self._buffer = _FOUR_WORDS.unpack(block)
            self._next = 0
        value = self._buffer[self._next]
        self._next += 1
        return value

    def below(self, n: int) -> int:
        """A uniform integer in ``[0, n)``, without modulo bias."""
        if n <= 0:
            raise ValueError("below() needs a positive bound")
        limit = _TWO_64 - (_TWO_64 % n)
        while True:
            value = self._next_u64()
            if value < limit:
                return value % n


def shuffled(seed: bytes, label: str, items: Sequence[T]) -> tuple[T, ...]:
    """``items`` in the order Fisher–Yates gives under the stream ``label``; index 0 is the top."""
    stream = Stream(seed, label)
    order = list(items)
    for i in range(len(order) - 1, 0, -1):
        j = stream.below(i + 1)
        order[i], order[j] = order[j], order[i]
    return tuple(order)


def launcher_count(seed: bytes, label: str, weights: Sequence[int]) -> int:
    """How many cards one launcher press fires, drawn from ``weights`` under the stream ``label``."""
    roll = Stream(seed, label).below(sum(weights))
    for count, weight in enumerate(weights):
        if roll < weight:
            return count
        roll -= weight
    raise AssertionError("unreachable: roll is below the sum of the weights")


def position(seed: bytes, label: str, size: int) -> int:
    """A uniform position in ``[0, size]`` (where a returned card goes back into a pile of ``size``)."""
    return Stream(seed, label).below(size + 1)
