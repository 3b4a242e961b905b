"""Signing keys: files readable by their owner only, never overwritten by accident, the environment
variable, and ``uno-audit keygen``."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.checkpoints import (
    KEY_ENV,
    KeyFormatError,
    Signer,
    Verifier,
    game_checkpoint,
    key_id,
    load_signer,
    open_checkpoint,
    signer_from_environment,
    write_signer,
)
from service.cli.main import main


@pytest.fixture
def open_umask() -> Iterator[None]:
    """A umask that would let everyone read a new file: the key file must be 0600 all the same."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_key_file_is_written_0600_and_read_back(tmp_path: Path, open_umask: None) -> None:
    signer = Signer.generate("uno-audit.example")
    path = tmp_path / "checkpoint.key"
    write_signer(signer, path)
    assert mode(path) == 0o600
    assert path.read_text() == signer.encode() + "\n"
    loaded = load_signer(path)
    assert loaded.verifier == signer.verifier
    assert loaded.sign(b"x") == signer.sign(b"x")


def test_a_key_file_is_not_overwritten_unless_forced(tmp_path: Path, open_umask: None) -> None:
    path = tmp_path / "checkpoint.key"
    first, second = Signer.generate("a.example"), Signer.generate("a.example")
    write_signer(first, path)
    with pytest.raises(FileExistsError):
        write_signer(second, path)
    assert load_signer(path).verifier == first.verifier
    path.chmod(0o644)
    write_signer(second, path, force=True)
    assert load_signer(path).verifier == second.verifier
    assert mode(path) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.key"]  # no temporary file left


def test_a_file_that_is_not_a_key_is_refused_without_showing_it(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.key"
    public = Signer.generate("a.example").verifier.encode()
    path.write_text(public + "\n")
    with pytest.raises(KeyFormatError) as refused:
        load_signer(path)
    assert public not in str(refused.value)
    assert str(path) in str(refused.value)
    with pytest.raises(KeyFormatError):
        load_signer(tmp_path / "missing.key")
    (tmp_path / "binary.key").write_bytes(b"\xff\xfe")
    with pytest.raises(KeyFormatError):
        load_signer(tmp_path / "binary.key")


def test_the_key_from_the_environment() -> None:
    signer = Signer.generate("uno-audit.example")
    assert signer_from_environment(environ={KEY_ENV: signer.encode()}) is not None
    loaded = signer_from_environment(environ={KEY_ENV: f"  {signer.encode()}\n"})
    assert loaded is not None and loaded.verifier == signer.verifier
    assert signer_from_environment(environ={}) is None
    assert signer_from_environment(environ={KEY_ENV: ""}) is None
    secret_looking = signer.encode()[:-4] + "AAAA"
    with pytest.raises(KeyFormatError) as refused:
        signer_from_environment(environ={KEY_ENV: secret_looking})
    assert secret_looking not in str(refused.value) and KEY_ENV in str(refused.value)


def test_a_signers_repr_keeps_the_secret() -> None:
    signer = Signer.generate("uno-audit.example")
    # PRIVATE+KEY+<name>+<key id>+<base64>: the base64 may itself hold "+", so split from the left.
    secret = signer.encode().split("+", 4)[4]
    assert len(secret) == 44
    assert secret not in repr(signer) and secret not in str(signer)


@pytest.mark.parametrize("name", ["", "two words", "a+b", "tab\tname", "x" * 257, "new\nline"])
def test_bad_key_names_are_refused(name: str) -> None:
    with pytest.raises(KeyFormatError):
        Signer.generate(name)


def test_the_key_id_is_the_specifications() -> None:
    """SHA-256(name ‖ 0x0A ‖ 0x01 ‖ public key)[:4], checked on the Go package's published key."""
    verifier = Verifier.parse("PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW")
    assert key_id("PeterNeumann", verifier.public_key) == 0xC74F20A3
    assert key_id("PeterNeumann2", verifier.public_key) != 0xC74F20A3


# uno-audit keygen


def test_keygen_writes_the_key_and_prints_the_public_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], open_umask: None
) -> None:
    path = tmp_path / "checkpoint.key"
    assert main(["keygen", "--name", "uno-audit.example", "--out", str(path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert mode(path) == 0o600
    signer = load_signer(path)
    assert printed == {
        "name": "uno-audit.example",
        "key_id": f"{signer.key_id:08x}",
        "verifier_key": signer.verifier.encode(),
        "key_file": str(path),
    }
    # The printed key is the one that verifies what the file's key signs.
    note = game_checkpoint("uno-audit.example", "g-1", 3, bytes(32)).sign(signer)
    assert open_checkpoint(note, [Verifier.parse(printed["verifier_key"])]).size == 3


def test_keygen_refuses_to_overwrite_a_key_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "checkpoint.key"
    assert main(["keygen", "--name", "a.example", "--out", str(path)]) == 0
    first = path.read_text()
    capsys.readouterr()
    assert main(["keygen", "--name", "a.example", "--out", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("uno-audit keygen: ") and "--force" in err and err.count("\n") == 1
    assert path.read_text() == first
    assert main(["keygen", "--name", "a.example", "--out", str(path), "--force"]) == 0
    assert path.read_text() != first


def test_keygen_refuses_a_bad_name_or_folder_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keygen", "--name", "two words", "--out", str(tmp_path / "k")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert not (tmp_path / "k").exists()
    assert main(["keygen", "--name", "a.example", "--out", str(tmp_path / "missing" / "k")]) == 2
    assert capsys.readouterr().err.startswith("uno-audit keygen: cannot write ")
