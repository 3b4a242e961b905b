"""RFC 6962 / RFC 9162 Merkle trees: the published known answers, a direct recursive definition written
here apart from the code, every proof up to 64 leaves, and tampered proofs refused."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.checkpoints import (
    EMPTY_ROOT,
    MerkleTree,
    ProofError,
    leaf_hash,
    verify_consistency,
    verify_inclusion,
)
from tests.tiers import examples

# The Certificate Transparency test vectors (transparency-dev/merkle testonly/constants.go and
# proof/verify_test.go): eight leaves, the root of every prefix, and some proofs.
CT_LEAVES = [
    bytes.fromhex(h)
    for h in [
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    ]
]
CT_ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
CT_INCLUSION = [  # (leaf index, tree size, proof)
    (0, 8, ["96a296d2", "5f083f0a", "6b47aaf2"]),
    (5, 8, ["bc1a0643", "ca854ea1", "d37ee418"]),
    (2, 3, ["fac54203"]),
    (1, 5, ["6e340b9c", "5f083f0a", "bc1a0643"]),
]
CT_CONSISTENCY = [  # (old size, size, proof)
    (1, 8, ["96a296d2", "5f083f0a", "6b47aaf2"]),
    (6, 8, ["0ebc5d34", "ca854ea1", "d37ee418"]),
    (2, 5, ["5f083f0a", "bc1a0643"]),
    (6, 7, ["0ebc5d34", "b08693ec", "d37ee418"]),
]


def test_the_published_tree_heads() -> None:
    tree = MerkleTree(CT_LEAVES)
    assert [tree.root(size).hex() for size in range(9)] == CT_ROOTS
    assert EMPTY_ROOT.hex() == CT_ROOTS[0]
    # ... and the Go checksum database's leaf hash of "hello world" (sumdb/tlog/note_test.go).
    assert leaf_hash(b"hello world") == base64.b64decode("TszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=")


@pytest.mark.parametrize(("index", "size", "proof"), CT_INCLUSION)
def test_the_published_inclusion_proofs(index: int, size: int, proof: list[str]) -> None:
    tree = MerkleTree(CT_LEAVES)
    made = tree.inclusion_proof(index, size)
    assert [value.hex()[:8] for value in made] == proof
    verify_inclusion(leaf_hash(CT_LEAVES[index]), index, size, made, bytes.fromhex(CT_ROOTS[size]))


@pytest.mark.parametrize(("old", "size", "proof"), CT_CONSISTENCY)
def test_the_published_consistency_proofs(old: int, size: int, proof: list[str]) -> None:
    tree = MerkleTree(CT_LEAVES)
    made = tree.consistency_proof(old, size)
    assert [value.hex()[:8] for value in made] == proof
    verify_consistency(old, size, made, bytes.fromhex(CT_ROOTS[old]), bytes.fromhex(CT_ROOTS[size]))


# RFC 6962 §2.1, written here straight from the text, recursion and slices, as the reference.
def _h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _k(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(leaves: Sequence[bytes]) -> bytes:
    if not leaves:
        return _h(b"")
    if len(leaves) == 1:
        return _h(b"\x00" + leaves[0])
    k = _k(len(leaves))
    return _h(b"\x01" + mth(leaves[:k]) + mth(leaves[k:]))


def path(m: int, leaves: Sequence[bytes]) -> list[bytes]:
    if len(leaves) == 1:
        return []
    k = _k(len(leaves))
    if m < k:
        return [*path(m, leaves[:k]), mth(leaves[k:])]
    return [*path(m - k, leaves[k:]), mth(leaves[:k])]


def subproof(m: int, leaves: Sequence[bytes], b: bool) -> list[bytes]:
    n = len(leaves)
    if m == n:
        return [] if b else [mth(leaves)]
    k = _k(n)
    if m <= k:
        return [*subproof(m, leaves[:k], b), mth(leaves[k:])]
    return [*subproof(m - k, leaves[k:], False), mth(leaves[:k])]


LEAVES = [f"game-{i}".encode() for i in range(64)]
TREE = MerkleTree([*LEAVES, *(f"more-{i}".encode() for i in range(66))])


def test_every_tree_head_and_proof_up_to_64_leaves_is_the_rfcs() -> None:
    for n in range(65):
        assert TREE.root(n) == mth(LEAVES[:n])
        for m in range(n):
            assert list(TREE.inclusion_proof(m, n)) == path(m, LEAVES[:n])
        for m in range(1, n):
            assert list(TREE.consistency_proof(m, n)) == subproof(m, LEAVES[:n], True)


def test_every_proof_up_to_64_leaves_verifies() -> None:
    for n in range(65):
        root = TREE.root(n)
        for m in range(n):
            verify_inclusion(TREE.leaf_hash(m), m, n, TREE.inclusion_proof(m, n), root)
        for m in range(n + 1):
            verify_consistency(m, n, TREE.consistency_proof(m, n), TREE.root(m), root)


def _flip(value: bytes, bit: int) -> bytes:
    changed = bytearray(value)
    changed[bit // 8 % len(changed)] ^= 1 << (bit % 8)
    return bytes(changed)


sizes = st.integers(1, 64).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1)))


@settings(max_examples=examples(300), deadline=None)
@given(sizes, st.data())
def test_a_tampered_inclusion_proof_fails(size_index: tuple[int, int], data: st.DataObject) -> None:
    n, m = size_index
    proof, root, leaf = list(TREE.inclusion_proof(m, n)), TREE.root(n), TREE.leaf_hash(m)
    tampering = data.draw(st.sampled_from(["hash", "index", "size", "root", "leaf", "drop", "extra"]))
    bit = data.draw(st.integers(0, 255))
    if tampering == "hash":
        if not proof:
            return
        at = data.draw(st.integers(0, len(proof) - 1))
        proof[at] = _flip(proof[at], bit)
    elif tampering == "index":
        other = data.draw(st.integers(-1, n).filter(lambda i: i != m))
        with pytest.raises(ProofError):
            verify_inclusion(leaf, other, n, proof, root)
        return
    elif tampering == "size":  # another checkpoint's: its size with its root (test_a_size_alone_...)
        other = data.draw(st.integers(0, 2 * n + 1).filter(lambda s: s != n))
        with pytest.raises(ProofError):
            verify_inclusion(leaf, m, other, proof, TREE.root(other) if other <= TREE.size else root)
        return
    elif tampering == "root":
        root = _flip(root, bit)
    elif tampering == "leaf":
        leaf = _flip(leaf, bit)
    elif tampering == "drop":
        if not proof:
            return
        del proof[data.draw(st.integers(0, len(proof) - 1))]
    else:
        proof.insert(data.draw(st.integers(0, len(proof))), data.draw(st.binary(min_size=32, max_size=32)))
    with pytest.raises(ProofError):
        verify_inclusion(leaf, m, n, proof, root)


def test_an_inclusion_proof_for_another_index_or_checkpoint_always_fails() -> None:
    """Exhaustively, not by sampling, up to 32 leaves: a proof verifies for no other index of the same
    tree, and for no other checkpoint (size and root together) of the same log."""
    for n in range(1, 33):
        root = TREE.root(n)
        for m in range(n):
            proof = TREE.inclusion_proof(m, n)
            for other in range(-1, n + 2):
                if other != m:
                    with pytest.raises(ProofError):
                        verify_inclusion(TREE.leaf_hash(m), other, n, proof, root)
            for other in range(TREE.size + 1):
                if other != n:
                    with pytest.raises(ProofError):
                        verify_inclusion(TREE.leaf_hash(m), m, other, proof, TREE.root(other))


def test_a_size_alone_is_not_what_an_inclusion_proof_binds() -> None:
    """Why the checks above change a size together with its root: leaf 0's proof in the tree of 4
    also passes for a claimed size of 3 with the same root (the verifier cannot tell a leaf hash from
    a node hash it is given). A proof is checked against a signed checkpoint's size and root, which
    the signature binds together; verify_inclusion is never to be given a size from elsewhere."""
    verify_inclusion(TREE.leaf_hash(0), 0, 3, TREE.inclusion_proof(0, 4), TREE.root(4))


pairs = st.integers(2, 64).flatmap(lambda n: st.tuples(st.integers(1, n - 1), st.just(n)))


@settings(max_examples=examples(300), deadline=None)
@given(pairs, st.data())
def test_a_tampered_consistency_proof_fails(sizes_: tuple[int, int], data: st.DataObject) -> None:
    m, n = sizes_
    proof, old, new = list(TREE.consistency_proof(m, n)), TREE.root(m), TREE.root(n)
    tampering = data.draw(
        st.sampled_from(["hash", "old", "new", "roots", "old size", "size", "drop", "extra"])
    )
    bit = data.draw(st.integers(0, 255))
    old_size, size = m, n
    if tampering == "hash":
        at = data.draw(st.integers(0, len(proof) - 1))
        proof[at] = _flip(proof[at], bit)
    elif tampering == "old":
        old = _flip(old, bit)
    elif tampering == "new":
        new = _flip(new, bit)
    elif tampering == "roots":
        old, new = new, old
    elif tampering == "old size":
        old_size = data.draw(st.integers(0, n).filter(lambda s: s != m))
    elif tampering == "size":  # another checkpoint's, its size with its root
        size = data.draw(st.integers(m, 2 * n + 1).filter(lambda s: s != n))
        new = TREE.root(size) if size <= TREE.size else new
    elif tampering == "drop":
        del proof[data.draw(st.integers(0, len(proof) - 1))]
    else:
        proof.insert(data.draw(st.integers(0, len(proof))), data.draw(st.binary(min_size=32, max_size=32)))
    with pytest.raises(ProofError):
        verify_consistency(old_size, size, proof, old, new)


def test_the_cases_with_nothing_to_prove() -> None:
    root = TREE.root(5)
    verify_consistency(5, 5, [], root, root)
    verify_consistency(0, 5, [], EMPTY_ROOT, root)
    verify_consistency(0, 0, [], EMPTY_ROOT, EMPTY_ROOT)
    with pytest.raises(ProofError):
        verify_consistency(5, 5, [], root, TREE.root(4))  # same size, two heads: a fork
    with pytest.raises(ProofError):
        verify_consistency(5, 5, [root], root, root)
    with pytest.raises(ProofError):
        verify_consistency(0, 5, [], root, root)
    with pytest.raises(ProofError):
        verify_consistency(3, 5, [], TREE.root(3), root)  # RFC step 1: an empty proof fails
    with pytest.raises(ProofError):
        verify_consistency(5, 3, TREE.consistency_proof(3, 5), root, TREE.root(3))  # back in time
    with pytest.raises(ProofError):
        verify_inclusion(TREE.leaf_hash(0), 0, 0, [], EMPTY_ROOT)
    verify_inclusion(TREE.leaf_hash(0), 0, 1, [], TREE.root(1))


def test_hashes_of_the_wrong_length_and_overlong_proofs_are_refused() -> None:
    root = TREE.root(8)
    proof = list(TREE.inclusion_proof(3, 8))
    with pytest.raises(ProofError):
        verify_inclusion(TREE.leaf_hash(3)[:31], 3, 8, proof, root)
    with pytest.raises(ProofError):
        verify_inclusion(TREE.leaf_hash(3), 3, 8, [*proof[:-1], proof[-1] + b"\x00"], root)
    with pytest.raises(ProofError):
        verify_inclusion(TREE.leaf_hash(3), 3, 8, proof * 100, root)
