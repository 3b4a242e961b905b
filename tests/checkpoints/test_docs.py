"""docs/CHECKPOINTS.md shows notes and keys the code makes: made again here, they must be there as is."""

from __future__ import annotations

import hashlib
from pathlib import Path

from service.checkpoints import Signer, TournamentLeaf, cosign, game_checkpoint, tournament_checkpoint

DOC = Path(__file__).resolve().parents[2] / "docs" / "CHECKPOINTS.md"


def example(text: str) -> bytes:
    return hashlib.sha256(f"uno-audit documentation example {text}".encode()).digest()


def test_the_documented_examples_are_what_the_code_makes() -> None:
    doc = DOC.read_text(encoding="utf-8")
    service = Signer.from_seed("uno-audit.example.org", example("key"))
    witness = Signer.from_seed("witness.example.net", example("witness"))
    note = game_checkpoint("uno-audit.example.org", "spring-cup-table-3", 57, example("head")).sign(service)
    cosigned = cosign(note, witness, [service.verifier])
    games = [TournamentLeaf(f"spring-cup-table-{i}", 50 + i, example(f"head {i}")) for i in range(1, 5)]
    tournament = tournament_checkpoint("uno-audit.example.org", "spring-cup", games).sign(service)
    for shown in (cosigned, tournament, service.verifier.encode(), witness.verifier.encode()):
        assert f"```\n{shown}```" in doc or f"\n{shown}\n" in doc, shown
    leaf = games[2].encode().hex()  # 2-byte length, 18-byte id, 8-byte version, 32-byte head
    assert f"`{leaf[:4]} {leaf[4:10]}…{leaf[36:40]} {leaf[40:56]} {leaf[56:62]}…{leaf[-4:]}`" in doc
    named = TournamentLeaf(games[2].game_id, 53, games[2].head_hash, "classic", ("ann", "bob", "cy")).encode()
    assert named.hex() == "ff02" + leaf + "0007636c6173736963" + "03" + "0003616e6e0003626f6200026379"
    assert "ff02 0012 737072…2d33 0000000000000035 9844a8…2fd7 0007 636c6173736963 03 0003 616e6e" in doc
