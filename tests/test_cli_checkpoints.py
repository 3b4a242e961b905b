"""Signed checkpoints on the command line, against a real PostgreSQL: a player's receipts catch a rewrite
that recomputed the whole chain; tournament checkpoints, inclusion and consistency proofs are checked
from the published checkpoints alone and fail when tampered; a witness's co-signature meets a threshold;
``checkpoint`` with no key named signs with the one ``serve`` keeps in its data folder, or says how to
get one (exit 2).

Receipts are made here as the service makes them (the signed head of each stored version); the rewrite
is a superuser's, with the rows' hashes recomputed so the chain check alone sees nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from service.checkpoints import KEY_ENV, Signer, game_checkpoint, open_checkpoint, write_signer
from service.checkpoints.keyring import load_keyring
from service.play.simulate import play_game
from service.rules.options import Variant
from service.store import EventStore
from tests.projections.projection_support import store_game
from tests.rewrite import marked_at, rewrite_recomputing_chain
from tests.test_cli_audit import cli

pytestmark = pytest.mark.postgres

SERVICE = "uno-audit.test"


@pytest.fixture
def service_key(tmp_path: Path) -> tuple[Signer, Path]:
    signer = Signer.generate(SERVICE)
    path = tmp_path / "service.key"
    write_signer(signer, path)
    return signer, path


async def _game(store: EventStore, game_id: str, seed: int, tournament: str = "cup") -> None:
    await store_game(store, game_id, play_game(Variant.CLASSIC, 3, seed), tournament_id=tournament)


async def _receipts(store: EventStore, game_id: str, signer: Signer, path: Path) -> int:
    rows = await store.read_stream(game_id)
    lines = [
        json.dumps(
            {
                "version": row.version,
                "receipt": game_checkpoint(SERVICE, game_id, row.version, row.hash).sign(signer),
            }
        )
        for row in rows
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(rows)


async def test_receipts_catch_a_rewrite_with_a_recomputed_chain(
    capsys: pytest.CaptureFixture[str],
    store: EventStore,
    database_url: str,
    service_key: tuple[Signer, Path],
    tmp_path: Path,
) -> None:
    signer, _ = service_key
    await _game(store, "g-receipts", seed=3)
    receipts = tmp_path / "receipts.jsonl"
    count = await _receipts(store, "g-receipts", signer, receipts)
    base = ["verify", "--game", "g-receipts", "--json", "--no-projections", "--database-url", database_url]
    keyed = [*base, "--receipts", str(receipts), "--key", signer.verifier.encode()]

    code, out, err = await cli(capsys, *keyed)
    assert code == 0, err
    assert {check["verdict"] for check in json.loads(out)["receipts"]} == {"matches"}

    at = count // 2
    await rewrite_recomputing_chain(
        database_url,
        "g-receipts",
        marked_at(at),
    )
    code, out, _ = await cli(capsys, *base)
    chain = json.loads(out)["chain"]
    assert chain["valid"] and not chain["findings"]  # the chain alone cannot tell

    code, out, _ = await cli(capsys, *keyed)
    report = json.loads(out)
    assert code == 1 and report["valid"] is False
    verdicts = [(check["version"], check["verdict"]) for check in report["receipts"]]
    assert verdicts == [(v, "matches" if v < at else "rewritten") for v in range(1, count + 1)]

    other = Signer.generate(SERVICE)  # the receipts are not signed by this key: all refused
    code, out, _ = await cli(capsys, *base, "--receipts", str(receipts), "--key", other.verifier.encode())
    assert code == 1 and {c["verdict"] for c in json.loads(out)["receipts"]} == {"refused"}


async def test_the_text_report_sums_up_the_receipts_in_one_line_and_each_on_demand(
    capsys: pytest.CaptureFixture[str],
    store: EventStore,
    database_url: str,
    service_key: tuple[Signer, Path],
    tmp_path: Path,
) -> None:
    signer, _ = service_key
    await _game(store, "g-summary", seed=5)
    receipts = tmp_path / "receipts.jsonl"
    count = await _receipts(store, "g-summary", signer, receipts)
    text = ["verify", "--game", "g-summary", "--no-projections", "--database-url", database_url]
    keyed = [*text, "--receipts", str(receipts), "--key", signer.verifier.encode()]

    code, out, _ = await cli(capsys, *keyed)
    assert code == 0
    assert f"  {count:,} receipts: all match" in out.splitlines()
    assert "receipt 1 (version 1)" not in out  # one line, not one per receipt

    at = count // 2
    await rewrite_recomputing_chain(database_url, "g-summary", marked_at(at))
    code, out, _ = await cli(capsys, *keyed)
    lines = out.splitlines()
    assert code == 1 and lines[0].startswith("game g-summary: INVALID")
    summary = (
        f"  {count:,} receipts: {at - 1:,} match; first rewritten at version {at:,}; {count - at:,} after it"
    )
    assert summary in lines
    assert not [line for line in lines if line.startswith("  receipt ")]

    code, out, _ = await cli(capsys, *keyed, "--each")
    lines = out.splitlines()
    each = [line for line in lines if line.startswith("  receipt ")]
    assert lines.index(summary) < lines.index(each[0])
    assert len(each) == count
    assert each[0] == "  receipt 1 (version 1): MATCHES: version 1 is the history signed"
    assert each[at - 1].startswith(f"  receipt {at} (version {at}): REWRITTEN: ")

    code, _, err = await cli(capsys, *text, "--each")
    assert code == 2 and "--each goes with --receipts" in err


def test_the_receipts_line_counts_every_verdict() -> None:
    from service.audit.render import receipts_line
    from service.checkpoints.receipts import MATCHES, MISSING, REFUSED, REWRITTEN, ReceiptCheck

    def checks(*verdicts: tuple[int | None, str]) -> list[ReceiptCheck]:
        return [ReceiptCheck(i, version, verdict, "") for i, (version, verdict) in enumerate(verdicts)]

    assert receipts_line([]) == "0 receipts: nothing to check"
    assert receipts_line(checks((1, MATCHES))) == "1 receipt: all match"
    assert receipts_line(checks(*[(v, MATCHES) for v in range(1, 1201)])) == "1,200 receipts: all match"
    assert receipts_line(
        checks((1, MATCHES), (3, REWRITTEN), (2, REWRITTEN), (9, MISSING), (None, REFUSED))
    ) == (
        "5 receipts: 1 match; first rewritten at version 2; 1 after it; 1 missing (their versions are past "
        "the log's end); 1 refused (not this game's, or not signed by a key given)"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--receipts", "missing.jsonl", "--key", "K"], "--key"),
        (["--receipts", "{tmp}/bad.jsonl"], "--key"),
    ],
)
async def test_receipts_need_a_key_and_a_readable_file(
    capsys: pytest.CaptureFixture[str],
    store: EventStore,
    database_url: str,
    tmp_path: Path,
    argv: list[str],
    message: str,
) -> None:
    await _game(store, "g-bad", seed=4)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, _, err = await cli(capsys, "verify", "--game", "g-bad", "--database-url", database_url, *argv)
    assert code == 2 and message in err


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


async def test_tournament_checkpoints_and_proofs_check_from_the_checkpoint_alone(
    capsys: pytest.CaptureFixture[str],
    store: EventStore,
    database_url: str,
    service_key: tuple[Signer, Path],
    tmp_path: Path,
) -> None:
    signer, key_file = service_key
    vkey = signer.verifier.encode()
    db = ["--database-url", database_url]
    for i in range(2):
        await _game(store, f"g{i}", seed=10 + i)
    await _game(store, "elsewhere", seed=20, tournament="other")

    async def checkpoint() -> dict[str, Any]:
        code, out, err = await cli(
            capsys, "checkpoint", "--tournament", "cup", "--key-file", str(key_file), "--json", *db
        )
        assert code == 0, err
        result: dict[str, Any] = json.loads(out)
        return result

    first = await checkpoint()
    assert first["size"] == 2 and first["origin"] == f"{SERVICE}/tournament/cup"
    old = _write(tmp_path / "old.note", first["note"])

    await _game(store, "g2", seed=12)
    second = await checkpoint()
    assert second["size"] == 3
    new = _write(tmp_path / "new.note", second["note"])

    code, out, err = await cli(capsys, "prove", "--game", "g1", *db)  # the game's own tournament
    assert code == 0, err
    inclusion = json.loads(out)
    assert (inclusion["size"], inclusion["leaf"]["game_id"]) == (3, "g1")
    proof = _write(tmp_path / "inclusion.json", out)
    check = ["check-proof", "--checkpoint", str(new), "--key", vkey]
    code, out, _ = await cli(capsys, *check, "--proof", str(proof))
    assert code == 0, out

    for name, tampered in [
        ("index", {**inclusion, "index": 0}),
        (
            "version",
            {**inclusion, "leaf": {**inclusion["leaf"], "version": inclusion["leaf"]["version"] - 1}},
        ),
        ("hash", {**inclusion, "proof": [("00" * 32), *inclusion["proof"][1:]]}),
    ]:
        bad = _write(tmp_path / f"bad-{name}.json", json.dumps(tampered))
        code, out, _ = await cli(capsys, *check, "--proof", str(bad))
        assert code == 1 and "INVALID" in out, name
    code, out, _ = await cli(
        capsys, "check-proof", "--checkpoint", str(old), "--key", vkey, "--proof", str(proof)
    )
    assert code == 1  # the proof is for the tree of three, the old checkpoint has two

    code, _, err = await cli(capsys, "prove", "--from-size", "2", *db)
    assert code == 2 and "--tournament" in err
    code, _, err = await cli(capsys, "prove", "--game", "elsewhere", "--tournament", "cup", *db)
    assert code == 2 and "not among" in err
    code, out, err = await cli(capsys, "prove", "--tournament", "cup", "--from-size", "2", *db)
    assert code == 0, err
    consistency = _write(tmp_path / "consistency.json", out)
    code, out, _ = await cli(capsys, *check, "--old-checkpoint", str(old), "--proof", str(consistency))
    assert code == 0, out
    swapped = ["check-proof", "--checkpoint", str(old), "--old-checkpoint", str(new), "--key", vkey]
    code, out, _ = await cli(capsys, *swapped, "--proof", str(consistency))
    assert code == 1
    bent = json.loads(consistency.read_text())
    bent["proof"][0] = "11" * 32
    code, out, _ = await cli(
        capsys,
        *check,
        "--old-checkpoint",
        str(old),
        "--proof",
        str(_write(tmp_path / "bent.json", json.dumps(bent))),
    )
    assert code == 1 and "INVALID" in out


async def test_a_misspelt_tournament_is_refused_and_one_with_no_game_finished_signs_the_empty_tree(
    capsys: pytest.CaptureFixture[str],
    store: EventStore,
    database_url: str,
    service_key: tuple[Signer, Path],
) -> None:
    _, key_file = service_key
    db = ["--key-file", str(key_file), "--database-url", database_url]
    await _game(store, "done", seed=40)
    await store_game(
        store, "playing", play_game(Variant.CLASSIC, 3, 41), tournament_id="open", steps=slice(0, 4)
    )

    code, out, err = await cli(capsys, "checkpoint", "--tournament", "cpu", *db)  # "cup" misspelt

    assert (code, out) == (2, "")
    assert err == "uno-audit checkpoint: no tournament 'cpu': no game is in it\n"
    code, out, err = await cli(capsys, "prove", "--tournament", "cpu", "--from-size", "1", *db[2:])
    assert (code, out, err) == (2, "", "uno-audit prove: no tournament 'cpu': no game is in it\n")

    # A tournament whose only game is in progress exists: its tree is empty, and that is signed.
    code, out, err = await cli(capsys, "checkpoint", "--tournament", "open", "--json", *db)
    assert code == 0, err
    assert (json.loads(out)["size"], json.loads(out)["origin"]) == (0, f"{SERVICE}/tournament/open")


async def test_a_witness_cosignature_meets_a_threshold(
    capsys: pytest.CaptureFixture[str],
    store: EventStore,
    database_url: str,
    service_key: tuple[Signer, Path],
    tmp_path: Path,
) -> None:
    signer, key_file = service_key
    witness = Signer.generate("organiser.example")
    witness_file = tmp_path / "witness.key"
    write_signer(witness, witness_file)
    await _game(store, "w0", seed=30)
    code, note, err = await cli(
        capsys,
        "checkpoint",
        "--tournament",
        "cup",
        "--key-file",
        str(key_file),
        "--database-url",
        database_url,
    )
    assert code == 0, err
    plain = _write(tmp_path / "plain.note", note)
    code, cosigned, err = await cli(
        capsys,
        "cosign",
        "--checkpoint",
        str(plain),
        "--key-file",
        str(witness_file),
        "--log-key",
        signer.verifier.encode(),
    )
    assert code == 0, err
    assert cosigned.startswith(note.rstrip("\n").rsplit("\n", 1)[0])  # the text and the service's line kept
    signed = _write(tmp_path / "cosigned.note", cosigned)
    code, out, err = await cli(
        capsys, "prove", "--tournament", "cup", "--game", "w0", "--database-url", database_url
    )
    proof = _write(tmp_path / "proof.json", out)
    trust = ["--key", signer.verifier.encode(), "--witness", witness.verifier.encode(), "--threshold", "1"]
    code, out, _ = await cli(
        capsys, "check-proof", "--checkpoint", str(signed), "--proof", str(proof), *trust
    )
    assert code == 0, out
    code, out, _ = await cli(capsys, "check-proof", "--checkpoint", str(plain), "--proof", str(proof), *trust)
    assert code == 1 and "witness" in out


async def test_checkpoint_signs_with_the_key_serve_keeps_in_its_data_folder(
    capsys: pytest.CaptureFixture[str],
    store: EventStore,
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    await _game(store, "g-1", seed=8)
    data = tmp_path / "data"
    data.mkdir()
    argv = ["checkpoint", "--tournament", "cup", "--database-url", database_url, "--data-dir", str(data)]

    code, out, err = await cli(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.startswith("uno-audit checkpoint: no signing key: give --key-file or set ")
    assert f"uno-audit serve --data-dir {data}" in err

    keyring = load_keyring(data / "checkpoint.key", [], create_as="uno-audit")  # as serve makes it
    code, out, err = await cli(capsys, *argv)
    assert code == 0, err
    receipt = open_checkpoint(out, [keyring.signer.verifier])
    assert (receipt.origin, receipt.size) == ("uno-audit/tournament/cup", 1)

    other = Signer.generate("elsewhere")  # the variable, when set, comes before the data folder's key
    monkeypatch.setenv(KEY_ENV, other.encode())
    code, out, err = await cli(capsys, *argv)
    assert code == 0, err
    assert open_checkpoint(out, [other.verifier]).origin == "elsewhere/tournament/cup"

    (data / "checkpoint.key").write_text("not a key\n", encoding="utf-8")
    monkeypatch.delenv(KEY_ENV)
    code, out, err = await cli(capsys, *argv)
    assert (code, out) == (2, "") and "does not hold a signer key" in err
