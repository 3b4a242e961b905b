"""``uno-audit dispute file|list|rule`` against a real server on a real PostgreSQL: a seat files, the
adjudicator lists and rules, and the log holds exactly that; a seat that rules is PERMISSION_DENIED, an
unknown game NOT_FOUND, each one line on standard error and the domain error's exit status; garbage
arguments exit 2 before anything is sent; a resend with the same command id answers the first result; a
server that cannot be reached is one line, at once, exit 1.

Each test imports docs/examples/disputed.jsonl (bob's catch of ann at position 11, after the window had
closed: the arbiter's walk-through) as a game of its own, on one server for the module.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import pytest_asyncio
import structlog

from service.api.server import RunningServer
from service.cli.main import main
from service.domain.catalogue import decode_entry
from service.domain.entries import DisputeFiled, DisputeRuled
from service.domain.errors import NotFound, PermissionDenied, Unauthenticated, exit_code
from tests.api.shared_server import shared_address, shared_channel, shared_server  # noqa: F401
from tests.api.support import ADMIN, ADMIN_TOKEN, new_id
from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb
from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]

DOCS = Path(__file__).resolve().parents[2] / "docs"
RECORD, ARBITER = DOCS / "examples" / "disputed.jsonl", DOCS / "arbiter.md"
CATCH = 11  # bob's catch of ann, in log positions
CLAIM = "bob caught me after he had played his G1"
ANN, BOB = 0, 1


class Imported:
    """The record imported as a game of the test's own: its id and a file holding each seat's token."""

    def __init__(self, reply: apb.ImportRecordReply, folder: Path) -> None:
        self.game_id = reply.game_id
        self.version = reply.version
        self.token_files = []
        for seat in reply.seats:
            path = folder / f"seat-{seat.seat}.token"
            path.write_text(seat.token + "\n", encoding="utf-8")
            self.token_files.append(str(path))


@pytest_asyncio.fixture(loop_scope="module")
async def game(channel: object, tmp_path: Path) -> Imported:
    audit = audit_pb2_grpc.AuditServiceStub(channel)  # type: ignore[no-untyped-call]
    # A game of its own for each test, on the module's server: the same text is imported once, so each
    # copy differs by a comment line.
    command_id = new_id()
    record = f"{RECORD.read_text(encoding='utf-8')}# {command_id}\n"
    reply = await audit.ImportRecord(
        apb.ImportRecordRequest(command_id=command_id, record=record), metadata=ADMIN
    )
    return Imported(reply, tmp_path)


@pytest.fixture(autouse=True)
def environment(address: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server by ``$UNO_AUDIT_SERVER``, the adjudicator's token in ``$UNO_AUDIT_ADMIN_TOKEN`` (as the
    walk-through has them), no seat token of the machine's own."""
    monkeypatch.setenv("UNO_AUDIT_SERVER", address)
    monkeypatch.setenv("UNO_AUDIT_ADMIN_TOKEN", ADMIN_TOKEN)
    monkeypatch.delenv("UNO_AUDIT_SEAT_TOKEN", raising=False)
    # The server runs in this process: its log lines would be among the command's output (the suite's
    # autouse fixture puts logging back afterwards).
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())


async def dispute(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], list[str]]:
    """``uno-audit dispute ARGS`` in-process (in a thread: the server answers on this loop): its exit
    status and its lines of standard output and error."""
    code = await asyncio.to_thread(main, ["dispute", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


async def audit_entries(server: RunningServer, game_id: str) -> list[object]:
    """The dispute entries the game's log holds, in order."""
    rows = await server.store.read_stream(game_id)
    entries = [decode_entry(row.type, row.payload) for row in rows if row.type.startswith("Dispute")]
    return [entry for entry in entries if isinstance(entry, DisputeFiled | DisputeRuled)]


def refusal(err: list[str], action: str, status: str, reason: str) -> str:
    """The one line of a refusal: the action, the status and its ErrorInfo.reason; its message."""
    [line] = err
    head = f"uno-audit dispute {action}: {status} ({reason}): "
    assert line.startswith(head), line
    return line.removeprefix(head)


async def test_a_seat_files_the_adjudicator_lists_and_rules(
    game: Imported, server: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    seat = ["--seat-token-file", game.token_files[ANN]]
    args = ["--game", game.game_id, "--position", str(CATCH), "--claim", CLAIM, "--command-id", "ann-1"]
    code, out, err = await dispute(capsys, "file", "catch", *args, *seat)
    assert (code, err) == (0, [])
    head, filed, status = out
    dispute_id = head.split()[1]
    assert head == f"dispute {dispute_id} of game {game.game_id} (command id ann-1)"
    filed_at = game.version + 1
    assert filed == f"  filed at position {filed_at} by seat 0: uno-catch at position {CATCH}: {CLAIM!r}"
    assert status == "  open"

    code, listed, err = await dispute(capsys, "list", "--game", game.game_id)
    assert (code, listed, err) == (0, [head.removesuffix(" (command id ann-1)"), filed, status], [])
    code, none_ruled, _ = await dispute(capsys, "list", "--game", game.game_id, "--status", "ruled")
    assert (code, none_ruled) == (0, [f"no ruled disputes in game {game.game_id}"])

    note = "the penalty is withdrawn"
    rule = ["--game", game.game_id, "--dispute", dispute_id, "--note", note, "--command-id", "ruling-1"]
    code, out, err = await dispute(capsys, "rule", *rule)
    assert (code, err) == (0, [])
    assert out == [
        f"dispute {dispute_id} of game {game.game_id} (command id ruling-1)",
        filed,
        f"  ruled at position {filed_at + 1} on the uno-catch recorded at position {CATCH}: no-penalty "
        "[uno.catch.invalid] (window closed at position 10), by bob against ann",
        f"  note: {note!r}",
    ]

    code, out, _ = await dispute(capsys, "list", "--game", game.game_id, "--status", "ruled", "--json")
    assert code == 0
    [shown] = json.loads("\n".join(out))["disputes"]
    assert {
        k: shown[k] for k in ("dispute_id", "filed_at", "ruled_at", "seat", "kind", "status", "note")
    } == {
        "dispute_id": dispute_id,
        "filed_at": filed_at,
        "ruled_at": filed_at + 1,
        "seat": ANN,
        "kind": "uno-catch",
        "status": "ruled",
        "note": note,
    }
    ruling = shown["ruling"]
    assert (ruling["verdict"], ruling["rule"], ruling["by"], ruling["against"]) == (
        "no-penalty",
        "uno.catch.invalid",
        "bob",
        "ann",
    )
    assert ruling["evidence"]["window_closed"] == 10  # a position, not the Struct's 10.0

    # What the commands said is what the log holds.
    filing, ruled = await audit_entries(server, game.game_id)
    assert isinstance(filing, DisputeFiled) and isinstance(ruled, DisputeRuled)
    assert (filing.dispute_id, filing.seat, filing.position, filing.claim) == (dispute_id, ANN, CATCH, CLAIM)
    assert (ruled.dispute_id, ruled.verdict, ruled.note) == (dispute_id, "no-penalty", note)


async def test_the_adjudicator_files_for_a_seat_naming_the_catch(
    game: Imported, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--game", game.game_id, "--position", str(CATCH), "--claim", CLAIM, "--as-seat", str(ANN)]
    code, out, err = await dispute(capsys, "file", "catch", *args, "--by", "1", "--target", "0", "--json")
    assert (code, err) == (0, [])
    shown = json.loads("\n".join(out))
    assert shown["command_id"]  # made for it, and printed
    assert {k: shown["dispute"][k] for k in ("seat", "by", "target", "status", "ruling")} == {
        "seat": ANN,
        "by": BOB,
        "target": ANN,
        "status": "open",
        "ruling": None,
    }
    # The adjudicator must say whose dispute it files: refused before anything is sent.
    code, out, err = await dispute(capsys, "file", "catch", *args[:-2])
    assert (code, out) == (2, [])
    assert err == ["uno-audit dispute file: the adjudicator files for a seat: give --as-seat SEAT"]


async def test_a_seat_that_rules_is_permission_denied(
    game: Imported, server: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--game", game.game_id, "--position", str(CATCH), "--claim", CLAIM]
    code, out, _ = await dispute(capsys, "file", "catch", *args, "--seat-token-file", game.token_files[ANN])
    assert code == 0
    dispute_id = out[0].split()[1]

    bob = ["--seat-token-file", game.token_files[BOB]]
    code, out, err = await dispute(capsys, "rule", "--game", game.game_id, "--dispute", dispute_id, *bob)
    assert out == []
    refusal(err, "rule", "PERMISSION_DENIED", "PERMISSION_DENIED")
    assert code == exit_code(PermissionDenied("")) == 2
    # docs/arbiter.md quotes the line.
    assert f"`{err[0]}`" in " ".join(ARBITER.read_text(encoding="utf-8").split())
    [filing] = await audit_entries(server, game.game_id)  # nothing ruled
    assert isinstance(filing, DisputeFiled)

    # A seat lists its own game's disputes, not every game's.
    code, out, err = await dispute(capsys, "list", *bob)
    assert (code, out) == (2, [])
    assert err == ["uno-audit dispute list: a seat token lists its own game's disputes: give --game"]
    code, out, _ = await dispute(capsys, "list", "--game", game.game_id, *bob)
    assert (code, out[0]) == (0, f"dispute {dispute_id} of game {game.game_id}")


async def test_an_unknown_game_or_dispute_is_not_found(
    game: Imported, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--position", str(CATCH), "--claim", CLAIM]
    code, out, err = await dispute(capsys, "file", "catch", "--game", "no-such-game", *args, "--as-seat", "0")
    assert out == []
    assert "no-such-game" in refusal(err, "file", "NOT_FOUND", "UNKNOWN_GAME")
    assert code == exit_code(NotFound("")) == 2

    # A seat token is a seat's of its own game only.
    seat = ["--seat-token-file", game.token_files[ANN]]
    code, out, err = await dispute(capsys, "file", "catch", "--game", "no-such-game", *args, *seat)
    refusal(err, "file", "UNAUTHENTICATED", "UNAUTHENTICATED")
    assert code == exit_code(Unauthenticated("")) == 2

    code, out, err = await dispute(capsys, "rule", "--game", game.game_id, "--dispute", "no-such-dispute")
    assert out == []
    refusal(err, "rule", "NOT_FOUND", "UNKNOWN_DISPUTE")
    assert code == 2

    # Beyond the game's log: the server's check, which needs the game.
    code, _, err = await dispute(
        capsys,
        "file",
        "catch",
        "--game",
        game.game_id,
        "--position",
        "99",
        "--as-seat",
        "0",
        "--claim",
        CLAIM,
    )
    assert code == 2
    assert refusal(err, "file", "INVALID_ARGUMENT", "INVALID_ARGUMENT").startswith("position: ")


async def test_a_resend_with_the_same_command_id_answers_the_first_result(
    game: Imported, server: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    seat = ["--seat-token-file", game.token_files[ANN]]
    args = ["--game", game.game_id, "--position", str(CATCH), "--claim", CLAIM]
    code, first, _ = await dispute(capsys, "file", "catch", *args, *seat)
    assert code == 0
    command_id = first[0].removesuffix(")").split("(command id ")[1]  # the one it made, printed
    code, again, err = await dispute(capsys, "file", "catch", *args, *seat, "--command-id", command_id)
    assert (code, again, err) == (0, first, [])
    dispute_id = first[0].split()[1]

    rule = ["--game", game.game_id, "--dispute", dispute_id, "--command-id", "ruling-1"]
    code, ruled, _ = await dispute(capsys, "rule", *rule)
    assert code == 0
    code, again, err = await dispute(capsys, "rule", *rule)
    assert (code, again, err) == (0, ruled, [])
    # The filing resent after the ruling answers the dispute as it stands: ruled.
    code, later, _ = await dispute(capsys, "file", "catch", *args, *seat, "--command-id", command_id)
    assert (code, later[:2]) == (0, first[:2]) and later[2].startswith("  ruled at position ")
    assert [type(entry) for entry in await audit_entries(server, game.game_id)] == [
        DisputeFiled,
        DisputeRuled,
    ]

    # A new ruling of a ruled dispute (a new command id) is refused, naming where the first one is.
    code, _, err = await dispute(capsys, "rule", "--game", game.game_id, "--dispute", dispute_id)
    assert code == 2
    refusal(err, "rule", "FAILED_PRECONDITION", "ALREADY_RULED")


GARBAGE = {
    "position 0": ["file", "catch", "--game", "g", "--position", "0", "--claim", "c", "--as-seat", "0"],
    "position not a number": ["file", "catch", "--game", "g", "--position", "11th", "--claim", "c"],
    "position past int64": ["file", "catch", "--game", "g", "--position", str(2**63), "--claim", "c"],
    "unknown kind": ["file", "penalty", "--game", "g", "--position", "1", "--claim", "c"],
    "seat 10": ["file", "catch", "--game", "g", "--position", "1", "--claim", "c", "--by", "10"],
    "negative seat": ["file", "catch", "--game", "g", "--position", "1", "--claim", "c", "--as-seat", "-1"],
    "empty claim": ["file", "catch", "--game", "g", "--position", "1", "--claim", " \n "],
    "long claim": ["file", "catch", "--game", "g", "--position", "1", "--claim", "x" * 2001],
    "control in claim": ["file", "catch", "--game", "g", "--position", "1", "--claim", "bell\x07"],
    "no claim": ["file", "catch", "--game", "g", "--position", "1"],
    "empty game id": ["rule", "--game", "", "--dispute", "d"],
    "long game id": ["rule", "--game", "g" * 129, "--dispute", "d"],
    "control in game id": ["list", "--game", "g\x1b[2J"],
    "empty dispute id": ["rule", "--game", "g", "--dispute", ""],
    "long command id": ["rule", "--game", "g", "--dispute", "d", "--command-id", "c" * 129],
    "long note": ["rule", "--game", "g", "--dispute", "d", "--note", "n" * 2001],
    "unknown status": ["list", "--game", "g", "--status", "pending"],
    "timeout 0": ["list", "--game", "g", "--timeout", "0"],
    "server without port": ["list", "--game", "g", "--server", "localhost"],
    "both token files": ["list", "--game", "g", "--seat-token-file", "a", "--admin-token-file", "b"],
    "no action": [],
}


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port bound here but not listening: connections are refused, and nothing else can take it."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        yield bound.getsockname()[1]


@pytest.mark.parametrize("args", GARBAGE.values(), ids=GARBAGE.keys())
async def test_garbage_is_refused_before_anything_is_sent(
    args: list[str], closed_port: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Sent, it would meet no server: exit 1, "no answer". Exit 2 says it was refused here.
    monkeypatch.setenv("UNO_AUDIT_SERVER", f"127.0.0.1:{closed_port}")
    with pytest.raises(SystemExit) as exited:
        await asyncio.to_thread(main, ["dispute", *args])
    assert exited.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines()[-1].startswith("uno-audit dispute"), err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("variable", "value", "words"),
    [
        ("UNO_AUDIT_SEAT_TOKEN", " ", "the seat token in $UNO_AUDIT_SEAT_TOKEN is empty"),
        (
            "UNO_AUDIT_SEAT_TOKEN",
            "t\u00f6ken",
            "the token must be printable ASCII (it travels in a gRPC header)",
        ),
        ("UNO_AUDIT_ADMIN_TOKEN", "", "the admin token in $UNO_AUDIT_ADMIN_TOKEN is empty"),
    ],
)
async def test_an_unfit_token_is_refused_before_anything_is_sent(
    variable: str,
    value: str,
    words: str,
    closed_port: int,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("UNO_AUDIT_SERVER", f"127.0.0.1:{closed_port}")
    monkeypatch.setenv(variable, value)
    code, out, err = await dispute(capsys, "list", "--game", "g")
    assert (code, out, err) == (2, [], [f"uno-audit dispute list: {words}"])
    monkeypatch.delenv("UNO_AUDIT_SEAT_TOKEN", raising=False)
    monkeypatch.delenv("UNO_AUDIT_ADMIN_TOKEN")
    code, _, err = await dispute(capsys, "list", "--game", "g")
    assert code == 2 and err[0].startswith("uno-audit dispute list: no token: ")


async def test_a_server_that_cannot_be_reached_is_one_line_at_once(
    closed_port: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    address = f"127.0.0.1:{closed_port}"
    monkeypatch.setenv("UNO_AUDIT_SERVER", address)
    started = time.monotonic()
    code, out, err = await dispute(capsys, "rule", "--game", "g", "--dispute", "d", "--command-id", "r-1")
    took = time.monotonic() - started
    assert (code, out) == (1, [])
    [line] = err
    assert line.startswith(f"uno-audit dispute rule: no answer from {address}: UNAVAILABLE: "), line
    # Whether the ruling was made is unknown: the same command id carries it out once.
    assert line.endswith("; resend with --command-id r-1 (it is carried out once)"), line
    assert took < 5, took  # a refused connection is not waited out (the deadline is 10 s)


def run_process(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``uno-audit dispute ARGS`` as a process, with only ``env`` of the variables the commands read."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("UNO_AUDIT_") or k.startswith("UNO_AUDIT_TEST")
    }
    return subprocess.run(
        [sys.executable, "-m", "service.cli", "dispute", *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_as_a_process_a_refusal_is_one_line_and_a_token_never_shows(
    game: Imported, address: str
) -> None:
    done = await asyncio.to_thread(
        run_process,
        "rule",
        "--game",
        game.game_id,
        "--dispute",
        "d",
        "--seat-token-file",
        game.token_files[BOB],
        UNO_AUDIT_SERVER=address,
    )
    assert (done.returncode, done.stdout) == (2, "")
    refusal(done.stderr.splitlines(), "rule", "PERMISSION_DENIED", "PERMISSION_DENIED")

    secret = "not-on-the-command-line-0123456789"
    for option in ("--seat-token", "--admin-token", "--token"):
        done = await asyncio.to_thread(run_process, "list", "--game", game.game_id, option, secret)
        assert done.returncode == 2
        [line] = done.stderr.splitlines()
        assert line.startswith(f"uno-audit dispute list: {option} is not accepted"), line
        assert secret not in done.stderr + done.stdout
