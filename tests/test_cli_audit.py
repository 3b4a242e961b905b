"""The arbiter's command line on stored games: ``uno-audit verify --game/--all``, ``adjudicate``, ``export``
and ``import``, against a real PostgreSQL.

Each test prepares its database with the ``store`` fixture (in the test's event loop), then runs the
command line, which runs its own ``asyncio.run``, in a worker thread. Expected values come from the
record files and their ``.expected.json``, the offline verifier, the simulation that played the game,
or the tampering the test did itself, never from the command's own output.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from service.app.auditor import Auditor
from service.cli import audit as cli_audit
from service.cli.main import main
from service.domain.auth import token_hash
from service.domain.entries import DisputeKind
from service.play.simulate import SimulatedGame, play_game
from service.records.record import read_record
from service.records.verify import verify_record
from service.rules.options import Variant
from service.store import EventStore
from tests.audit import disputed
from tests.audit.support import store_simulated
from tests.audit.test_one_renderer import as_positions
from tests.projections.projection_support import store_game

RECORDS = Path(__file__).parent / "data" / "records"
PLAYERS = 3  # store_simulated's default

Run = tuple[int, str, str]


async def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> Run:
    """``uno-audit ARGV`` in a worker thread (it runs its own event loop): exit status, stdout, stderr."""
    code = await asyncio.to_thread(main, list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def offline(name: str) -> dict[str, Any]:
    """The offline verifier's report of a record file."""
    return verify_record(read_record((RECORDS / f"{name}.jsonl").read_text(encoding="utf-8"))).to_json()


def expected(name: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((RECORDS / f"{name}.expected.json").read_text(encoding="utf-8"))
    return result


def winner_of(game: SimulatedGame) -> str:
    state = game.state
    assert state.winner is not None
    return state.players[state.winner]


async def import_file(capsys: pytest.CaptureFixture[str], url: str, name: str) -> dict[str, Any]:
    code, out, err = await cli(
        capsys, "import", str(RECORDS / f"{name}.jsonl"), "--json", "--database-url", url
    )
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def tamper(url: str, game_id: str, change: str, where: str = "true") -> int:
    """As the database superuser, rewrite the payload of the game's first ``CardPlayed`` event that
    ``where`` holds for as ``change`` says (the immutability trigger switched off meanwhile); its position."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            f"SELECT version FROM events WHERE game_id = %s AND type = 'CardPlayed' AND ({where}) "
            "ORDER BY version LIMIT 1",
            (game_id,),
        ).fetchone()
        assert row is not None
        position = int(row[0])
        with conn.transaction():
            conn.execute("ALTER TABLE events DISABLE TRIGGER events_immutable_rows")
            changed = conn.execute(
                f"UPDATE events SET payload = {change} "
                "WHERE game_id = %s AND version = %s AND type = 'CardPlayed'",
                (game_id, position),
            ).rowcount
            conn.execute("ALTER TABLE events ENABLE TRIGGER events_immutable_rows")
    assert changed == 1
    return position


async def store_partial(store: EventStore, variant: Variant, seed: int, commands: int) -> tuple[str, bytes]:
    """The first ``commands`` commands of a bot game, stored as the service stores them (the seed kept
    apart from the log): a game still in progress. Its id and its seed."""
    game = play_game(variant, PLAYERS, seed)
    assert game.state.seed is not None
    game_id = str(uuid.uuid4())
    await store_game(store, game_id, game, steps=slice(0, commands))
    return game_id, game.state.seed


# --- verify --game ---------------------------------------------------------------------------------------


async def test_a_stored_game_verifies_valid_in_text_and_json(
    capsys: pytest.CaptureFixture[str], store: EventStore, database_url: str
) -> None:
    game_id = await store_simulated(store, Variant.CLASSIC, seed=3)
    winner = winner_of(play_game(Variant.CLASSIC, PLAYERS, 3))
    version = await store.stream_version(game_id)

    code, out, err = await cli(capsys, "verify", "--game", game_id, "--database-url", database_url)
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[0] == f"game {game_id}: VALID"
    assert f"winner: {winner}" in out
    assert "intact" in out and "TAMPERED" not in out and "DIVERGED" not in out

    code, out, err = await cli(capsys, "verify", "--game", game_id, "--json", "--database-url", database_url)
    assert code == 0, err
    assert out.count("\n") == 1  # one JSON object on one line
    report = json.loads(out)
    assert (report["game_id"], report["origin"], report["version"]) == (game_id, "live", version)
    assert report["valid"] is True and report["rules_valid"] is True
    assert report["chain"] == {**report["chain"], "valid": True, "events": version, "findings": []}
    assert report["winner"] == winner
    assert report["replay"]["diverged_at"] is None and report["replay"]["outcome_differs"] is False
    assert report["seed"]["commitment_ok"] is True


async def test_an_unknown_game_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], store: EventStore, database_url: str
) -> None:
    await store_simulated(store, Variant.CLASSIC, seed=1)

    code, out, err = await cli(capsys, "verify", "--game", "no-such-game", "--database-url", database_url)

    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and "no-such-game" in err
    assert "Traceback" not in err


@pytest.mark.timeout(120)
async def test_an_unknown_game_is_one_line_every_time_as_a_process(database_url: str) -> None:
    """As a process, where a read left running after the other failed used to end on a closed pool and
    print its traceback at exit ("Task exception was never retrieved"), in about 4 runs of 10."""
    uno_audit = Path(sys.executable).with_name("uno-audit")
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL" and not k.startswith("UNO_AUDIT_")}
    for run in range(10):
        done = await asyncio.to_thread(
            subprocess.run,
            [str(uno_audit), "verify", "--game", "no-such-game", "--database-url", database_url],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stdout) == (2, ""), (run, done.stderr)
        assert done.stderr.count("\n") == 1 and "no-such-game" in done.stderr, (run, done.stderr)


def test_bad_usage_of_verify_exits_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    record = str(RECORDS / "classic_wd4_upheld.jsonl")
    for argv in (
        ["verify", "--record", record, "--game", "x"],
        ["verify", "--game", "x", "--all"],
        ["verify", "--game", "bad\x00id"],
        ["verify", "--all", "--jobs", "0"],
        ["verify", "--all", "--jobs", "65"],
        ["verify", "--all", "--jobs", "two"],
    ):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2
        assert "Traceback" not in capsys.readouterr().err

    assert main(["verify", "--record", record, "--reveal-seed"]) == 2
    assert "--reveal-seed" in capsys.readouterr().err
    for source in (["--record", record], ["--game", "x"]):
        assert main(["verify", *source, "--jobs", "2"]) == 2
        assert "--jobs goes with --all" in capsys.readouterr().err
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert main(["verify", "--game", "x", "--data-dir", str(tmp_path / "none")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--database-url" in err and err.count("\n") == 1
    assert not (tmp_path / "none").exists()  # no stray database made up on the way


async def test_an_unreachable_database_exits_2_without_a_traceback(
    capsys: pytest.CaptureFixture[str], postgres_url: str
) -> None:
    url = make_conninfo(postgres_url, dbname=f"missing_{uuid.uuid4().hex[:8]}")

    code, out, err = await cli(capsys, "verify", "--all", "--database-url", url)

    assert code == 2 and out == ""
    assert err.startswith("uno-audit verify: cannot connect to the database") and err.count("\n") == 1


async def test_an_imported_record_with_violations_verifies_invalid(
    capsys: pytest.CaptureFixture[str], database_url: str
) -> None:
    imported = await import_file(capsys, database_url, "classic_violations")
    wanted = expected("classic_violations")

    code, out, _ = await cli(
        capsys, "verify", "--game", imported["game_id"], "--json", "--database-url", database_url
    )

    assert code == 1
    report = json.loads(out)
    assert report["valid"] is False and report["origin"] == "imported"
    assert [(v["position"], v["rule"]) for v in report["violations"]] == [
        (v["line"] + 1, v["rule"]) for v in wanted["violations"]
    ]
    assert report["stopped_at"] == wanted["stopped_at"] + 1

    code, out, _ = await cli(capsys, "verify", "--game", imported["game_id"], "--database-url", database_url)
    assert code == 1
    assert out.splitlines()[0] == f"game {imported['game_id']}: INVALID"
    for violation in wanted["violations"]:
        assert f"position {violation['line'] + 1}: {violation['rule']}: " in out


async def test_verify_game_and_verify_record_print_one_renderers_text(
    capsys: pytest.CaptureFixture[str], database_url: str
) -> None:
    imported = await import_file(capsys, database_url, "classic_uno_catch")

    code, game_text, _ = await cli(
        capsys, "verify", "--game", imported["game_id"], "--database-url", database_url
    )
    assert code == 0
    code, record_text, _ = await cli(capsys, "verify", "--record", str(RECORDS / "classic_uno_catch.jsonl"))
    assert code == 0

    judged = record_text.splitlines()[1:]  # the ruling, the scores: as a stored game gives them, in positions
    assert judged[0] == "  line 9: uno-catch by bob against ann: penalty [uno.catch]; the table agreed"
    assert game_text.splitlines()[-len(judged) :] == [as_positions(line) for line in judged]


async def test_the_seed_of_a_game_in_progress_is_revealed_only_when_asked(
    capsys: pytest.CaptureFixture[str], store: EventStore, database_url: str
) -> None:
    game_id, seed = await store_partial(store, Variant.CLASSIC, seed=5, commands=4)
    before = await store.stream_version(game_id)

    code, out, _ = await cli(capsys, "verify", "--game", game_id, "--json", "--database-url", database_url)
    assert code == 0
    report = json.loads(out)
    assert report["status"] == "in-progress"
    assert report["seed"]["status"] == "secret" and report["seed"]["seed"] is None
    assert report["seed"]["committed"] == hashlib.sha256(seed).hexdigest()

    code, out, err = await cli(capsys, "export", "--game", game_id, "--database-url", database_url)
    assert (code, out) == (2, "")
    assert "seed" in err and err.count("\n") == 1
    assert await store.stream_version(game_id) == before  # a refusal appends nothing

    argv = ("verify", "--game", game_id, "--reveal-seed", "--json", "--database-url", database_url)
    code, out, err = await cli(capsys, *argv)
    assert code == 0, err
    report = json.loads(out)
    assert report["seed"]["seed"] == seed.hex()
    assert report["seed"]["revealed_at"] == before + 1
    assert [e.type for e in await store.read_stream(game_id, after_version=before)] == ["SeedRevealed"]

    code, out, _ = await cli(capsys, "export", "--game", game_id, "--database-url", database_url)
    assert code == 0
    assert read_record(out).header.seed == seed


# --- verify --all ----------------------------------------------------------------------------------------


async def test_verify_all_lists_every_stored_game(
    capsys: pytest.CaptureFixture[str], store: EventStore, database_url: str
) -> None:
    ids = {await store_simulated(store, variant, seed=7) for variant in Variant}
    assert len(ids) == len(Variant) >= 4

    code, out, err = await cli(capsys, "verify", "--all", "--json", "--database-url", database_url)

    assert code == 0, out
    assert out.count("\n") == 1
    summary = json.loads(out)
    assert summary["games"] == len(ids)
    assert (summary["invalid"], summary["outcome_differs"]) == ([], [])
    assert {row["game_id"] for row in summary["reports"]} == ids
    for row in summary["reports"]:
        assert (row["origin"], row["valid"], row["chain"], row["first_problem"]) == ("live", True, True, None)
        assert row["version"] == await store.stream_version(row["game_id"])
    # Standard error is not a terminal here: no progress bar (tests/test_cli_config.py draws one on a pty).
    assert err == ""
    assert "\r" not in out and "%|" not in out

    code, out, err = await cli(capsys, "verify", "--all", "--no-projections", "--database-url", database_url)
    assert code == 0
    assert all(game_id in out for game_id in ids)
    assert f"{len(ids)} games: {len(ids)} valid, 0 invalid" in out
    assert err == "" and "%|" not in out


async def test_verify_all_of_no_games_exits_0(capsys: pytest.CaptureFixture[str], database_url: str) -> None:
    code, out, _ = await cli(capsys, "verify", "--all", "--json", "--database-url", database_url)

    assert code == 0
    assert json.loads(out) == {"games": 0, "invalid": [], "outcome_differs": [], "reports": []}


async def test_verify_all_exits_1_and_names_a_tampered_game(
    capsys: pytest.CaptureFixture[str], store: EventStore, database_url: str
) -> None:
    ids = [await store_simulated(store, variant, seed=2) for variant in (Variant.CLASSIC, Variant.SONIC)]
    ids.append(await store_simulated(store, Variant.ATTACK, seed=4))
    victim = ids[1]
    position = tamper(
        database_url, victim, "jsonb_set(payload, '{player}', '1')", "payload->>'player' <> '1'"
    )

    code, out, _ = await cli(capsys, "verify", "--all", "--json", "--database-url", database_url)

    assert code == 1
    summary = json.loads(out)
    assert summary["games"] == 3
    assert summary["invalid"] == [victim]
    rows = {row["game_id"]: row for row in summary["reports"]}
    assert rows[victim]["valid"] is False and rows[victim]["chain"] is False
    assert rows[victim]["first_problem"].startswith(f"position {position}:")
    assert rows[victim]["diverged_at"] is not None and rows[victim]["diverged_at"] >= position
    # A finished game whose log was changed in its first round cannot replay to the stored winner.
    assert summary["outcome_differs"] == [victim]
    assert all(rows[game_id]["valid"] for game_id in ids if game_id != victim)

    code, out, _ = await cli(capsys, "verify", "--all", "--database-url", database_url)
    assert code == 1
    table, _, after = out.partition("outcome differs (")
    victim_line = next(line for line in table.splitlines() if line.startswith(victim))
    assert "NO" in victim_line and "TAMPERED" in victim_line and "DIFFERS" in victim_line
    assert victim in after  # listed explicitly as an outcome that differs
    assert "3 games: 2 valid, 1 invalid" in table

    code, out, _ = await cli(capsys, "verify", "--game", victim, "--database-url", database_url)
    assert code == 1
    assert f"    position {position}: " in out and "TAMPERED" in out


async def test_verify_all_in_processes_prints_what_one_process_does(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    store: EventStore,
    database_url: str,
) -> None:
    """``--jobs 2`` splits the games across two processes (each with its own connections): the same
    bytes, in the same game id order, and the same exit status as ``--jobs 1`` (in this process), a
    tampered game and a game whose log no longer decodes among them."""
    started: list[int] = []
    in_processes = cli_audit.verify_in_processes

    def counted(url: str, ids: Sequence[str], processes: int, check: bool) -> AsyncIterator[Any]:
        started.append(processes)
        return in_processes(url, ids, processes, check)

    monkeypatch.setattr(cli_audit, "verify_in_processes", counted)
    ids = [await store_simulated(store, variant, seed=3) for variant in Variant]
    tamper(database_url, ids[1], "jsonb_set(payload, '{player}', '1')", "payload->>'player' <> '1'")
    tamper(database_url, ids[2], "payload - 'card'")

    printed = {}
    for flags in ([], ["--json"]):
        here = await cli(capsys, "verify", "--all", "--jobs", "1", *flags, "--database-url", database_url)
        apart = await cli(capsys, "verify", "--all", "--jobs", "2", *flags, "--database-url", database_url)

        assert apart == here
        assert here[0] == 1 and here[2] == ""
        printed[" ".join(flags)] = here[1]
    summary = json.loads(printed["--json"])
    assert [row["game_id"] for row in summary["reports"]] == sorted(ids)
    assert summary["invalid"] == sorted(ids[1:3])
    assert started == [2, 2]  # --jobs 1 never starts a process


async def test_a_game_whose_log_no_longer_decodes_is_invalid_not_a_crash(
    capsys: pytest.CaptureFixture[str], store: EventStore, database_url: str
) -> None:
    good = await store_simulated(store, Variant.CLASSIC, seed=8)
    broken = await store_simulated(store, Variant.ATTACK, seed=8)
    position = tamper(database_url, broken, "payload - 'card'")  # a play without its card

    code, out, err = await cli(capsys, "verify", "--game", broken, "--database-url", database_url)
    assert code == 1, err
    assert out.splitlines()[0] == f"game {broken}: INVALID"
    assert f"UNREADABLE from position {position}" in out
    assert f"    position {position}: " in out  # the chain names the changed event
    assert "Traceback" not in err

    code, out, err = await cli(capsys, "verify", "--all", "--json", "--database-url", database_url)
    assert code == 1, err
    summary = json.loads(out)
    assert (summary["games"], summary["invalid"]) == (2, [broken])
    rows = {row["game_id"]: row for row in summary["reports"]}
    assert rows[broken]["chain"] is False and rows[broken]["first_problem"].startswith(
        f"position {position}:"
    )
    assert rows[good]["valid"] is True


# --- export ----------------------------------------------------------------------------------------------


async def test_an_exported_game_verifies_offline(
    capsys: pytest.CaptureFixture[str], store: EventStore, database_url: str, tmp_path: Path
) -> None:
    game_id = await store_simulated(store, Variant.MARIO_KART, seed=6)
    winner = winner_of(play_game(Variant.MARIO_KART, PLAYERS, 6))

    code, out, err = await cli(capsys, "export", "--game", game_id, "--database-url", database_url)
    assert code == 0, err
    assert out.endswith("}\n") and not out.endswith("\n\n")
    path = tmp_path / "game.jsonl"
    path.write_text(out, encoding="utf-8")

    code, out, err = await cli(capsys, "verify", "--record", str(path), "--json")
    assert code == 0, out
    assert json.loads(out)["winner"] == winner

    code, out, _ = await cli(capsys, "export", "--game", game_id, "--json", "--database-url", database_url)
    assert code == 0
    exported = json.loads(out)
    assert exported["record"] == path.read_text(encoding="utf-8")
    assert exported["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


async def test_an_imported_record_exports_byte_for_byte(
    capsys: pytest.CaptureFixture[str], database_url: str
) -> None:
    imported = await import_file(capsys, database_url, "classic_uno_catch")

    code, out, _ = await cli(capsys, "export", "--game", imported["game_id"], "--database-url", database_url)

    assert code == 0
    assert out == (RECORDS / "classic_uno_catch.jsonl").read_text(encoding="utf-8")
    code, out, err = await cli(capsys, "export", "--game", "nope", "--database-url", database_url)
    assert (code, out) == (2, "") and "nope" in err


# --- import ----------------------------------------------------------------------------------------------


async def test_an_imported_record_gets_seat_tokens_and_verifies(
    capsys: pytest.CaptureFixture[str], store: EventStore, database_url: str, tmp_path: Path
) -> None:
    name = "classic_wd4_upheld"
    header = read_record((RECORDS / f"{name}.jsonl").read_text(encoding="utf-8")).header
    wanted = expected(name)

    imported = await import_file(capsys, database_url, name)

    game_id = imported["game_id"]
    assert [seat["player"] for seat in imported["seats"]] == list(header.players)
    assert [seat["seat"] for seat in imported["seats"]] == list(range(len(header.players)))
    tokens = [seat["token"] for seat in imported["seats"]]
    assert len(set(tokens)) == len(tokens) and all(len(token) >= 32 for token in tokens)
    for seat, token in enumerate(tokens):  # the store keeps each token's hash for its seat
        assert await store.seat_for_token(game_id, token_hash(token)) == seat
    assert imported["valid"] is wanted["valid"] and imported["violations"] == 0

    code, out, _ = await cli(capsys, "verify", "--game", game_id, "--json", "--database-url", database_url)
    assert code == 0
    report = json.loads(out)
    assert (report["origin"], report["valid"], report["chain"]["valid"]) == ("imported", True, True)
    assert [(r["position"], r["kind"], r["verdict"]) for r in report["rulings"]] == [
        (r["line"] + 1, r["kind"], r["verdict"]) for r in wanted["rulings"]
    ]

    # Another game's record (another text: a comment line more) goes into the tournament it names.
    another = tmp_path / f"{name}.jsonl"
    another.write_text((RECORDS / f"{name}.jsonl").read_text(encoding="utf-8") + "# another game\n")
    code, out, _ = await cli(
        capsys, "import", str(another), "--tournament", "cup", "--database-url", database_url
    )
    assert code == 0
    assert "shown once" in out
    [game_line] = [line for line in out.splitlines() if line.startswith("imported ")]
    second = game_line.split(" as game ")[1].split(":")[0]
    assert second != game_id
    assert (await store.game(second)) is not None
    assert [g.game_id for g in await store.list_games(tournament_id="cup")] == [second]
    for player in header.players:
        assert f" {player}: " in out


MALFORMED = (
    '{"record": "uno-game-record/1", "variant": "classic", "players": ["ann", "bob"], "options": {}}\n'
    '{"round": 1, "dealer": "bob", "hands": {"ann": ["R1"], "bob": ["G2"]}, "first": ["R9"]}\n'
    '{"by": "ann", "play": "R10"}\n'
)


async def test_a_malformed_record_is_not_imported(
    capsys: pytest.CaptureFixture[str], store: EventStore, database_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(MALFORMED, encoding="utf-8")

    code, out, err = await cli(capsys, "import", str(path), "--database-url", database_url)

    assert (code, out) == (2, "")
    assert err.startswith(f"uno-audit import: {path}: line 3: ") and "R10" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert await store.list_games() == []

    path.write_bytes(MALFORMED.encode() + b'{"by": "bob", "play": "\xff"}\n')
    code, out, err = await cli(capsys, "import", str(path), "--json", "--database-url", database_url)
    assert (code, out) == (2, "")
    assert f"{path}: line 4: not UTF-8" in err

    code, out, err = await cli(
        capsys, "import", str(tmp_path / "missing.jsonl"), "--database-url", database_url
    )
    assert (code, out) == (2, "")
    assert err.startswith("uno-audit import: cannot read ")
    assert await store.list_games() == []


# --- adjudicate ------------------------------------------------------------------------------------------


async def test_adjudicating_a_recorded_catch_agrees_with_the_offline_verifier(
    capsys: pytest.CaptureFixture[str], database_url: str
) -> None:
    name = "classic_uno_catch"
    [catch] = [r for r in offline(name)["rulings"] if r["kind"] == "uno-catch"]
    assert catch == {**catch, **expected(name)["rulings"][0]}  # the file's own expectation
    game_id = (await import_file(capsys, database_url, name))["game_id"]
    position = catch["line"] + 1

    argv = ("adjudicate", "catch", "--game", game_id, "--position", str(position), "--json")
    code, out, err = await cli(capsys, *argv, "--database-url", database_url)

    assert code == 0, err
    found = json.loads(out)
    assert (found["position"], found["recorded"]) == (position, True)
    ruling = found["ruling"]
    assert (ruling["verdict"], ruling["rule"], ruling["by"], ruling["against"]) == (
        catch["verdict"],
        catch["rule"],
        catch["by"],
        catch["against"],
    )
    assert ruling["evidence"]["hand"] == catch["evidence"]["hand"]
    assert ruling["evidence"]["window_opened"] == catch["evidence"]["window_opened"] + 1

    code, out, _ = await cli(capsys, *argv[:-1], "--database-url", database_url)
    assert code == 0
    assert f"verdict: {catch['verdict']}" in out and f"rule: {catch['rule']}" in out
    assert f"by {catch['by']} against {catch['against']}" in out
    assert f"hand: {' '.join(catch['evidence']['hand'])}" in out
    assert f"window opened: position {catch['evidence']['window_opened'] + 1}" in out


async def test_adjudicating_a_recorded_challenge_agrees_with_the_offline_verifier(
    capsys: pytest.CaptureFixture[str], database_url: str
) -> None:
    name = "classic_wd4_upheld"
    [challenge] = offline(name)["rulings"]
    wanted = expected(name)["rulings"][0]
    assert (challenge["line"], challenge["verdict"]) == (wanted["line"], wanted["verdict"])
    game_id = (await import_file(capsys, database_url, name))["game_id"]
    position = challenge["line"] + 1

    code, out, err = await cli(
        capsys,
        "adjudicate",
        "challenge",
        "--game",
        game_id,
        "--position",
        str(position),
        "--json",
        "--database-url",
        database_url,
    )

    assert code == 0, err
    found = json.loads(out)
    assert found["recorded"] is True and found["position"] == position
    ruling = found["ruling"]
    assert (ruling["verdict"], ruling["rule"]) == (challenge["verdict"], challenge["rule"])
    assert wanted["matching_contains"] in ruling["evidence"]["matching"]
    assert ruling["evidence"]["played_at"] == challenge["evidence"]["played_at"] + 1


async def test_a_filed_dispute_shows_in_the_report_at_its_positions(
    capsys: pytest.CaptureFixture[str], store: EventStore, database_url: str
) -> None:
    name = "classic_uno_catch"
    text = (RECORDS / f"{name}.jsonl").read_text(encoding="utf-8")
    [catch] = offline(name)["rulings"]
    game_id = (await import_file(capsys, database_url, name))["game_id"]
    imported_version = len(text.splitlines()) + 1  # the import entry, then one entry per line
    dispute = await Auditor(store).file_dispute(
        game_id,
        seat=1,
        kind=DisputeKind.UNO_CATCH,
        position=catch["line"] + 1,
        by=None,
        target=0,
        claim="caught before anyone played",
        command_id=str(uuid.uuid4()),
        request_hash=b"dispute",
    )

    code, out, _ = await cli(capsys, "verify", "--game", game_id, "--json", "--database-url", database_url)
    assert code == 0
    [shown] = json.loads(out)["disputes"]
    assert (shown["dispute_id"], shown["filed_at"], shown["position"]) == (
        dispute.filed.dispute_id,
        imported_version + 1,
        catch["line"] + 1,
    )
    assert (shown["filer"], shown["by"], shown["target"], shown["status"]) == ("bob", None, "ann", "open")

    code, out, _ = await cli(capsys, "verify", "--game", game_id, "--database-url", database_url)
    assert code == 0
    [line] = [line for line in out.splitlines() if dispute.filed.dispute_id in line]
    assert f"filed at position {imported_version + 1} by bob" in line
    assert f"uno-catch of ann at position {catch['line'] + 1}" in line and line.endswith("open")


def _seat_options(by: int | None, target: int | None) -> list[str]:
    return [
        *(["--by", str(by)] if by is not None else []),
        *(["--target", str(target)] if target is not None else []),
    ]


@pytest.mark.parametrize(
    ("kind", "position", "holds"),
    [
        (
            "challenge",
            disputed.CATCH_PLAY_POSITION,
            f"no Wild Draw Four waits for an answer at position {disputed.CATCH_PLAY_POSITION} "
            "(none has been played)",
        ),
        ("catch", 3, "nobody holds a single card at position 3 (cards held: ann 7, bob 7, cy 7)"),
    ],
    ids=["challenge", "catch"],
)
async def test_adjudicate_where_nothing_of_its_kind_can_be_judged_is_refused(
    capsys: pytest.CaptureFixture[str],
    database_url: str,
    tmp_path: Path,
    kind: str,
    position: int,
    holds: str,
) -> None:
    # The catch record holds no Wild Draw Four; at its round start (position 3) everyone holds seven
    # cards. A verdict there ("failed": the challenger takes six) would judge a move that could not be made.
    game_id = await _import_text(
        capsys, database_url, tmp_path / "catch.jsonl", disputed.catch_record("penalty")
    )
    argv = (
        "adjudicate",
        kind,
        "--game",
        game_id,
        "--position",
        str(position),
        "--database-url",
        database_url,
    )

    for json_output in ((), ("--json",)):
        code, out, err = await cli(capsys, *argv, *json_output)

        assert (code, out) == (2, "")
        assert err == f"uno-audit adjudicate: nothing to judge: {holds}\n"


async def _adjudicated(
    capsys: pytest.CaptureFixture[str], url: str, game_id: str, kind: str, position: int, options: list[str]
) -> tuple[dict[str, Any], str]:
    """``adjudicate KIND`` at ``position`` as JSON and as text."""
    argv = ("adjudicate", kind, "--game", game_id, "--position", str(position), *options)
    code, out, err = await cli(capsys, *argv, "--json", "--database-url", url)
    assert code == 0, err
    found: dict[str, Any] = json.loads(out)
    code, text, err = await cli(capsys, *argv, "--database-url", url)
    assert code == 0, err
    return found, text


def _assert_adjudicated(
    found: dict[str, Any], text: str, game_id: str, kind: str, position: int, judged: disputed.Judged
) -> None:
    ruling = found["ruling"]
    assert (found["position"], found["recorded"], found["mismatch"]) == (
        position,
        judged.recorded,
        judged.mismatch,
    )
    assert (ruling["kind"], ruling["by"], ruling["against"], ruling["verdict"], ruling["rule"]) == (
        kind,
        judged.by,
        judged.against,
        judged.verdict,
        judged.rule,
    )
    assert ruling.get("reason") == judged.reason
    lines = text.splitlines()
    if judged.recorded:
        assert lines[0] == f"game {game_id}: the {kind} recorded at position {position}"
    else:
        assert lines[0] == (
            f"game {game_id}: the {kind} described, as made right after position {position} "
            "(none is recorded there)"
        )
    assert (lines[1] == f"  NOT AS NAMED: {judged.mismatch}") is (judged.mismatch is not None)
    why = f" ({judged.reason})" if judged.reason else ""
    assert f"  verdict: {judged.verdict}{why}" in lines and f"  rule: {judged.rule}" in lines
    assert f"  by {judged.by} against {judged.against}" in lines


async def _import_text(capsys: pytest.CaptureFixture[str], url: str, path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    code, out, err = await cli(capsys, "import", str(path), "--json", "--database-url", url)
    assert code == 0, err
    game_id: str = json.loads(out)["game_id"]
    return game_id


@pytest.mark.parametrize(
    ("by", "target"), list(disputed.CATCH_NAMES.values()), ids=list(disputed.CATCH_NAMES)
)
@pytest.mark.parametrize("verdict", ["penalty", "no-penalty"])
@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "not-recorded"])
async def test_adjudicate_catch_judges_the_recorded_catch_and_describes_only_when_none_is(
    capsys: pytest.CaptureFixture[str],
    database_url: str,
    tmp_path: Path,
    recorded: bool,
    verdict: str,
    by: int | None,
    target: int | None,
) -> None:
    game_id = await _import_text(
        capsys, database_url, tmp_path / "catch.jsonl", disputed.catch_record(verdict)
    )
    position = disputed.CATCH_POSITION if recorded else disputed.CATCH_PLAY_POSITION

    found, text = await _adjudicated(
        capsys, database_url, game_id, "catch", position, _seat_options(by, target)
    )

    names = next(name for name, named in disputed.CATCH_NAMES.items() if named == (by, target))
    judged = disputed.judged_catch(verdict, recorded, names)
    _assert_adjudicated(found, text, game_id, "uno-catch", position, judged)


@pytest.mark.parametrize("by", list(disputed.CHALLENGE_NAMES.values()), ids=list(disputed.CHALLENGE_NAMES))
@pytest.mark.parametrize("verdict", ["upheld", "failed"])
@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "not-recorded"])
async def test_adjudicate_challenge_judges_the_recorded_challenge_and_describes_only_when_none_is(
    capsys: pytest.CaptureFixture[str],
    database_url: str,
    tmp_path: Path,
    recorded: bool,
    verdict: str,
    by: int | None,
) -> None:
    text = disputed.challenge_record(verdict)
    game_id = await _import_text(capsys, database_url, tmp_path / "challenge.jsonl", text)
    position = disputed.CHALLENGE_POSITION if recorded else disputed.WD4_POSITION

    found, text = await _adjudicated(
        capsys, database_url, game_id, "challenge", position, _seat_options(by, None)
    )

    names = next(name for name, named in disputed.CHALLENGE_NAMES.items() if named == by)
    judged = disputed.judged_challenge(verdict, recorded, names)
    _assert_adjudicated(found, text, game_id, "wd4-challenge", position, judged)


async def test_the_report_says_which_catch_a_dispute_ruling_judged(
    capsys: pytest.CaptureFixture[str], store: EventStore, database_url: str, tmp_path: Path
) -> None:
    game_id = await _import_text(
        capsys, database_url, tmp_path / "catch.jsonl", disputed.catch_record("penalty")
    )
    auditor = Auditor(store)
    rulings = {}
    for position in (disputed.CATCH_POSITION, disputed.CATCH_PLAY_POSITION):
        filed = await auditor.file_dispute(
            game_id,
            seat=disputed.ANN,
            kind=DisputeKind.UNO_CATCH,
            position=position,
            by=disputed.CY,
            target=None,
            claim="cy caught me, not bob",
            command_id=str(uuid.uuid4()),
            request_hash=str(position).encode(),
        )
        ruled = await auditor.rule_on_dispute(
            game_id, filed.filed.dispute_id, note="", command_id=str(uuid.uuid4()), request_hash=b"rule"
        )
        rulings[position] = ruled

    code, out, err = await cli(capsys, "verify", "--game", game_id, "--database-url", database_url)

    assert code == 0, err
    recorded, described = (
        next(line.strip() for line in out.splitlines() if rulings[position].filed.dispute_id in line)
        for position in (disputed.CATCH_POSITION, disputed.CATCH_PLAY_POSITION)
    )
    at = disputed.CATCH_POSITION
    assert recorded.endswith(
        f"by ann: uno-catch by cy at position {at}: 'cy caught me, not bob'; ruled at position "
        f"{rulings[at].ruled_at} on the uno-catch recorded at position {at} [uno.catch]: the dispute "
        "turns on what the table applied, which the record does not say: bob's catch of ann earned the UNO "
        "penalty by the rules; had the table done otherwise, remedy: ann takes the UNO penalty now; NOT AS "
        f"NAMED: by cy named, but the uno-catch recorded at position {at} is by bob against ann"
    )
    at = disputed.CATCH_PLAY_POSITION
    assert described.endswith(
        f"ruled at position {rulings[at].ruled_at} on the uno-catch described, as made right after position "
        f"{at} (none is recorded there) [uno.catch]: the dispute is upheld: cy's catch of ann would have "
        "earned the UNO penalty by the rules; remedy: ann takes the UNO penalty now"
    )


async def test_an_adjudication_that_cannot_be_made_exits_2(
    capsys: pytest.CaptureFixture[str], database_url: str
) -> None:
    game_id = (await import_file(capsys, database_url, "classic_uno_catch"))["game_id"]
    lines = len((RECORDS / "classic_uno_catch.jsonl").read_text(encoding="utf-8").splitlines())
    past_the_end = lines + 2  # the import entry, then one position per line

    for extra in (["--position", str(past_the_end)], ["--position", "2", "--by", "5"]):
        code, out, err = await cli(
            capsys, "adjudicate", "catch", "--game", game_id, *extra, "--database-url", database_url
        )
        assert (code, out) == (2, "")
        assert err.startswith("uno-audit adjudicate: ") and err.count("\n") == 1

    code, out, err = await cli(
        capsys, "adjudicate", "catch", "--game", "nope", "--position", "1", "--database-url", database_url
    )
    assert (code, out) == (2, "") and "nope" in err
    with pytest.raises(SystemExit) as exited:
        main(["adjudicate", "steal", "--game", game_id, "--position", "1", "--database-url", database_url])
    assert exited.value.code == 2


@pytest.mark.parametrize("command", ["migrate", "project", "rebuild"])
def test_the_read_model_commands_without_a_database_say_where_to_find_one(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert main([command, "--data-dir", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"uno-audit {command}: no database: ") and err.count("\n") == 1, err


async def test_without_a_url_the_commands_use_the_embedded_database_serve_keeps(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, embedded_dir: Path
) -> None:
    from service.ops.embedded import embedded_database

    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # where the embedded server keeps its runtime files
    data_dir = embedded_dir / "uno-audit-data"
    _, serving = embedded_database(data_dir)  # what `uno-audit serve` without a URL keeps running
    capsys.readouterr()  # as root it warns which folders it opens: not the commands' output
    try:
        record = str(RECORDS / "classic_wd4_upheld.jsonl")
        code, out, err = await cli(capsys, "import", record, "--json", "--data-dir", str(data_dir))
        assert code == 0, err
        game_id = json.loads(out)["game_id"]
        code, out, err = await cli(capsys, "verify", "--game", game_id, "--json", "--data-dir", str(data_dir))
        assert code == 0, err
        assert json.loads(out)["origin"] == "imported"
        # The read-model commands too: migrate, and a rebuild as the embedded server's owner.
        code, out, err = await cli(capsys, "migrate", "--data-dir", str(data_dir))
        assert code == 0 and json.loads(out)["login"] == "uno_audit_service", err
        code, out, err = await cli(capsys, "rebuild", "--data-dir", str(data_dir))
        assert code == 0 and json.loads(out)["quarantined"] == [], err
    finally:
        serving.cleanup()
