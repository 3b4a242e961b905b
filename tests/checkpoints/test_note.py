"""The C2SP signed-note format: compatible with ``golang.org/x/mod/sumdb/note`` (its own known answers),
byte-for-byte round trips, and every malformed or forged note refused."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.checkpoints import (
    MAX_LINE_BYTES,
    MAX_NOTE_BYTES,
    MAX_SIGNATURES,
    InvalidSignatureError,
    KeyFormatError,
    Note,
    NoteError,
    Signature,
    Signer,
    UnverifiedNoteError,
    Verifier,
    check_key_name,
    open_note,
    parse_note,
    sign_checked,
    sign_text,
)
from tests.tiers import examples

# The known answers of golang.org/x/mod/sumdb/note (note.go's package documentation and note_test.go):
# a signer key, its verifier key, a text, and the signed note the Go package makes of them.
GO_SIGNER = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VERIFIER = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_ENOCH = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
)
GO_PETER_SIG = (
    "— PeterNeumann "
    "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)
GO_ENOCH_SIG = (
    "— EnochRoot "
    "rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n"
)
GO_NOTE = GO_TEXT + "\n" + GO_PETER_SIG


def test_signing_the_go_packages_example_gives_its_note_byte_for_byte() -> None:
    signer = Signer.parse(GO_SIGNER)
    assert (signer.name, signer.key_id) == ("PeterNeumann", 0xC74F20A3)
    assert signer.verifier == Verifier.parse(GO_VERIFIER)
    assert signer.verifier.encode() == GO_VERIFIER
    assert signer.encode() == GO_SIGNER
    assert sign_text(GO_TEXT, [signer]) == GO_NOTE


def test_the_go_packages_note_opens_with_its_verifier_and_an_unknown_signature_is_kept() -> None:
    peter, enoch = Verifier.parse(GO_VERIFIER), Verifier.parse(GO_ENOCH)
    opened = open_note(GO_NOTE + GO_ENOCH_SIG, [peter])
    assert opened.text == GO_TEXT
    assert [sig.key for sig in opened.verified] == [("PeterNeumann", 0xC74F20A3)]
    assert [sig.key for sig in opened.unverified] == [("EnochRoot", 0xAF0CFE78)]
    both = open_note((GO_NOTE + GO_ENOCH_SIG).encode(), [peter, enoch])
    assert [sig.name for sig in both.verified] == ["PeterNeumann", "EnochRoot"]
    assert both.unverified == ()
    assert parse_note(GO_NOTE + GO_ENOCH_SIG).format() == GO_NOTE + GO_ENOCH_SIG


def test_no_known_key_means_an_unverified_note() -> None:
    with pytest.raises(UnverifiedNoteError) as refused:
        open_note(GO_NOTE + GO_ENOCH_SIG, [])
    assert [sig.name for sig in refused.value.opened.unverified] == ["PeterNeumann", "EnochRoot"]


def test_repeated_signatures_count_once() -> None:
    peter = Verifier.parse(GO_VERIFIER)
    opened = open_note(GO_TEXT + "\n" + GO_PETER_SIG * 2 + GO_ENOCH_SIG * 2, [peter])
    assert len(opened.verified) == 1
    assert len(opened.unverified) == 1


@pytest.mark.parametrize(
    "mangle",
    [
        lambda key: key[:-1],  # truncated
        lambda key: key.replace("c74f20a3", "c74f20a4"),  # another key id
        lambda key: key.replace("PeterNeumann", "PeterNeuman"),  # another name, same id
        lambda key: key + "==",  # not base64 any more
        lambda key: key.replace("+", " ", 1),
        lambda key: key.replace("c74f20a3", "C74F20A"),
        lambda key: "PRIVATE+KEY+" + key,  # a public key where a private one is expected
    ],
)
def test_mangled_verifier_keys_are_refused(mangle: object) -> None:
    assert callable(mangle)
    with pytest.raises(KeyFormatError):
        Verifier.parse(mangle(GO_VERIFIER))


@pytest.mark.parametrize(
    "key",
    [  # note_test.go's: a key of the wrong length and one of an unknown algorithm, ids adjusted
        "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",
        "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
    ],
)
def test_keys_of_another_length_or_algorithm_are_refused(key: str) -> None:
    with pytest.raises(KeyFormatError):
        Verifier.parse(key)


def test_every_substring_and_every_byte_change_of_the_keys_is_refused() -> None:
    """As the Go package's own tests do: no shorter piece of a key, and no key with one character
    changed, is accepted."""
    for text, parse in ((GO_VERIFIER, Verifier.parse), (GO_SIGNER, Signer.parse)):
        for start in range(len(text)):
            for end in range(start + 1, len(text) + 1):
                if (start, end) == (0, len(text)) or not text[start:end].strip():
                    continue
                if text[start:end].strip() == text:
                    continue
                with pytest.raises(KeyFormatError):
                    parse(text[start:end])  # type: ignore[operator]
        for index in range(len(text)):
            changed = text[:index] + chr(ord(text[index]) + 1) + text[index + 1 :]
            with pytest.raises(KeyFormatError):
                parse(changed)  # type: ignore[operator]


BAD_NOTES = {
    "only the text": GO_TEXT,
    "no signature after the blank line": GO_TEXT + "\n",
    "no final newline": GO_NOTE[:-1],
    "a control character": "\x01" + GO_NOTE,
    "not UTF-8": b"\xff" + GO_NOTE.encode(),
    "a space in the key name": GO_TEXT + "\n" + GO_PETER_SIG.replace("PeterNeumann", "Peter Neumann"),
    "a plus in the key name": GO_TEXT + "\n" + GO_PETER_SIG.replace("PeterNeumann", "Peter+Neumann"),
    "a line after the signatures": GO_NOTE + "Unexpected line.\n",
    "no blank line": GO_TEXT + GO_PETER_SIG,
    "bad base64": GO_NOTE.replace("x08go/", "x08go*"),
    "base64 without its padding": GO_NOTE.replace("AM=\n", "AM\n"),
    "extra base64 padding": GO_NOTE.replace("AM=\n", "AM===\n"),
    "non-canonical base64": GO_NOTE.replace("AM=\n", "AN=\n"),
    "a key id and nothing else": GO_TEXT + "\n— PeterNeumann x08gow==\n",
    "a hyphen, not an em dash": GO_NOTE.replace("— ", "- "),
    "no space after the dash": GO_NOTE.replace("— ", "—"),
    "a carriage return": GO_NOTE.replace("\n", "\r\n"),
    "too many signatures": GO_TEXT + "\n" + GO_PETER_SIG * (MAX_SIGNATURES + 1),
    "a text line too long": "x" * (MAX_LINE_BYTES + 1) + "\n\n" + GO_PETER_SIG,
    "a signature line too long": GO_TEXT
    + "\n— PeterNeumann "
    + base64.b64encode(b"x" * MAX_LINE_BYTES).decode()
    + "\n",
    "too large": ("y" * 1000 + "\n") * (MAX_NOTE_BYTES // 1000 + 1) + "\n" + GO_PETER_SIG,
    "empty": "",
}


@pytest.mark.parametrize("message", BAD_NOTES.values(), ids=BAD_NOTES.keys())
def test_malformed_notes_are_refused(message: str | bytes) -> None:
    with pytest.raises(NoteError):
        parse_note(message)
    with pytest.raises(NoteError):
        open_note(message, [Verifier.parse(GO_VERIFIER)])


def test_sixteen_signatures_are_accepted() -> None:
    """The specification's floor: a verifier accepts at least 16 signatures."""
    peter = Verifier.parse(GO_VERIFIER)
    assert len(open_note(GO_TEXT + "\n" + GO_PETER_SIG * MAX_SIGNATURES, [peter]).verified) == 1


def test_a_forged_signature_by_a_known_key_refuses_the_whole_note() -> None:
    peter = Verifier.parse(GO_VERIFIER)
    raw = bytearray(base64.b64decode(GO_PETER_SIG.split()[-1]))
    raw[10] ^= 1
    forged = GO_TEXT + "\n— PeterNeumann " + base64.b64encode(bytes(raw)).decode() + "\n"
    with pytest.raises(InvalidSignatureError):
        open_note(forged, [peter])
    # ... even beside a good signature by the same key: a known key's bad signature is never ignored.
    with pytest.raises(InvalidSignatureError):
        open_note(GO_NOTE + forged.split("\n\n")[1], [peter])


def test_a_changed_byte_of_the_text_is_refused() -> None:
    peter = Verifier.parse(GO_VERIFIER)
    for index in range(len(GO_TEXT) - 1):
        if GO_TEXT[index] == "\n":
            continue
        changed = GO_TEXT[:index] + chr(ord(GO_TEXT[index]) ^ 1) + GO_TEXT[index + 1 :]
        with pytest.raises(InvalidSignatureError):
            open_note(changed + "\n" + GO_PETER_SIG, [peter])


def test_truncated_notes_are_refused() -> None:
    peter = Verifier.parse(GO_VERIFIER)
    data = GO_NOTE.encode()
    for end in range(len(data)):
        with pytest.raises((NoteError, InvalidSignatureError, UnverifiedNoteError)):
            open_note(data[:end], [peter])


def test_another_key_with_the_same_name_proves_nothing() -> None:
    """A note re-signed by another key named like the trusted one: its key id differs, so it is an
    unknown key's signature; and the trusted key's id with another key's signature fails to verify."""
    peter = Verifier.parse(GO_VERIFIER)
    impostor = Signer.generate("PeterNeumann")
    assert impostor.key_id != peter.key_id
    with pytest.raises(UnverifiedNoteError):
        open_note(sign_text(GO_TEXT, [impostor]), [peter])
    stolen_id = Signature("PeterNeumann", peter.key_id, impostor.sign(GO_TEXT.encode()))
    with pytest.raises(InvalidSignatureError):
        open_note(Note(GO_TEXT, (stolen_id,)).format(), [peter])


def test_two_different_keys_with_one_name_and_id_are_refused_as_ambiguous() -> None:
    peter = Verifier.parse(GO_VERIFIER)
    other = Signer.generate("PeterNeumann").verifier
    collided = object.__new__(Verifier)  # a key made to collide on the id (cheap: 2**32 tries)
    for name, value in (("name", peter.name), ("key_id", peter.key_id), ("public_key", other.public_key)):
        object.__setattr__(collided, name, value)
    object.__setattr__(collided, "_key", other._key)
    with pytest.raises(KeyFormatError):
        open_note(GO_NOTE, [peter, collided])


def test_signing_again_replaces_the_keys_earlier_signature_and_keeps_the_others() -> None:
    signer = Signer.parse(GO_SIGNER)
    stale = Signature("PeterNeumann", signer.key_id, b"stale")
    enoch = parse_note(GO_TEXT + "\n" + GO_ENOCH_SIG).signatures[0]
    signed = Note(GO_TEXT, (stale, enoch)).sign(signer)
    assert signed.format() == GO_TEXT + "\n" + GO_ENOCH_SIG + GO_PETER_SIG


def test_a_note_without_a_final_newline_cannot_be_made() -> None:
    with pytest.raises(NoteError):
        sign_text("abc", [Signer.parse(GO_SIGNER)])
    with pytest.raises(NoteError):
        Note("abc\n").format()  # no signature: not a signed note


key_names = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="+", exclude_categories=("Z", "C")),
    min_size=1,
    max_size=30,
)
text_lines = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cc", "Cs")), max_size=60
).filter(lambda line: "\n" not in line)


@settings(max_examples=examples(200), deadline=None)
@given(
    lines=st.lists(text_lines, min_size=1, max_size=8),
    signatures=st.lists(
        st.tuples(key_names, st.integers(0, 2**32 - 1), st.binary(min_size=1, max_size=100)),
        min_size=1,
        max_size=MAX_SIGNATURES,
    ),
)
def test_any_note_round_trips_byte_for_byte(
    lines: list[str], signatures: list[tuple[str, int, bytes]]
) -> None:
    note = Note("".join(line + "\n" for line in lines), tuple(Signature(*sig) for sig in signatures))
    text = note.format()
    assert parse_note(text) == note
    assert parse_note(text.encode()).format().encode() == text.encode()


@settings(max_examples=examples(200), deadline=None)
@given(lines=st.lists(text_lines, min_size=1, max_size=8), name=key_names, earlier=st.booleans())
def test_signing_a_checked_note_gives_what_signing_the_note_gives(
    lines: list[str], name: str, earlier: bool
) -> None:
    text = "".join(f"{line}\n" for line in lines)
    signer = Signer.generate(name)
    note = Note(text, (Signature("witness", 7, b"earlier"),) if earlier else ())
    assert sign_checked(note, signer) == note.sign(signer).format()


def test_a_checked_note_the_signature_makes_too_long_is_refused() -> None:
    signer = Signer.parse(GO_SIGNER)
    room = MAX_NOTE_BYTES - 1 - len(GO_PETER_SIG.encode())  # the text, the blank line, the signature
    fits = ("y" * 999 + "\n") * (room // 1000) + "z" * (room % 1000 - 1) + "\n"
    assert len(fits.encode()) == room
    assert len(sign_checked(Note(fits), signer).encode()) == MAX_NOTE_BYTES
    with pytest.raises(NoteError):
        sign_checked(Note("y" + fits), signer)
    with pytest.raises(NoteError):
        Note("y" + fits).sign(signer)


def _note_text_allowed(text: str) -> bool:
    """The rule character by character, as written before it became a regular expression."""
    return not any((ord(c) < 0x20 and c != "\n") or 0xD800 <= ord(c) <= 0xDFFF for c in text)


def _key_name_allowed(name: str) -> bool:
    return not any(c == "+" or c.isspace() or ord(c) < 0x20 or 0xD800 <= ord(c) <= 0xDFFF for c in name)


_ANY_CHARACTER = st.characters(min_codepoint=0, max_codepoint=0x10FFFF)
_EDGES = st.sampled_from(
    ["\n", "\t", "\x1f", "\x7f", "\ud800", "\udfff", "\u2028", "\u3000", "\x85", "+", " "]
)


@settings(max_examples=examples(500))
@given(st.text(_ANY_CHARACTER | _EDGES, max_size=12))
def test_a_notes_characters_are_refused_exactly_by_the_rule(middle: str) -> None:
    text = f"origin{middle}\n"
    if _note_text_allowed(text):
        assert Note(text).text == text
    else:
        with pytest.raises(NoteError, match="control character"):
            Note(text)


@settings(max_examples=examples(500))
@given(st.text(_ANY_CHARACTER | _EDGES, min_size=1, max_size=12))
def test_a_key_names_characters_are_refused_exactly_by_the_rule(name: str) -> None:
    if _key_name_allowed(name):
        assert check_key_name(name) == name
    else:
        with pytest.raises(KeyFormatError, match="spaces"):
            check_key_name(name)
