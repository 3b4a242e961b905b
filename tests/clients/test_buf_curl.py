"""clients/buf/play.sh (``buf curl`` over plaintext gRPC, the schema from the server's reflection) against a
real server: run as docs/clients.md shows, it prints each request and reply and plays the fixed deck's game
to its end, which the Python side reads back; with a wrong admin token it stops at the first call."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import grpc
import pytest

from tests.api.shared_server import shared_address, shared_channel, shared_server  # noqa: F401
from tests.api.support import ADMIN_TOKEN

from .example_game import assert_fixed_deck_game, client_env, doc_command, missing, run

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300)]

PLAY = "clients/buf/play.sh"


@pytest.fixture(scope="module")
def buf() -> str:
    """The buf CLI: on the PATH, else the one the venv's buf-bin installed."""
    found = shutil.which("buf") or shutil.which("buf", path=str(Path(sys.executable).parent))
    if found is None:
        missing("buf is not installed: pip install buf-bin")
    return found


async def test_play_sh_plays_the_fixed_deck_game(buf: str, address: str, channel: grpc.aio.Channel) -> None:
    status, out, err = await run(
        doc_command(PLAY), address, client_env(BUF=buf, UNO_AUDIT_ADMIN_TOKEN=ADMIN_TOKEN)
    )
    assert status == 0, err
    requests = re.findall(r"^>>> (\w+) ", out, re.M)
    assert requests == ["CreateGame", "StartRound", *["Play"] * 3, "Draw", "Pass", *["Play"] * 6, "WatchGame"]
    assert len(re.findall(r"^<<< ", out, re.M)) == len(requests)  # each request's reply (or error) follows
    game_id = re.findall(r'"gameId": "([^"]+)"', out)[0]
    events = await assert_fixed_deck_game(channel, game_id)
    assert out.count('"duplicate": true') == 1
    refusal = out[out.index('"code": "failed_precondition"') :]
    assert (
        refusal.splitlines()[1].strip() == '"message": "play.match: B1 does not match R7 (active colour R)",'
    )
    assert '"type": "google.rpc.ErrorInfo"' in refusal
    # WatchGame after version 23: the last two events, the round's end and the game's.
    watched = out[out.rindex(">>> WatchGame") :]
    assert (
        re.findall(r'"type": "(\w+)"', watched)
        == [e.type for e in events[23:]]
        == ["RoundEnded", "GameEnded"]
    )


async def test_play_sh_stops_at_a_refused_token(buf: str, address: str) -> None:
    env = client_env(BUF=buf, UNO_AUDIT_ADMIN_TOKEN="not-the-admin-token")
    status, out, err = await run(doc_command(PLAY), address, env)
    assert status != 0
    assert re.findall(r"^>>> (\w+)", out, re.M) == ["CreateGame"]
    assert '"code": "unauthenticated"' in err, err


async def test_play_sh_needs_a_token(buf: str, address: str) -> None:
    status, out, err = await run(doc_command(PLAY), address, client_env(BUF=buf))
    assert status != 0 and out == ""
    assert "set UNO_AUDIT_ADMIN_TOKEN" in err
