"""``uno-audit tournament create|list|show`` against a real PostgreSQL: the games of a tournament (played,
in progress, imported) with their results and standings and no card anywhere, the same finished games
as the tournament's signed tree (imported ones included), and garbage refused with exit 2 and nothing
written.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from projections import Projector, queries
from service.checkpoints import Signer, write_signer
from service.play.simulate import SimulatedGame, play_game
from service.rules.options import Variant
from service.store import EventStore
from tests.projections.projection_support import store_game, wait_readable
from tests.test_cli_audit import RECORDS, cli

pytestmark = pytest.mark.postgres

FINISHED_RECORD = RECORDS / "sonic_scoring_230.jsonl"  # its game has a winner: ann
UNFINISHED_RECORD = RECORDS / "classic_uno_catch.jsonl"  # it stops before the end of its game


async def _import(capsys: pytest.CaptureFixture[str], url: str, record: Path, tournament: str) -> str:
    code, out, err = await cli(
        capsys, "import", str(record), "--tournament", tournament, "--json", "--database-url", url
    )
    assert code in (0, 1), err
    game_id: str = json.loads(out)["game_id"]
    return game_id


async def _tournament(
    capsys: pytest.CaptureFixture[str], store: EventStore, url: str
) -> tuple[dict[str, SimulatedGame], dict[str, str]]:
    """Tournament "cup": two finished games, one in progress and two imported records (one finished);
    "other": one finished game; one game in no tournament. The read models are brought up to date."""
    played = {"g-a": play_game(Variant.CLASSIC, 3, 1), "g-b": play_game(Variant.SONIC, 3, 2)}
    for game_id, game in played.items():
        await store_game(store, game_id, game, tournament_id="cup")
    await store_game(
        store, "g-live", play_game(Variant.CLASSIC, 3, 3), tournament_id="cup", steps=slice(0, 4)
    )
    await store_game(store, "elsewhere", play_game(Variant.CLASSIC, 2, 4), tournament_id="other")
    await store_game(store, "alone", play_game(Variant.CLASSIC, 2, 5))
    imported = {
        "finished": await _import(capsys, url, FINISHED_RECORD, "cup"),
        "unfinished": await _import(capsys, url, UNFINISHED_RECORD, "cup"),
    }
    await wait_readable(store)
    async with await Projector.open(url) as projector:
        await projector.catch_up()
    return played, imported


def _keys(value: Any) -> set[str]:
    """Every key of every object in a JSON value."""
    if isinstance(value, dict):
        return set(value) | {key for item in value.values() for key in _keys(item)}
    if isinstance(value, list):
        return {key for item in value for key in _keys(item)}
    return set()


async def test_list_and_show_give_the_games_results_and_standings_and_no_card(
    capsys: pytest.CaptureFixture[str], store: EventStore, database_url: str, tmp_path: Path
) -> None:
    played, imported = await _tournament(capsys, store, database_url)
    db = ["--database-url", database_url]

    code, out, err = await cli(capsys, "tournament", "list", "--json", *db)
    assert code == 0, err
    assert json.loads(out)["tournaments"] == [
        {"tournament": "cup", "games": 5, "finished": 3, "imported": 2},
        {"tournament": "other", "games": 1, "finished": 1, "imported": 0},
    ]
    code, out, err = await cli(capsys, "tournament", "list", *db)
    assert out.splitlines() == ["cup: 3/5 games finished, 2 imported", "other: 1/1 games finished"]

    code, out, err = await cli(capsys, "tournament", "show", "cup", "--json", *db)
    assert code == 0, err
    shown = json.loads(out)
    games = {game["game_id"]: game for game in shown["games"]}
    assert set(games) == {"g-a", "g-b", "g-live", *imported.values()}
    for game_id, game in played.items():
        state = game.state
        assert state.winner is not None
        assert games[game_id]["finished"] and not games[game_id]["imported"]
        assert games[game_id]["winner"] == state.players[state.winner]
        assert games[game_id]["scores"] == dict(zip(state.players, state.scores, strict=True))
    assert not games["g-live"]["finished"] and games["g-live"]["winner"] is None
    assert games[imported["finished"]] | {"game_id": "", "version": 0} == {
        "game_id": "",
        "variant": "sonic",
        "players": ["ann", "bob"],
        "version": 0,
        "finished": True,
        "imported": True,
        "status": None,
        "winner": "ann",
        "scores": games[imported["finished"]]["scores"],
    }
    assert games[imported["finished"]]["scores"]["ann"] >= 230
    assert not games[imported["unfinished"]]["finished"]
    assert shown["finished"] == 3
    standings = {row["player"]: row for row in shown["standings"]}
    assert sum(row["wins"] for row in standings.values()) == 2  # the played games: the read models'
    assert {"hands", "cards", "hand", "seed"}.isdisjoint(_keys(shown))

    code, text, err = await cli(capsys, "tournament", "show", "cup", *db)
    assert code == 0, err
    lines = text.splitlines()
    assert lines[0] == "tournament cup: 3/5 games finished (its tree's leaves)"
    state = played["g-a"].state
    assert state.winner is not None
    assert f"  g-a  classic  finished: {state.players[state.winner]} won (" in text
    assert any(
        line.startswith(f"  {imported['unfinished']}  classic  imported, unfinished") for line in lines
    )
    assert any(line.startswith("  1. ") for line in lines)
    # No card of any hand the read models hold for these games is printed.
    for game_id in played:
        scores = await queries.scores(store, game_id)
        assert scores is not None and scores.rounds
        for round_row in scores.rounds:
            for hand in round_row.hands:
                for card in hand:
                    assert not re.search(rf"(?<!\S){re.escape(card)}(?!\S)", text), card

    # The tournament's signed tree holds the same finished games: the imported one with a winner too.
    signer = Signer.generate("uno-audit.test")
    key = tmp_path / "service.key"
    write_signer(signer, key)
    code, out, err = await cli(
        capsys, "checkpoint", "--tournament", "cup", "--key-file", str(key), "--json", *db
    )
    assert code == 0, err
    assert json.loads(out)["size"] == 3
    for game_id, proved in ((imported["finished"], 0), (imported["unfinished"], 2), ("g-live", 2)):
        code, out, err = await cli(capsys, "prove", "--game", game_id, *db)
        assert code == proved, err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tournament", "show", ""], "a tournament id must be 1 to 128 printable characters"),
        (["tournament", "show", "x" * 129], "a tournament id must be 1 to 128 printable characters"),
        (["tournament", "create", "two\nlines"], "a tournament id must be 1 to 128 printable characters"),
        (["tournament", "create", "tab\there"], "a tournament id must be 1 to 128 printable characters"),
        (["tournament"], "the following arguments are required"),
        (["tournament", "drop", "cup"], "invalid choice"),
        (["bots", "--variant", "classic", "--tournament", ""], "a tournament id must be 1 to 128"),
        (["bots", "--variant", "classic", "--tournament", "y" * 129], "a tournament id must be 1 to 128"),
        (["checkpoint", "--tournament", "a\x00b"], "a tournament id must be 1 to 128"),
        (["prove", "--tournament", "", "--from-size", "1"], "a tournament id must be 1 to 128"),
    ],
)
async def test_a_bad_tournament_id_is_a_usage_error_before_anything_is_opened(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    # No database is named: the id is refused before one would be looked for.
    with pytest.raises(SystemExit) as exited:
        await cli(capsys, *argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


async def test_unknown_tournaments_are_refused_and_create_writes_nothing(
    capsys: pytest.CaptureFixture[str], store: EventStore, database_url: str
) -> None:
    db = ["--database-url", database_url]
    await store_game(store, "g-1", play_game(Variant.CLASSIC, 2, 7), tournament_id="cup")

    code, out, err = await cli(capsys, "tournament", "show", "cupp", *db)
    assert (code, out) == (2, "")
    assert err == "uno-audit tournament: no tournament 'cupp': no game is in it\n"

    code, out, err = await cli(capsys, "tournament", "create", "cup", *db)
    assert (code, out) == (2, "") and "tournament 'cup' exists" in err

    code, out, err = await cli(capsys, "tournament", "create", "spring cup", "--json", *db)
    assert code == 0, err
    assert json.loads(out) == {"tournament": "spring cup", "games": 0}
    code, out, err = await cli(capsys, "tournament", "create", "spring cup", *db)
    assert code == 0 and "nothing stored yet" in out  # still free: create wrote nothing
    assert [game.game_id for game in await store.list_games()] == ["g-1"]
    code, out, _ = await cli(capsys, "tournament", "list", *db)
    assert out.splitlines() == ["cup: 1/1 games finished"]
    code, out, err = await cli(capsys, "tournament", "show", "spring cup", *db)
    assert code == 2 and "no tournament 'spring cup'" in err


async def test_an_empty_database_lists_no_tournament(
    capsys: pytest.CaptureFixture[str], database_url: str
) -> None:
    code, out, err = await cli(capsys, "tournament", "list", "--database-url", database_url)
    assert (code, out) == (0, "no tournament: no game is in one\n"), err
