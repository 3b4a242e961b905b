"""``uno-audit bots`` as a person and a script see it: a progress bar on a terminal and nothing on a pipe,
``retries`` in the summary, each game's id on a line of its own before it, the games created in the
tournament asked for (a bad id refused first), and a server that stays away reported once the retries
run out."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time
from pathlib import Path

import grpc
import pytest

from tests.terminal import open_terminal, read_until_closed
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

from .support import deal_from

# A whole game, whose length the server's shuffle decides: patience on a busy machine.
pytestmark = pytest.mark.timeout(300)

UNO_AUDIT = Path(sys.executable).with_name("uno-audit")
GAME = ("--games", "1", "--variant", "classic", "--players", "3", "--target-score", "1")


@pytest.fixture(autouse=True)
def _same_deal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server runs in this process: the bots' round is the same each run, and short."""
    deal_from(monkeypatch, 6)


async def test_a_terminal_gets_a_progress_bar_of_games_and_retries(address: str) -> None:
    terminal, child_end = open_terminal()
    try:
        bots = await asyncio.create_subprocess_exec(
            str(UNO_AUDIT), "bots", "--server", address, *GAME,
            stdout=asyncio.subprocess.PIPE, stderr=child_end,
        )  # fmt: skip
        os.close(child_end)
        screen = asyncio.create_task(asyncio.to_thread(read_until_closed, terminal))
        printed, _ = await asyncio.wait_for(bots.communicate(), 240)
        shown = (await screen).decode(errors="replace")
    finally:
        os.close(terminal)
    assert bots.returncode == 0, shown
    assert "games:" in shown and "1/1" in shown and "retries=0" in shown, shown
    *game_ids, last = printed.decode().splitlines()  # each game's id, then the summary
    summary = json.loads(last)
    assert (summary["games"], summary["retries"], summary["rejected"]) == (1, 0, 0)
    assert len(game_ids) == 1 and game_ids[0] not in shown  # on standard output, not the terminal's


async def test_a_pipe_gets_no_progress_bar(address: str) -> None:
    bots = await asyncio.create_subprocess_exec(
        str(UNO_AUDIT), "bots", "--server", address, *GAME,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    printed, complaints = await asyncio.wait_for(bots.communicate(), 240)
    assert bots.returncode == 0, complaints.decode()
    assert complaints == b""
    assert json.loads(printed.splitlines()[-1])["retries"] == 0


async def test_the_games_are_created_in_the_tournament_and_their_ids_printed(address: str) -> None:
    tournament = "spring cup/2026"
    bots = await asyncio.create_subprocess_exec(
        str(UNO_AUDIT), "bots", "--server", address, *GAME[2:], "--games", "2", "--concurrency", "2",
        "--tournament", tournament,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    printed, complaints = await asyncio.wait_for(bots.communicate(), 240)
    assert bots.returncode == 0, complaints.decode()
    *game_ids, last = printed.decode().splitlines()
    assert json.loads(last)["games"] == 2
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
        listed = await stub.ListGames(pb.ListGamesRequest(tournament_id=tournament))
        everything = await stub.ListGames(pb.ListGamesRequest())
    assert sorted(game_ids) == sorted(game.game_id for game in listed.games) and len(set(game_ids)) == 2
    assert len(everything.games) == 2  # the bots' two, nothing outside the tournament


@pytest.mark.parametrize("tournament", ["", "t" * 129, "new\nline", "bell\a"])
async def test_a_bad_tournament_is_refused_before_any_game_is_created(address: str, tournament: str) -> None:
    bots = await asyncio.create_subprocess_exec(
        str(UNO_AUDIT), "bots", "--server", address, *GAME, "--tournament", tournament,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    printed, complaints = await asyncio.wait_for(bots.communicate(), 60)
    assert (bots.returncode, printed) == (2, b"")
    assert "--tournament: a tournament id must be 1 to 128 printable characters" in complaints.decode()
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
        assert not (await stub.ListGames(pb.ListGamesRequest())).games


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize(("retry_for", "at_least"), [("0", 0.0), ("2", 1.0)])
async def test_a_server_that_stays_away_is_reported_when_the_retries_run_out(
    retry_for: str, at_least: float
) -> None:
    started = time.monotonic()
    bots = await asyncio.create_subprocess_exec(
        str(UNO_AUDIT), "bots", "--server", f"127.0.0.1:{_closed_port()}", *GAME,
        "--retry-for", retry_for, "--backoff-cap", "1",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    printed, complaints = await asyncio.wait_for(bots.communicate(), 60)
    took = time.monotonic() - started
    assert bots.returncode == 1
    assert printed == b""
    assert complaints.decode().startswith("uno-audit bots: UNAVAILABLE: ")
    assert at_least <= took  # that it stops at all, the test's timeout shows
