"""clients/node/play.js (grpc-js over the .proto files of protos/) against a real server: run as
docs/clients.md shows, it plays the fixed deck's game to its end, which the Python side reads back; a bad
token, a missing one or no server is exit status 1. The doc's command lines are the ones run here and in
test_buf_curl.py, and its JavaScript excerpts are play.js's text."""

from __future__ import annotations

import asyncio
import fcntl
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import grpc
import pytest

from service.api.server import RunningServer
from tests.api.shared_server import shared_address, shared_channel, shared_server  # noqa: F401
from tests.api.support import ADMIN, ADMIN_TOKEN
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .example_game import (
    DOC,
    DOC_ADDRESS,
    NODE_DIR,
    ROOT,
    assert_fixed_deck_game,
    client_env,
    doc_command,
    doc_commands,
    full_deck,
    missing,
    run,
)

pytestmark = pytest.mark.timeout(600)
in_module_loop = pytest.mark.asyncio(loop_scope="module")  # the shared server's loop

PLAY = "node clients/node/play.js"
NPM_CI = "npm ci --prefix clients/node"
BUF_PLAY = "clients/buf/play.sh"


@pytest.fixture(scope="module")
def node_client() -> Path:
    """clients/node ready to run: node and npm present, and its node_modules installed by the doc's
    ``npm ci`` line when missing (once: test processes may get here together)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        missing("node and npm are not installed: apt-get install nodejs npm")
    if not (NODE_DIR / "node_modules").is_dir():
        with open(Path(tempfile.gettempdir()) / "uno-audit-npm-ci.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (NODE_DIR / "node_modules").is_dir():
                subprocess.run(["bash", "-c", doc_command(NPM_CI)], cwd=ROOT, check=True, timeout=600)
    return NODE_DIR


def test_the_doc_shows_only_command_lines_that_the_tests_run() -> None:
    assert doc_commands() == [NPM_CI, doc_command(PLAY), doc_command(BUF_PLAY)]
    assert doc_command(PLAY) == f"{PLAY} --address 127.0.0.1:50051"
    assert doc_command(BUF_PLAY) == f"{BUF_PLAY} 127.0.0.1:50051"


def test_the_docs_javascript_is_quoted_from_play_js() -> None:
    source = (NODE_DIR / "play.js").read_text(encoding="utf-8")
    excerpts = re.findall(r"^```js\n(.*?)^```", DOC.read_text(encoding="utf-8"), flags=re.M | re.S)
    assert excerpts, "docs/clients.md quotes no JavaScript"
    for excerpt in excerpts:
        # An excerpt's paragraphs, and its pieces between `// ...` lines, are each play.js's text.
        for part in re.split(r"\n(?:// \.\.\.)?\n", excerpt.rstrip("\n")):
            assert part in source, f"not in clients/node/play.js:\n{part}"


@in_module_loop
async def test_the_docs_python_plays_the_games_first_card(address: str, channel: grpc.aio.Channel) -> None:
    """The Python placeholder: every block compiles, and the game loop's block runs as it stands."""
    blocks = re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"), flags=re.M | re.S)
    assert blocks, "docs/clients.md shows no Python"
    for block in blocks:
        compile(block, "docs/clients.md", "exec")
    names: dict[str, Any] = {"admin_token": ADMIN_TOKEN, "deck": full_deck()}
    await asyncio.to_thread(exec, blocks[0].replace(DOC_ADDRESS, address), names)
    game_id = names["created"].game_id
    stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
    view = await stub.GetGame(pb.GetGameRequest(game_id=game_id), metadata=ADMIN)
    assert (view.version, view.awaiting, view.turn, view.top) == (6, "play", 0, "R7")


@in_module_loop
@pytest.mark.parametrize("token_from", ["environment", "file"])
async def test_play_js_plays_the_fixed_deck_game(
    node_client: Path, address: str, channel: grpc.aio.Channel, tmp_path: Path, token_from: str
) -> None:
    command = doc_command(PLAY)
    if token_from == "environment":
        env = client_env(UNO_AUDIT_ADMIN_TOKEN=ADMIN_TOKEN)
    else:
        (tmp_path / "admin-token").write_text(f"{ADMIN_TOKEN}\n")
        command, env = f"{command} --admin-token-file {tmp_path / 'admin-token'}", client_env()
    status, out, err = await run(command, address, env)
    assert status == 0, err
    outcome = json.loads(out.splitlines()[-1])
    events = await assert_fixed_deck_game(channel, outcome["game_id"])
    assert outcome == {"game_id": outcome["game_id"], "version": 25, "events": len(events), "winner": 1}
    assert re.search(r"^bo +Play R7 +duplicate, version 6,", out, re.M), out
    assert re.search(
        r"^ann +Play B1 +refused: FAILED_PRECONDITION play\.match \(play\.match: B1 does not", out, re.M
    )
    assert re.search(
        rf"^bo +receipt of the last reply +\S+/game/{outcome['game_id']} at version 25$", out, re.M
    )
    shown = [line.split()[1] for line in out.splitlines() if re.match(r"^ +\d+ \w+", line)]
    assert shown == [e.type for e in events if e.type != "Prompted"]


@in_module_loop
@pytest.mark.parametrize(
    ("token", "use_server", "says"),
    [
        ("", True, "no admin token: set UNO_AUDIT_ADMIN_TOKEN"),
        ("not-the-admin-token", True, "UNAUTHENTICATED"),
        (ADMIN_TOKEN, False, "UNAVAILABLE"),
    ],
    ids=["no token", "a wrong token", "no server"],
)
async def test_play_js_exits_1_on_an_error(
    node_client: Path, server: RunningServer, address: str, token: str, use_server: bool, says: str
) -> None:
    if not use_server:
        address = "127.0.0.1:1"  # nothing listens on port 1
    env = client_env(UNO_AUDIT_ADMIN_TOKEN=token) if token else client_env()
    status, out, err = await run(doc_command(PLAY), address, env)
    assert status == 1, (out, err)
    assert err.startswith("play.js: ") and says in err, err
    assert "game_id" not in out
