"""A classic UNO game played to its end with nothing but the client package (``uno_audit_client``).

Every seat plays the first card that matches (a wild naming the colour it holds most of), else draws, and
plays the drawn card if it matches, else passes. No module of the server is imported, so the same code runs
in the test's process and, as a script, in a fresh virtual environment holding only ``uno-audit-client``:

    python naive.py HOST:PORT     # prints the game's summary as one JSON object
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import grpc

from uno_audit_client import Client, Game, error_reason
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb

COLOURS = "RYGB"
#: Enough for any classic game to end many times over: a loop that does not advance fails, not hangs.
MAX_COMMANDS = 5000


def matches(card: str, view: pb.GameView) -> bool:
    """Whether ``card`` may go on the top card by the plain rules: a wild, the colour, or the face."""
    if card[0] not in COLOURS:
        return True
    top_face = view.top[1:] if view.top[:1] in COLOURS else view.top
    return card[0] == view.colour or card[1:] == top_face


def colour_for(hand: list[str]) -> str:
    held = Counter(card[0] for card in hand if card[0] in COLOURS)
    return held.most_common(1)[0][0] if held else "R"


@dataclass
class Played:
    """What a game played: its commands by kind, the refusals met, and the final view."""

    game_id: str = ""
    commands: Counter[str] = field(default_factory=Counter)
    refused: list[str] = field(default_factory=list)
    final: pb.GameView | None = None

    def to_json(self) -> dict[str, Any]:
        final = self.final
        return {
            "game_id": self.game_id,
            "commands": dict(self.commands),
            "refused": self.refused,
            "awaiting": final.awaiting if final is not None else "",
            "version": final.version if final is not None else 0,
            "winner": final.winner if final is not None else -1,
        }


async def play_to_the_end(game: Game, played: Played | None = None) -> Played:
    """Play ``game`` (every seat's token held) until it is over."""
    played = Played(game.game_id) if played is None else played
    view = await game.view()
    for _ in range(MAX_COMMANDS):
        if view.awaiting == "game-over":
            played.final = view
            return played
        seat = game.seat(0 if view.awaiting == "round-start" else view.turn)
        mine = await seat.view()
        hand = list(mine.hands[0].cards) if mine.hands else []
        kind, reply = await _act(seat, mine, hand, played)
        played.commands[kind] += 1
        view = reply.view if reply is not None else await game.view()
    raise RuntimeError(f"game {game.game_id} did not end in {MAX_COMMANDS} commands")


async def _act(seat: Any, view: pb.GameView, hand: list[str], played: Played) -> tuple[str, Any]:
    awaiting = view.awaiting
    if awaiting == "round-start":
        return "StartRound", await seat.start_round()
    if awaiting == "colour":
        return "Choose", await seat.choose(colour=colour_for(hand))
    if awaiting == "wd4-response":
        return "Accept", await seat.accept()
    if awaiting == "drawn":
        if view.drawn and matches(view.drawn, view):
            return "Play", await _play(seat, view.drawn, hand, played)
        return "Pass", await seat.pass_turn()
    if awaiting != "play":
        raise RuntimeError(f"a classic game without house rules does not wait for {awaiting!r}")
    for card in hand:
        if matches(card, view):
            reply = await _play(seat, card, hand, played)
            if reply is not None:
                return "Play", reply
    return "Draw", await seat.draw()


async def _play(seat: Any, card: str, hand: list[str], played: Played) -> Any:
    """Play ``card``, calling UNO when it leaves one card; ``None`` if the rules refuse it."""
    colour = colour_for([c for c in hand if c != card]) if card[0] not in COLOURS else ""
    try:
        return await seat.play(card, colour=colour, uno=len(hand) == 2)
    except grpc.aio.AioRpcError as error:
        if error.code() is not grpc.StatusCode.FAILED_PRECONDITION:
            raise
        played.refused.append(f"{card}: {error_reason(error)}")
        return None


async def versions(game: Game) -> list[int]:
    """The versions of what WatchGame streams of ``game``, from the start to its end."""
    return [int(event.version) async for event in game.watch()]


async def main(address: str) -> int:
    """Create a game, play it, check every receipt kept; print the summary (exit 0 when all is well)."""
    async with Client.connect(address) as client:
        game = await client.create_game(["ann", "bob", "cy"], target_score=1)
        watching = asyncio.create_task(versions(game))  # a spectator, live, until the game's end
        played = await play_to_the_end(game)
        watched = await asyncio.wait_for(watching, 60)
        summary = played.to_json()
        summary["receipts"] = len(client.receipts.of(game.game_id))
        summary["receipts_checked"] = all(
            client.receipts.check(r).version == r.version for r in client.receipts
        )
        summary["watched"] = watched == list(range(1, summary["version"] + 1))
    print(json.dumps(summary))
    return 0 if summary["awaiting"] == "game-over" and summary["receipts_checked"] else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1])))
