"""docs/arbiter.md's walk-through "A rewrite caught by a player's receipt" runs as written: a key from
``uno-audit keygen``, a server signing with it, ``uno-audit bots --receipts``, ``verify --receipts`` before
and after ``python -m tests.rewrite`` swaps two names and recomputes every later hash, and ``--each`` —
printing what the walk-through shows.

The expected lines are the doc's own (:mod:`tests.doc_commands`); the server runs in this process
(``start_server`` with the keyring ``serve --checkpoint-key-file`` loads) on the database the commands
are given, as the walk-through's server and commands share one.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from service.api.config import ServeConfig
from service.api.server import start_server
from service.checkpoints.keyring import load_keyring
from service.cli.main import build_parser, main
from tests import rewrite
from tests.api.support import deal_from
from tests.doc_commands import DOCS, follows, shell_block, steps

if TYPE_CHECKING:  # the root conftest is not importable as a module of a package
    from tests.conftest import ServiceLogin

pytestmark = pytest.mark.postgres

HEADING = "## A rewrite caught by a player's receipt"
#: The address the walk-through's server listens on (``serve``'s default): the test's is another port.
SERVER = "127.0.0.1:50051"


async def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, list[str]]:
    code = await asyncio.to_thread(main, argv)
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    return code, out.splitlines()


def test_the_walkthrough_has_the_steps_it_describes() -> None:
    found = [words for words, _ in steps(shell_block(DOCS / "arbiter.md", HEADING))]
    assert [words[:2] for words in found] == [
        ["uno-audit", "keygen"],
        ["uno-audit", "serve"],
        ["uno-audit", "bots"],
        ["uno-audit", "verify"],
        ["python", "-m"],
        ["uno-audit", "verify"],
        ["uno-audit", "verify"],
    ]
    serve = build_parser().parse_args(found[1][1:])
    assert serve.checkpoint_key_file == Path("service.key")  # signs with the key keygen made
    assert found[4][2] == "tests.rewrite"


async def test_the_receipt_walkthrough_prints_what_the_docs_show(
    capsys: pytest.CaptureFixture[str],
    database_url: str,
    service_login: ServiceLogin,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The commands run as the doc writes them: only its stand-ins (the game's id, the verifier key, the
    # server's address) are replaced, and the database is named as the doc says for a server's, in
    # DATABASE_URL (the owner's), which the server's login shares.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DATABASE_URL", database_url)
    deal_from(monkeypatch, 6)  # the server runs in this process: the same round each run
    walk = steps(shell_block(DOCS / "arbiter.md", HEADING))
    (keygen, keygen_lines), _serve, (bots, _), (verify, before), (rewrite_step, rewritten_lines) = walk[:5]
    (verify_again, after), (verify_each, each) = walk[5:]
    assert verify == verify_again and verify_each == [*verify, "--each"]

    code, printed = await run(capsys, keygen[1:])
    assert code == 0 and not follows(keygen_lines, printed)
    published = json.loads(printed[0])["verifier_key"]

    from projections.migrate import apply_migrations as migrate_projections
    from service.store.migrate import apply_migrations

    await apply_migrations(database_url)
    await migrate_projections(database_url)
    server = await start_server(
        ServeConfig(
            listen="127.0.0.1:0", database_url=await service_login.url(database_url), admin_token=None
        ),
        keyring=load_keyring(Path("service.key")),
    )
    try:
        assert bots[bots.index("--server") + 1] == SERVER  # the address `serve` listens on by default
        code, _ = await run(capsys, [f"127.0.0.1:{server.port}" if w == SERVER else w for w in bots[1:]])
        assert code == 0
    finally:
        await server.stop(grace=2.0)

    kept = [json.loads(line) for line in Path("receipts.jsonl").read_text().splitlines()]
    game_id = kept[0]["game_id"]  # as the walk-through says: every line names the game
    assert {entry["game_id"] for entry in kept} == {game_id}

    def as_run(words: list[str]) -> list[str]:
        replaced = [game_id if w.endswith("…") and "+" not in w else w for w in words[1:]]
        return [published if w.startswith("uno-audit.example+") else w for w in replaced]

    code, printed = await run(capsys, as_run(verify))
    assert code == 0, "\n".join(printed)
    assert not follows(before, printed), printed
    assert f"  {len(kept):,} receipts: all match" in printed

    assert rewrite_step[:3] == ["python", "-m", "tests.rewrite"]
    args = [game_id if word.endswith("…") else word for word in rewrite_step[3:]]
    assert await asyncio.to_thread(rewrite.main, args) == 0
    printed = capsys.readouterr().out.splitlines()
    assert not follows(rewritten_lines, printed), printed

    code, printed = await run(capsys, as_run(verify_again))
    assert code == 1
    assert not follows(after, printed), "\n".join(printed)
    # Every other check passes, as the walk-through says: only the receipts tell.
    assert "  read models: agree with the log" in printed
    first = min(entry["version"] for entry in kept)  # the first event changed: every receipt is rewritten
    assert (
        f"  {len(kept):,} receipts: first rewritten at version {first:,}; {len(kept) - 1:,} after it"
        in printed
    )
    assert not [line for line in printed if line.startswith("  receipt ")]

    code, printed = await run(capsys, as_run(verify_each))
    assert code == 1
    assert not follows(each, printed), printed
    assert len([line for line in printed if line.startswith("  receipt ")]) == len(kept)


def test_the_rewrite_refuses_an_unknown_game_and_a_missing_database(
    capsys: pytest.CaptureFixture[str], database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert rewrite.main(["--game", "no-such-game", "--database-url", database_url]) == 2
    assert "no game no-such-game stored" in capsys.readouterr().err
    assert rewrite.main(["--game", "g", "--data-dir", str(tmp_path / "none")]) == 2
    assert "no database" in capsys.readouterr().err
