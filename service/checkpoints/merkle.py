"""RFC 6962 / RFC 9162 Merkle trees: tree heads, inclusion proofs and consistency proofs.

The hashing is exactly the RFC's, with SHA-256, so any Certificate Transparency library can check a proof.
Proofs are generated and verified as RFC 9162 §2.1.3 and §2.1.4 define them; :class:`ProofError` says
which check failed. A proof binds a leaf to a size and head taken together: take both from one verified
checkpoint. docs/DESIGN.md ("Merkle trees and tournaments") says why.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()
"""The head of the tree with no leaves."""
MAX_TREE_SIZE = 2**63 - 1
"""The largest tree size a proof is checked for (a checkpoint's size fits in a signed 64-bit integer)."""
MAX_PROOF_HASHES = 2 * 64
"""No valid proof for a tree of at most :data:`MAX_TREE_SIZE` leaves has more hashes than this."""


class ProofError(ValueError):
    """A proof that does not prove what it was checked for; the message says which check failed."""


def leaf_hash(leaf: bytes) -> bytes:
    """``SHA-256(0x00 ‖ leaf)``."""
    return hashlib.sha256(b"\x00" + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """``SHA-256(0x01 ‖ left ‖ right)``."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def split_point(n: int) -> int:
    """The largest power of two smaller than ``n`` (``n > 1``): where RFC 6962 splits a tree."""
    if n < 2:
        raise ValueError("only a tree of two or more leaves splits")
    return 1 << ((n - 1).bit_length() - 1)


class MerkleTree:
    """The leaves of a tree, by their leaf hashes, with its heads and proofs for every size up to
    :attr:`size` (a tree of ``n`` leaves holds every smaller tree as its prefix)."""

    __slots__ = ("_cache", "_hashes")

    def __init__(self, leaves: Iterable[bytes] = ()) -> None:
        self._hashes: list[bytes] = [leaf_hash(leaf) for leaf in leaves]
        self._cache: dict[tuple[int, int], bytes] = {}

    @classmethod
    def from_leaf_hashes(cls, hashes: Iterable[bytes]) -> MerkleTree:
        """A tree whose leaves are already hashed (each :func:`leaf_hash` of its leaf)."""
        tree = cls()
        for value in hashes:
            if len(value) != HASH_SIZE:
                raise ValueError(f"a leaf hash is {HASH_SIZE} bytes")
            tree._hashes.append(bytes(value))
        return tree

    @property
    def size(self) -> int:
        return len(self._hashes)

    def append(self, leaf: bytes) -> int:
        """Add ``leaf`` at the end; its index."""
        self._hashes.append(leaf_hash(leaf))
        return len(self._hashes) - 1

    def leaf_hash(self, index: int) -> bytes:
        return self._hashes[index]

    def _size(self, size: int | None) -> int:
        if size is None:
            return self.size
        if not 0 <= size <= self.size:
            raise ValueError(f"the tree has {self.size} leaves, not {size}")
        return size

    def _mth(self, start: int, end: int) -> bytes:
        """MTH(D[start:end]) for ``start < end``."""
        if end - start == 1:
            return self._hashes[start]
        cached = self._cache.get((start, end))
        if cached is None:
            k = split_point(end - start)
            cached = node_hash(self._mth(start, start + k), self._mth(start + k, end))
            self._cache[(start, end)] = cached
        return cached

    def root(self, size: int | None = None) -> bytes:
        """The tree head of the first ``size`` leaves (all of them by default)."""
        size = self._size(size)
        return EMPTY_ROOT if size == 0 else self._mth(0, size)

    def inclusion_proof(self, index: int, size: int | None = None) -> tuple[bytes, ...]:
        """PATH(index, D[size]), RFC 9162 §2.1.3.1: the hashes that take leaf ``index`` to the head of
        the tree of ``size`` leaves, from the bottom up."""
        size = self._size(size)
        if not 0 <= index < size:
            raise ValueError(f"leaf {index} is not in a tree of {size} leaves")
        path: list[bytes] = []
        start, end = 0, size
        while end - start > 1:  # PATH, unrolled from the root down; the hashes are then reversed
            k = split_point(end - start)
            if index < start + k:
                path.append(self._mth(start + k, end))
                end = start + k
            else:
                path.append(self._mth(start, start + k))
                start += k
        return tuple(reversed(path))

    def consistency_proof(self, old_size: int, size: int | None = None) -> tuple[bytes, ...]:
        """PROOF(old_size, D[size]), RFC 9162 §2.1.4.1; empty when ``old_size`` is 0 or ``size`` (the
        cases with nothing to prove)."""
        size = self._size(size)
        if not 0 <= old_size <= size:
            raise ValueError(f"a tree of {old_size} leaves is not a prefix of one of {size}")
        if old_size in (0, size):
            return ()
        return tuple(self._subproof(old_size, 0, size, True))

    def _subproof(self, m: int, start: int, end: int, complete: bool) -> list[bytes]:
        """SUBPROOF(m, D[start:end], complete)."""
        n = end - start
        if m == n:
            return [] if complete else [self._mth(start, end)]
        k = split_point(n)
        if m <= k:
            return [*self._subproof(m, start, start + k, complete), self._mth(start + k, end)]
        return [*self._subproof(m - k, start + k, end, False), self._mth(start, start + k)]


def _check_hash(value: bytes, what: str) -> None:
    if len(value) != HASH_SIZE:
        raise ProofError(f"{what} is {len(value)} bytes, not {HASH_SIZE}")


def _check_proof(proof: Sequence[bytes]) -> None:
    if len(proof) > MAX_PROOF_HASHES:
        raise ProofError(f"a proof has at most {MAX_PROOF_HASHES} hashes")
    for index, value in enumerate(proof):
        _check_hash(value, f"proof hash {index}")


def verify_inclusion(leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes) -> None:
    """Check that the leaf whose leaf hash is ``leaf`` is leaf ``index`` of the tree of ``size`` leaves
    with head ``root``; :class:`ProofError` if the proof does not show it (RFC 9162 §2.1.3.2)."""
    _check_hash(leaf, "the leaf hash")
    _check_hash(root, "the root hash")
    _check_proof(proof)
    if not 0 <= size <= MAX_TREE_SIZE:
        raise ProofError(f"a tree size is between 0 and {MAX_TREE_SIZE}")
    # 1. Compare leaf_index from tree_size. If leaf_index >= tree_size, fail.
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of {size} leaves")
    # 2. Set fn to leaf_index and sn to tree_size - 1.
    fn, sn = index, size - 1
    # 3. Set r to hash.
    r = leaf
    # 4. For each value p in the inclusion_path array:
    for p in proof:
        # a. If sn is 0, then stop the iteration and fail the proof verification.
        if sn == 0:
            raise ProofError("the inclusion proof has more hashes than the tree is high")
        # b. If LSB(fn) is set, or if fn is equal to sn, then:
        if fn & 1 or fn == sn:
            # i. Set r to HASH(0x01 || p || r).
            r = node_hash(p, r)
            # ii. If LSB(fn) is not set, then right-shift both fn and sn equally until either LSB(fn)
            # is set or fn is 0.
            if not fn & 1:
                while not (fn & 1 or fn == 0):
                    fn >>= 1
                    sn >>= 1
        # Otherwise: i. Set r to HASH(0x01 || r || p).
        else:
            r = node_hash(r, p)
        # c. Finally, right-shift both fn and sn one time.
        fn >>= 1
        sn >>= 1
    # 5. Compare sn to 0. Compare r against the root_hash. If sn is equal to 0 and r and the root_hash
    # are equal, then the log has proven the inclusion of hash. Otherwise, fail.
    if sn != 0:
        raise ProofError("the inclusion proof has fewer hashes than the tree is high")
    if r != root:
        raise ProofError("the inclusion proof leads to another root")


def verify_consistency(
    old_size: int, size: int, proof: Sequence[bytes], old_root: bytes, root: bytes
) -> None:
    """Check that the tree of ``old_size`` leaves with head ``old_root`` is the prefix of the tree of
    ``size`` leaves with head ``root``; :class:`ProofError` if the proof does not show it (RFC 9162
    §2.1.4.2).

    The two cases the RFC's algorithm leaves out have nothing to prove and take an empty proof: equal
    sizes (the heads must be equal) and an empty old tree (its head must be the empty tree's).
    """
    _check_hash(old_root, "the old root hash")
    _check_hash(root, "the root hash")
    _check_proof(proof)
    if not 0 <= old_size <= size <= MAX_TREE_SIZE:
        raise ProofError(f"0 <= old size ({old_size}) <= size ({size}) <= {MAX_TREE_SIZE} does not hold")
    if old_size == size or old_size == 0:
        if proof:
            raise ProofError("nothing to prove between these sizes: the proof must be empty")
        if old_size == size and old_root != root:
            raise ProofError("two trees of the same size with different heads")
        if old_size == 0 and old_root != EMPTY_ROOT:
            raise ProofError("the old root is not the head of the empty tree")
        return
    first, second = old_size, size
    # 1. If consistency_path is an empty array, stop and fail the proof verification.
    if not proof:
        raise ProofError("the consistency proof is empty")
    path = list(proof)
    # 2. If first is an exact power of 2, then prepend first_hash to the consistency_path array.
    if first & (first - 1) == 0:
        path.insert(0, old_root)
    # 3. Set fn to first - 1 and sn to second - 1.
    fn, sn = first - 1, second - 1
    # 4. If LSB(fn) is set, then right-shift both fn and sn equally until LSB(fn) is not set.
    while fn & 1:
        fn >>= 1
        sn >>= 1
    # 5. Set both fr and sr to the first value in the consistency_path array.
    fr = sr = path[0]
    # 6. For each subsequent value c in the consistency_path array:
    for c in path[1:]:
        # a. If sn is 0, then stop the iteration and fail the proof verification.
        if sn == 0:
            raise ProofError("the consistency proof has more hashes than the tree is high")
        # b. If LSB(fn) is set, or if fn is equal to sn, then:
        if fn & 1 or fn == sn:
            # i. Set fr to HASH(0x01 || c || fr).  ii. Set sr to HASH(0x01 || c || sr).
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            # iii. If LSB(fn) is not set, then right-shift both fn and sn equally until either LSB(fn)
            # is set or fn is 0.
            if not fn & 1:
                while not (fn & 1 or fn == 0):
                    fn >>= 1
                    sn >>= 1
        # Otherwise: i. Set sr to HASH(0x01 || sr || c).
        else:
            sr = node_hash(sr, c)
        # c. Finally, right-shift both fn and sn one time.
        fn >>= 1
        sn >>= 1
    # 7. Verify that the fr calculated is equal to the first_hash supplied, that the sr calculated is
    # equal to the second_hash supplied, and that sn is 0.
    if sn != 0:
        raise ProofError("the consistency proof has fewer hashes than the tree is high")
    if fr != old_root:
        raise ProofError("the consistency proof leads to another old root")
    if sr != root:
        raise ProofError("the consistency proof leads to another root")
