"""The README's walk-through "A rewrite caught by a player's receipt" runs as written: a key from
``uno-audit keygen``, a server signing with it, ``uno-audit bots --receipts``, ``verify --receipts`` before
and after a superuser rewrites an event and recomputes every later hash — printing what the README shows.

The expected lines are the README's own (``tests/test_readme_walkthrough.py``'s reader and matcher); the
server runs in this process (``start_server`` with the keyring ``serve`` would load from the key file).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from service.api.config import ServeConfig
from service.api.server import start_server
from service.checkpoints.keyring import load_keyring
from service.cli.main import main
from tests.api.support import deal_from
from tests.rewrite import rewrite_recomputing_chain
from tests.test_readme_walkthrough import README, follows

if TYPE_CHECKING:  # the root conftest is not importable as a module of a package
    from tests.conftest import ServiceLogin

pytestmark = pytest.mark.postgres


def steps() -> list[tuple[list[str], list[str]]]:
    """``(command words, expected lines)`` of each ``uno-audit`` command of the walk-through's block."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("### A rewrite caught by a player's receipt") :]
    start = section.index("```sh\n") + len("```sh\n")
    block = section[start : section.index("```\n", start)]
    found: list[tuple[list[str], list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            found.append((line[2:].split("#")[0].split(), []))
        elif found:
            found[-1][1].append(line)
    return [(words[1:], lines) for words, lines in found if words[0] == "uno-audit"]


async def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, list[str]]:
    code = await asyncio.to_thread(main, argv)
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    return code, out.splitlines()


def swap_two_names(version: int, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The first two players' names swapped in the game's first event: the game has another winner."""
    if kind != "GameCreated":
        return payload
    first, second, *rest = payload["players"]
    return {**payload, "players": [second, first, *rest]}


async def test_the_receipt_walkthrough_prints_what_the_readme_shows(
    capsys: pytest.CaptureFixture[str],
    database_url: str,
    service_login: ServiceLogin,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    deal_from(monkeypatch, 6)  # the server runs in this process: the same round each run
    (keygen, keygen_lines), _serve, (bots, _), (verify, before), (verify_again, after) = [
        (words, lines) for words, lines in steps()
    ]
    assert keygen[0] == "keygen" and bots[0] == "bots" and verify == verify_again

    code, printed = await run(capsys, keygen)
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
        code, _ = await run(capsys, [*bots, "--server", f"127.0.0.1:{server.port}"])
        assert code == 0
    finally:
        await server.stop(grace=2.0)

    kept = [json.loads(line) for line in Path("receipts.jsonl").read_text().splitlines()]
    game_id = kept[0]["game_id"]
    assert {entry["game_id"] for entry in kept} == {game_id}

    def as_run(words: list[str]) -> list[str]:
        replaced = [game_id if w.endswith("…") and "+" not in w else w for w in words]
        replaced = [published if w.startswith("uno-audit.example+") else w for w in replaced]
        return [*replaced, "--no-projections", "--database-url", database_url]

    code, printed = await run(capsys, as_run(verify))
    assert code == 0
    assert not follows(before, printed), printed

    await rewrite_recomputing_chain(database_url, game_id, swap_two_names)
    edited = 1
    code, printed = await run(capsys, as_run(verify_again))
    assert code == 1
    assert not follows(after, printed), printed
    rewritten = [line for line in printed if "REWRITTEN" in line]
    first = min(entry["version"] for entry in kept if entry["version"] >= edited)
    assert rewritten and f"(version {first}):" in rewritten[0]
