"""The example clients' game, read back through the Python stubs, and docs/clients.md's command lines.

clients/node/play.js and clients/buf/play.sh play one classic game on the same fixed deck; the tests run
them as docs/clients.md shows (its ```sh lines, against the test's server instead of the doc's address)
and check here what the server recorded. Without node/npm or buf the tests skip, unless
UNO_AUDIT_REQUIRE_CLIENTS is set (``.ci/run`` sets it): then they fail.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any, NoReturn

import grpc
import pytest
from google.protobuf import json_format

from service.rules.cards import DECKS
from tests.api.support import ADMIN, new_id
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc as apb_grpc
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "clients.md"
NODE_DIR = ROOT / "clients" / "node"
REQUIRE_CLIENTS_ENV = "UNO_AUDIT_REQUIRE_CLIENTS"
#: The address the doc's command lines name; the tests put their server's in its place.
DOC_ADDRESS = "127.0.0.1:50051"

#: The fixed deck's game: bo (seat 1) plays out his seven cards, ann (seat 0) draws R2 once and passes.
BO_PLAYS = ["R7", "RS", "RR", "YR", "YS", "GS", "G7"]
DECK_TOP = ["R7", "B1", "RS", "B2", "RR", "B3", "YR", "B4", "YS", "B6", "GS", "B8", "G7", "B9", "R5", "R2"]
EVENT_TYPES = [
    "GameCreated", "RoundStarted", "CardFlipped", "CardPlayed", "CardDrawn", "Passed",
    "CardPlayed", "CardPlayed", "DirectionReversed", "CardPlayed", "DirectionReversed",
    "CardPlayed", "CardPlayed", "CardPlayed", "RoundEnded", "GameEnded",
]  # fmt: skip


def full_deck() -> list[str]:
    """The fixed deck, all 108 cards, top first (as play.js and play.sh build it)."""
    rest = Counter(card.token for card in DECKS["classic"])
    rest.subtract(DECK_TOP)
    return [*DECK_TOP, *rest.elements()]


def missing(what: str) -> NoReturn:
    """Skip for want of a client's tools, or fail when UNO_AUDIT_REQUIRE_CLIENTS says they must be there."""
    if os.environ.get(REQUIRE_CLIENTS_ENV):
        pytest.fail(f"{what} ({REQUIRE_CLIENTS_ENV} is set, so this test may not skip)")
    pytest.skip(what)


def doc_commands() -> list[str]:
    """Every line of docs/clients.md's ```sh blocks."""
    blocks = re.findall(r"^```sh\n(.*?)^```", DOC.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def doc_command(start: str) -> str:
    """The one command line of the doc that starts with ``start``."""
    found = [line for line in doc_commands() if line.startswith(start)]
    assert len(found) == 1, f"docs/clients.md shows {len(found)} command lines starting {start!r}"
    return found[0]


async def run(command: str, address: str, env: dict[str, str]) -> tuple[int, str, str]:
    """A command line run by bash from the repository's root, against ``address``: exit status, output."""
    process = await asyncio.create_subprocess_exec(
        "bash", "-c", command.replace(DOC_ADDRESS, address), cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def client_env(**set_: str) -> dict[str, str]:
    """This environment without the variables the scripts read, plus ``set_``."""
    env = {k: v for k, v in os.environ.items() if k not in ("UNO_AUDIT_ADMIN_TOKEN", "UNO_AUDIT_ADDRESS")}
    return {**env, **set_}


def _payload(event: pb.Event) -> dict[str, Any]:
    return json_format.MessageToDict(event.payload)


async def assert_fixed_deck_game(channel: grpc.aio.Channel, game_id: str) -> list[pb.Event]:
    """The game ``game_id`` is the fixed deck's, played out: bo won the round and the game with 35 points,
    each command applied once (the retried play too), and it verifies VALID, its round dealt from the
    admin's fixed deck. Its events, as the admin reads them."""
    stub = pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]
    view: pb.GameView = await stub.GetGame(pb.GetGameRequest(game_id=game_id), metadata=ADMIN)
    assert (view.awaiting, view.winner, list(view.players)) == ("game-over", 1, ["ann", "bo"])
    assert list(view.scores) == [0, 35]
    call = stub.WatchGame(pb.WatchGameRequest(game_id=game_id), metadata=ADMIN)
    events: list[pb.Event] = [event async for event in call]
    assert [e.version for e in events] == list(range(1, view.version + 1))
    assert [e.type for e in events if e.type != "Prompted"] == EVENT_TYPES
    assert _payload(events[1])["deck"][: len(DECK_TOP)] == DECK_TOP
    plays = [_payload(e) for e in events if e.type == "CardPlayed"]
    assert [(p["player"], p["card"]) for p in plays] == [(1, card) for card in BO_PLAYS]
    assert [p["card"] for p in plays if p["uno"]] == ["GS"]
    (drawn,) = (_payload(e) for e in events if e.type == "CardDrawn")
    assert (drawn["player"], drawn["card"]) == (0, "R2")
    ended = {e.type: _payload(e) for e in events if e.type in ("RoundEnded", "GameEnded")}
    assert (ended["RoundEnded"]["winner"], ended["RoundEnded"]["points"]) == (1, 35)
    assert (ended["GameEnded"]["winner"], ended["GameEnded"]["scores"]) == (1, [0, 35])
    assert _payload(events[1])["fixed_by"] == "admin"
    audit = apb_grpc.AuditServiceStub(channel)  # type: ignore[no-untyped-call]
    request = apb.VerifyGameRequest(game_id=game_id, command_id=new_id(), check_projections=False)
    verified: apb.VerifyGameReply = await audit.VerifyGame(request, metadata=ADMIN)
    report = json_format.MessageToDict(verified.report)
    assert verified.valid, report
    assert report["seed"]["mismatches"] == []
    assert [(d["position"], d["round"], d["by"]) for d in report["fixed_decks"]] == [(2, 1, "admin")]
    return events
