"""Game and tournament checkpoints: the tlog-checkpoint body, receipts, key rotation, witnesses and
their threshold, co-signing, and a game's inclusion in its tournament."""

from __future__ import annotations

import base64
import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.checkpoints import (
    Checkpoint,
    CheckpointError,
    InvalidSignatureError,
    Note,
    NoteError,
    ProofError,
    Signature,
    Signer,
    ThresholdError,
    TournamentLeaf,
    UnverifiedNoteError,
    cosign,
    game_checkpoint,
    open_checkpoint,
    open_game_receipt,
    parse_note,
    prove_game,
    tournament_checkpoint,
    tournament_tree,
    verify_consistency,
    verify_game_in_tournament,
)
from tests.tiers import examples

SERVICE = "uno-audit.example"
SERVICE_KEY = Signer.from_seed(SERVICE, hashlib.sha256(b"service key").digest())
ROTATED_KEY = Signer.from_seed(SERVICE, hashlib.sha256(b"service key, 2027").digest())
WITNESSES = [Signer.from_seed(f"witness-{i}.example", hashlib.sha256(bytes([i])).digest()) for i in range(4)]
HEAD = hashlib.sha256(b"the hash of event 42").digest()


def receipt_note(version: int = 42, head: bytes = HEAD, game: str = "g-1") -> str:
    return game_checkpoint(SERVICE, game, version, head).sign(SERVICE_KEY)


def test_a_game_checkpoint_is_the_c2sp_body() -> None:
    checkpoint = game_checkpoint(SERVICE, "g-1", 42, HEAD)
    assert checkpoint.body() == f"{SERVICE}/game/g-1\n42\n{base64.b64encode(HEAD).decode()}\n"
    assert Checkpoint.parse(checkpoint.body()) == checkpoint
    note = checkpoint.sign(SERVICE_KEY)
    assert note.startswith(checkpoint.body() + "\n— uno-audit.example ")
    assert note.count("\n") == 5


def test_a_player_opens_a_receipt_and_an_arbiter_compares_the_head() -> None:
    receipt = open_game_receipt(receipt_note(), [SERVICE_KEY.verifier], service=SERVICE, game_id="g-1")
    assert (receipt.size, receipt.root_hash) == (42, HEAD)
    assert receipt.note == receipt_note()
    assert [sig.key for sig in receipt.log_signatures] == [(SERVICE, SERVICE_KEY.key_id)]


def test_a_receipt_of_another_game_is_refused() -> None:
    with pytest.raises(CheckpointError):
        open_game_receipt(receipt_note(game="g-2"), [SERVICE_KEY.verifier], service=SERVICE, game_id="g-1")
    with pytest.raises(CheckpointError):
        open_game_receipt(receipt_note(), [SERVICE_KEY.verifier], service="other.example", game_id="g-1")


def test_after_a_key_rotation_old_receipts_verify_against_the_old_public_key() -> None:
    old_receipt = receipt_note()
    new_receipt = game_checkpoint(SERVICE, "g-1", 43, HEAD).sign(ROTATED_KEY)
    assert ROTATED_KEY.key_id != SERVICE_KEY.key_id
    published = [SERVICE_KEY.verifier, ROTATED_KEY.verifier]
    assert open_checkpoint(old_receipt, published).size == 42
    assert open_checkpoint(new_receipt, published).size == 43
    with pytest.raises(UnverifiedNoteError):  # the old key not kept published: its receipts prove nothing
        open_checkpoint(old_receipt, [ROTATED_KEY.verifier])


def test_a_checkpoint_signed_by_a_stranger_only_is_refused() -> None:
    stranger = Signer.generate(SERVICE)  # same name, another key
    with pytest.raises(UnverifiedNoteError):
        open_checkpoint(game_checkpoint(SERVICE, "g-1", 42, HEAD).sign(stranger), [SERVICE_KEY.verifier])


def test_a_witness_alone_does_not_make_a_checkpoint_the_services() -> None:
    note = Note(game_checkpoint(SERVICE, "g-1", 42, HEAD).body()).sign(WITNESSES[0]).format()
    with pytest.raises(UnverifiedNoteError):
        open_checkpoint(note, [SERVICE_KEY.verifier], witnesses=[WITNESSES[0].verifier])


def test_changing_any_byte_of_the_body_is_refused() -> None:
    note = receipt_note()
    body_length = len(game_checkpoint(SERVICE, "g-1", 42, HEAD).body())
    for index in range(body_length):
        if note[index] == "\n":
            continue
        changed = note[:index] + chr(ord(note[index]) ^ 2) + note[index + 1 :]
        with pytest.raises((NoteError, InvalidSignatureError)):
            open_checkpoint(changed, [SERVICE_KEY.verifier])


def test_a_cosignature_keeps_the_note_and_its_signatures_byte_for_byte() -> None:
    note = receipt_note()
    once = cosign(note, WITNESSES[0], [SERVICE_KEY.verifier])
    twice = cosign(once, WITNESSES[1], [SERVICE_KEY.verifier])
    assert once.startswith(note)
    assert twice.startswith(once)
    assert parse_note(twice).text == parse_note(note).text
    receipt = open_checkpoint(twice, [SERVICE_KEY.verifier], witnesses=[w.verifier for w in WITNESSES])
    assert receipt.witnesses() == {"witness-0.example", "witness-1.example"}
    # Co-signing again with the same key replaces its line, and keeps the others where they were.
    again = cosign(twice, WITNESSES[0], [SERVICE_KEY.verifier])
    assert parse_note(again).signatures == (
        *parse_note(twice).signatures[::2],
        parse_note(once).signatures[1],
    )


def test_a_witness_will_not_cosign_what_the_service_did_not_sign() -> None:
    stranger = Signer.generate(SERVICE)
    with pytest.raises(UnverifiedNoteError):
        cosign(game_checkpoint(SERVICE, "g-1", 42, HEAD).sign(stranger), WITNESSES[0], [SERVICE_KEY.verifier])
    with pytest.raises(NoteError):
        cosign(Note("not a checkpoint\n").sign(SERVICE_KEY).format(), WITNESSES[0], [SERVICE_KEY.verifier])


@pytest.mark.parametrize(
    ("signed_by", "threshold", "met"), [(2, 2, True), (3, 2, True), (1, 2, False), (0, 1, False)]
)
def test_the_witness_threshold(signed_by: int, threshold: int, met: bool) -> None:
    note = receipt_note()
    for witness in WITNESSES[:signed_by]:
        note = cosign(note, witness, [SERVICE_KEY.verifier])
    trusted = [w.verifier for w in WITNESSES]
    if met:
        receipt = open_checkpoint(note, [SERVICE_KEY.verifier], witnesses=trusted, threshold=threshold)
        assert len(receipt.witness_signatures) == signed_by
    else:
        with pytest.raises(ThresholdError) as refused:
            open_checkpoint(note, [SERVICE_KEY.verifier], witnesses=trusted, threshold=threshold)
        assert (refused.value.found, refused.value.threshold) == (signed_by, threshold)


def test_a_witness_counts_once_whatever_it_repeats() -> None:
    note = cosign(receipt_note(), WITNESSES[0], [SERVICE_KEY.verifier])
    line = note.splitlines(keepends=True)[-1]
    repeated = note + line * 3
    trusted = [w.verifier for w in WITNESSES]
    with pytest.raises(ThresholdError):
        open_checkpoint(repeated, [SERVICE_KEY.verifier], witnesses=trusted, threshold=2)
    # Nor does a second key of the same witness (a rotation) make it two witnesses.
    second_key = Signer.from_seed("witness-0.example", hashlib.sha256(b"rotated witness").digest())
    both = parse_note(note).sign(second_key).format()
    with pytest.raises(ThresholdError):
        open_checkpoint(both, [SERVICE_KEY.verifier], witnesses=[*trusted, second_key.verifier], threshold=2)


def test_the_services_own_key_is_no_witness_and_untrusted_witnesses_do_not_count() -> None:
    note = cosign(receipt_note(), WITNESSES[0], [SERVICE_KEY.verifier])
    with pytest.raises(ThresholdError):  # witness-0 signed but is not trusted; the service is not a witness
        open_checkpoint(
            note,
            [SERVICE_KEY.verifier],
            witnesses=[SERVICE_KEY.verifier, WITNESSES[1].verifier],
            threshold=1,
        )
    receipt = open_checkpoint(note, [SERVICE_KEY.verifier], witnesses=[WITNESSES[1].verifier])
    assert [sig.name for sig in receipt.unverified] == ["witness-0.example"]
    # Nor does another key of the service's, passed as a witness (an older or a newer one).
    both = cosign(receipt_note(), ROTATED_KEY, [SERVICE_KEY.verifier])
    with pytest.raises(ThresholdError):
        open_checkpoint(both, [SERVICE_KEY.verifier], witnesses=[ROTATED_KEY.verifier], threshold=1)


def test_a_forged_witness_signature_refuses_the_note() -> None:
    note = receipt_note()
    forged = Signature(WITNESSES[0].name, WITNESSES[0].key_id, WITNESSES[1].sign(b"something else"))
    bad = Note(parse_note(note).text, (*parse_note(note).signatures, forged)).format()
    with pytest.raises(InvalidSignatureError):
        open_checkpoint(bad, [SERVICE_KEY.verifier], witnesses=[WITNESSES[0].verifier])


BAD_BODIES = {
    "two lines": "origin\n42\n",
    "a leading zero": f"origin\n042\n{base64.b64encode(HEAD).decode()}\n",
    "a sign": f"origin\n+42\n{base64.b64encode(HEAD).decode()}\n",
    "a negative size": f"origin\n-1\n{base64.b64encode(HEAD).decode()}\n",
    "a huge size": f"origin\n{2**63}\n{base64.b64encode(HEAD).decode()}\n",
    "a short hash": f"origin\n42\n{base64.b64encode(HEAD[:31]).decode()}\n",
    "hex, not base64": f"origin\n42\n{HEAD.hex()}\n",
    "an empty origin": f"\n42\n{base64.b64encode(HEAD).decode()}\n",
    "an empty extension line": f"origin\n42\n{base64.b64encode(HEAD).decode()}\n\nx\n",
    "no final newline": f"origin\n42\n{base64.b64encode(HEAD).decode()}",
}


@pytest.mark.parametrize("body", BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_malformed_checkpoint_bodies_are_refused(body: str) -> None:
    with pytest.raises(NoteError):
        Checkpoint.parse(body)


origins = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cc", "Cs")), min_size=1, max_size=80
).filter(lambda text: "\n" not in text)
extensions = st.lists(origins, max_size=3)
signature_lines = st.lists(
    st.builds(
        Signature,
        st.text(
            alphabet=st.characters(codec="utf-8", exclude_characters="+", exclude_categories=("Z", "C")),
            min_size=1,
            max_size=20,
        ),
        st.integers(0, 2**32 - 1),
        st.binary(min_size=1, max_size=80),
    ),
    max_size=8,
)


@settings(max_examples=examples(200), deadline=None)
@given(
    origin=origins,
    size=st.integers(0, 2**63 - 1),
    root=st.binary(min_size=32, max_size=32),
    extra=extensions,
    others=signature_lines,
    witness_first=st.booleans(),
)
def test_any_signed_checkpoint_round_trips_byte_for_byte(
    origin: str, size: int, root: bytes, extra: list[str], others: list[Signature], witness_first: bool
) -> None:
    checkpoint = Checkpoint(origin, size, root, tuple(extra))
    note = Note(checkpoint.body(), tuple(others)).sign(SERVICE_KEY)
    if witness_first:
        note = Note(note.text, (*note.signatures[-1:], *note.signatures[:-1]))
    text = note.format()
    assert parse_note(text) == note
    assert parse_note(text.encode()).format().encode() == text.encode()
    receipt = open_checkpoint(text, [SERVICE_KEY.verifier])
    assert receipt.checkpoint == checkpoint
    assert receipt.note == text


# Tournaments


def leaves(count: int) -> list[TournamentLeaf]:
    return [
        TournamentLeaf(f"game-{i}", 100 + i, hashlib.sha256(f"head {i}".encode()).digest())
        for i in range(count)
    ]


def test_the_leaf_encoding_is_the_documented_one() -> None:
    leaf = TournamentLeaf("g-é", 258, bytes(range(32)))
    assert leaf.encode() == b"\x00\x04g-\xc3\xa9" + (258).to_bytes(8, "big") + bytes(range(32))
    assert TournamentLeaf.decode(leaf.encode()) == leaf
    for bad in (leaf.encode()[:-1], leaf.encode() + b"\x00", b"\x00\x05" + leaf.encode()[2:], b"\x00"):
        with pytest.raises(ValueError):
            TournamentLeaf.decode(bad)


def test_a_game_counts_in_its_tournament_and_nowhere_else() -> None:
    games = leaves(11)
    note = tournament_checkpoint(SERVICE, "spring-cup", games).sign(SERVICE_KEY)
    receipt = open_checkpoint(note, [SERVICE_KEY.verifier])
    assert receipt.origin == f"{SERVICE}/tournament/spring-cup"
    assert receipt.size == 11
    for game in games:
        inclusion = prove_game(games, game.game_id)
        verify_game_in_tournament(receipt, inclusion, service=SERVICE, tournament_id="spring-cup")
    inclusion = prove_game(games, "game-7")
    with pytest.raises(CheckpointError):
        verify_game_in_tournament(receipt, inclusion, service=SERVICE, tournament_id="autumn-cup")
    altered = TournamentLeaf("game-7", 106, inclusion.leaf.head_hash)  # another version of the game
    with pytest.raises(ProofError):
        verify_game_in_tournament(
            receipt,
            type(inclusion)(altered, inclusion.index, inclusion.size, inclusion.proof),
            service=SERVICE,
            tournament_id="spring-cup",
        )
    with pytest.raises(CheckpointError):  # a proof for another size than the checkpoint's
        verify_game_in_tournament(
            receipt, prove_game(games, "game-1", 9), service=SERVICE, tournament_id="spring-cup"
        )


def test_a_later_tournament_checkpoint_extends_the_earlier_one() -> None:
    games = leaves(13)
    tree = tournament_tree(games)
    early = tournament_checkpoint(SERVICE, "spring-cup", games[:5])
    late = tournament_checkpoint(SERVICE, "spring-cup", games)
    verify_consistency(early.size, late.size, tree.consistency_proof(5), early.root_hash, late.root_hash)
    reordered = tournament_checkpoint(SERVICE, "spring-cup", [games[1], games[0], *games[2:]])
    with pytest.raises(ProofError):
        verify_consistency(early.size, 13, tree.consistency_proof(5), early.root_hash, reordered.root_hash)


def test_a_game_is_in_a_tournament_once() -> None:
    games = leaves(3)
    with pytest.raises(ValueError):
        tournament_tree([*games, TournamentLeaf("game-1", 999, HEAD)])
