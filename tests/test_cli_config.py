"""The command line's configuration: every ``serve`` option from its environment variable (and docs/cli.md's
table of them), ``--version``, help with defaults for every option, ``--log-format``/``--log-level``,
progress bars only on a terminal, and ``verify --record -``.

Expected values come from the tests' own literals, docs/cli.md, the installed package's metadata or the
offline verifier run on the same file, never from the output under test.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import io
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from projections.rebuild import PHASES, rebuild
from service.api.server import configure_logging
from service.cli.main import build_parser, main
from service.rules.options import Variant
from service.store import EventStore
from tests.audit.support import store_simulated
from tests.terminal import open_terminal, read_until_closed

UNO_AUDIT = Path(sys.executable).with_name("uno-audit")
CLI_DOC = Path(__file__).parent.parent / "docs" / "cli.md"
RECORD = Path(__file__).parent / "data" / "records" / "classic_wd4_upheld.jsonl"
SIMULATE = ("simulate", "--variant", "classic", "--players", "2", "--games", "3")


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def options(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    """The options of ``parser`` a user can give: not --help, not hidden, not positional."""
    for action in parser._actions:
        if action.option_strings and argparse.SUPPRESS not in (action.help, action.default):
            yield action


def long_name(action: argparse.Action) -> str:
    return max(action.option_strings, key=len)


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No variable of the machine's own (a CI's DATABASE_URL) decides a default here (the tests' own
    UNO_AUDIT_TEST_DATABASE_URL is no option's)."""
    for name in list(os.environ):
        if name == "DATABASE_URL" or (
            name.startswith("UNO_AUDIT_") and not name.startswith("UNO_AUDIT_TEST_")
        ):
            monkeypatch.delenv(name)
    return monkeypatch


# --- serve's options from the environment -------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "text", "dest", "value"),
    [
        ("UNO_AUDIT_LISTEN", "0.0.0.0:6000", "listen", "0.0.0.0:6000"),
        ("DATABASE_URL", "postgresql://svc@db/uno", "database_url", "postgresql://svc@db/uno"),
        ("UNO_AUDIT_MIGRATE_URL", "postgresql://uno@db/uno", "migrate_url", "postgresql://uno@db/uno"),
        ("UNO_AUDIT_DATA_DIR", "/srv/uno", "data_dir", Path("/srv/uno")),
        ("UNO_AUDIT_ADMIN_TOKEN_FILE", "/run/secrets/t", "admin_token_file", Path("/run/secrets/t")),
        ("UNO_AUDIT_DATABASE_TIMEOUT", "17", "database_timeout", 17),
        (
            "UNO_AUDIT_SERVICE_PASSWORD_FILE",
            "/run/secrets/p",
            "service_password_file",
            Path("/run/secrets/p"),
        ),
        ("UNO_AUDIT_NO_PROJECTOR", "true", "no_projector", True),
        ("UNO_AUDIT_NO_PROJECTOR", "ON", "no_projector", True),
        ("UNO_AUDIT_NO_PROJECTOR", "0", "no_projector", False),
        ("UNO_AUDIT_LOG_FORMAT", "console", "log_format", "console"),
        ("UNO_AUDIT_LOG_LEVEL", "debug", "log_level", "debug"),
    ],
)
def test_a_serve_option_takes_its_default_from_its_variable(
    clean_environment: pytest.MonkeyPatch, variable: str, text: str, dest: str, value: object
) -> None:
    before = getattr(build_parser().parse_args(["serve"]), dest)
    clean_environment.setenv(variable, text)

    after = getattr(build_parser().parse_args(["serve"]), dest)

    assert after == value and type(after) is type(value)
    assert before != value or dest == "no_projector"  # the variable made the difference (or kept "off")


def test_a_flag_wins_over_its_variable_which_is_then_not_read(clean_environment: pytest.MonkeyPatch) -> None:
    clean_environment.setenv("UNO_AUDIT_LISTEN", "0.0.0.0:6000")
    clean_environment.setenv("UNO_AUDIT_DATABASE_TIMEOUT", "soon")  # bad, but overridden

    args = build_parser().parse_args(["serve", "--listen", "127.0.0.1:7000", "--database-timeout", "3"])

    assert (args.listen, args.database_timeout) == ("127.0.0.1:7000", 3)


def test_an_empty_variable_counts_as_unset(clean_environment: pytest.MonkeyPatch) -> None:
    for name in ("UNO_AUDIT_LISTEN", "UNO_AUDIT_DATABASE_TIMEOUT", "DATABASE_URL", "UNO_AUDIT_NO_PROJECTOR"):
        clean_environment.setenv(name, "")

    args = build_parser().parse_args(["serve"])

    assert (args.listen, args.database_timeout, args.database_url, args.no_projector) == (
        "127.0.0.1:50051",
        5,
        None,
        False,
    )


def test_every_serve_option_has_a_variable(clean_environment: pytest.MonkeyPatch) -> None:
    """Options added to serve later get one too: the mechanism walks the parser, not a list."""
    serve = subcommands(build_parser())["serve"]
    given = {long_name(action): variable for action, variable in serve.environment}

    assert set(given) == {long_name(action) for action in options(serve)}
    for option, variable in given.items():
        expected = (
            "DATABASE_URL"
            if option == "--database-url"
            else "UNO_AUDIT_" + option[2:].upper().replace("-", "_")
        )
        assert variable == expected
    assert "--admin-token" not in given  # refused on the command line; the token itself is a variable


@pytest.mark.parametrize(
    ("variable", "text", "says"),
    [
        ("UNO_AUDIT_DATABASE_TIMEOUT", "soon", "'soon' is not a whole number"),
        ("UNO_AUDIT_DATABASE_TIMEOUT", "0", "0 is not between 1 and 600"),
        ("UNO_AUDIT_LISTEN", "localhost", "HOST:PORT, not 'localhost'"),
        ("UNO_AUDIT_LISTEN", "localhost:70000", "HOST:PORT"),
        ("UNO_AUDIT_LOG_FORMAT", "xml", "'xml' is not one of json, console"),
        ("UNO_AUDIT_LOG_LEVEL", "loud", "'loud' is not one of debug, info, warning, error"),
        ("UNO_AUDIT_NO_PROJECTOR", "maybe", "'maybe' is neither on"),
    ],
)
def test_a_bad_variable_is_one_line_naming_it_and_exit_2(
    clean_environment: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variable: str,
    text: str,
    says: str,
) -> None:
    clean_environment.setenv(variable, text)

    with pytest.raises(SystemExit) as stopped:
        main(["serve"])

    assert stopped.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith(f"uno-audit serve: error: ${variable}: "), err
    assert says in err, err


def test_a_bad_flag_is_still_named_as_the_flag(
    clean_environment: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["serve", "--listen", "localhost"])

    assert stopped.value.code == 2
    assert (
        capsys.readouterr().err == "uno-audit serve: error: argument --listen: HOST:PORT, not 'localhost'\n"
    )


def test_serve_runs_with_what_the_variables_say(
    clean_environment: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """In-process ``serve``: the variables reach the command, which refuses before it starts anything."""
    missing = tmp_path / "no-such-token"
    clean_environment.setenv("UNO_AUDIT_ADMIN_TOKEN_FILE", str(missing))
    assert main(["serve"]) == 2
    assert capsys.readouterr().err == f"uno-audit serve: cannot read the admin token file {missing}: " + (
        "No such file or directory\n"
    )

    clean_environment.delenv("UNO_AUDIT_ADMIN_TOKEN_FILE")
    clean_environment.setenv("UNO_AUDIT_MIGRATE_URL", "postgresql://uno@db.invalid/uno")
    assert main(["serve"]) == 2
    assert capsys.readouterr().err == (
        "uno-audit serve: --migrate-url goes with --database-url, the service's own login\n"
    )

    clean_environment.delenv("UNO_AUDIT_MIGRATE_URL")
    clean_environment.setenv("UNO_AUDIT_REQUIRE_SYNC_STANDBY", "1")
    assert main(["serve"]) == 2
    assert capsys.readouterr().err == (
        "uno-audit serve: --require-sync-standby goes with --database-url: "
        "an embedded database has no standby\n"
    )


def _readme_table() -> dict[str, tuple[str, str]]:
    """docs/cli.md's Configuration table: option -> (variable, default cell)."""
    text = CLI_DOC.read_text(encoding="utf-8")
    section = text.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(--[a-z-]+)` \| `([A-Z_]+)` \| (.+?) \|$", section, flags=re.MULTILINE)
    table = {option: (variable, default) for option, variable, default in rows}
    assert len(table) == len(rows), "an option listed twice"
    return table


def test_the_readme_table_lists_exactly_serves_options(clean_environment: pytest.MonkeyPatch) -> None:
    serve = subcommands(build_parser())["serve"]
    table = _readme_table()

    assert {option: variable for option, (variable, _) in table.items()} == {
        long_name(action): variable for action, variable in serve.environment
    }
    for action in options(serve):
        _, default = table[long_name(action)]
        if action.default is None:
            assert default.startswith("none"), (long_name(action), default)
        elif action.default is False:
            assert default == "off", (long_name(action), default)
        else:
            assert default.startswith(f"`{action.default}`"), (long_name(action), default)


# --- --version and help ------------------------------------------------------------------------------


def test_version_prints_the_installed_packages_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])

    assert stopped.value.code == 0
    version = importlib.metadata.version("uno-audit")
    assert capsys.readouterr().out == f"uno-audit {version} (rules engine: pure)\n"  # the work tree's


def _help_blocks(help_text: str) -> dict[str, str]:
    """Each option's entry in a parser's help, by its long name, whitespace collapsed."""
    blocks: dict[str, list[str]] = {}
    current: list[str] = []
    for line in help_text.splitlines():
        if line.startswith("  -"):
            current = blocks.setdefault(max(re.findall(r"--?[a-z][a-z-]*", line.split("  ")[1]), key=len), [])
        elif not line.startswith("   "):
            current = []
        current.append(line)
    return {name: " ".join(" ".join(lines).split()) for name, lines in blocks.items()}


def test_every_option_of_every_command_has_help_and_shows_its_default(
    clean_environment: pytest.MonkeyPatch,
) -> None:
    parser = build_parser()
    commands = subcommands(parser)
    assert {"simulate", "verify", "serve", "bots", "project", "rebuild", "import", "export"} <= set(commands)
    # A command's own actions too (`dispute file`, `tournament show`).
    actions = [
        (f"{name} {action}", nested)
        for name, sub in commands.items()
        if any(isinstance(given, argparse._SubParsersAction) for given in sub._actions)
        for action, nested in subcommands(sub).items()
    ]
    assert {"dispute file", "dispute list", "dispute rule"} <= {name for name, _ in actions}
    for name, sub in [("uno-audit", parser), *commands.items(), *actions]:
        blocks = _help_blocks(sub.format_help())
        for action in options(sub):
            option = long_name(action)
            assert action.help, f"{name} {option} has no help"
            shown = blocks[option]
            assert len(shown) > len(" ".join(action.option_strings)) + 10, f"{name} {option}: {shown}"
            if action.default is not None and action.default is not False:
                assert "default" in shown, f"{name} {option} does not show its default: {shown}"
                assert str(action.default) in shown, f"{name} {option}: {shown}"


def test_help_never_shows_a_variables_value(clean_environment: pytest.MonkeyPatch) -> None:
    """A database URL may hold a password: the help names the variable, never its value."""
    clean_environment.setenv("DATABASE_URL", "postgresql://svc:hunter2-secret@db/uno")
    clean_environment.setenv("UNO_AUDIT_MIGRATE_URL", "postgresql://uno:hunter2-secret@db/uno")
    parser = build_parser()

    for sub in [parser, *subcommands(parser).values()]:
        assert "hunter2" not in sub.format_help()


# --- logging -------------------------------------------------------------------------------------------


def test_console_logging_at_a_level(capsys: pytest.CaptureFixture[str]) -> None:
    """(conftest's autouse fixture puts logging back afterwards.)"""
    configure_logging("console", "warning")
    log = structlog.get_logger("uno_audit.test")
    log.info("not shown")
    log.warning("store slow", latency_ms=812)
    logging.getLogger("psycopg.pool").warning("error connecting in %r", "uno-audit-store")
    configure_logging()  # serve's own bare call keeps the command line's choice
    logging.getLogger("psycopg.pool").info("not shown either")

    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2, lines
    assert "not shown" not in "".join(lines)
    for line in lines:
        with pytest.raises(json.JSONDecodeError):
            json.loads(line)
    assert "store slow" in lines[0] and "latency_ms=812" in lines[0] and "warning" in lines[0]
    assert "error connecting in 'uno-audit-store'" in lines[1]


def test_json_logging_at_debug(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("json", "debug")
    structlog.get_logger("uno_audit.test").debug("a detail", n=1)
    logging.getLogger("grpc").debug("a library's detail")

    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert (first["event"], first["level"], first["n"]) == ("a detail", "debug", 1)
    assert (second["event"], second["level"]) == ("a library's detail", "debug")


def test_project_takes_the_logging_options(clean_environment: pytest.MonkeyPatch) -> None:
    args = build_parser().parse_args(
        ["project", "--database-url", "postgresql://x", "--log-format", "console", "--log-level", "error"]
    )
    assert (args.log_format, args.log_level) == ("console", "error")


# --- verify --record - ---------------------------------------------------------------------------------


def _stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def test_verify_reads_the_record_from_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", "--record", str(RECORD), "--json"]) == 0
    from_file = capsys.readouterr().out
    _stdin(monkeypatch, RECORD.read_bytes())

    assert main(["verify", "--record", "-", "--json"]) == 0

    out, err = capsys.readouterr()
    assert (out, err) == (from_file, "")
    assert json.loads(out)["valid"] is True


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"not a record\n", "uno-audit verify: standard input: line 1: "),
        (b'{"record": "uno-game-record/1"}\n\xff\n', "uno-audit verify: standard input: line 2: not UTF-8"),
    ],
)
def test_a_bad_record_on_stdin_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], data: bytes, says: str
) -> None:
    _stdin(monkeypatch, data)

    assert main(["verify", "--record", "-"]) == 2

    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(says), err


def test_verify_record_dash_reads_the_processes_stdin() -> None:
    done = subprocess.run(
        [str(UNO_AUDIT), "verify", "--record", "-", "--json"],
        input=RECORD.read_bytes(),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, b"")
    assert json.loads(done.stdout)["valid"] is True


# --- progress bars only on a terminal --------------------------------------------------------------------


def on_a_terminal(*argv: str) -> tuple[int, bytes, str]:
    """``uno-audit ARGV`` with standard error on a pseudo-terminal 100 columns wide: exit status, standard
    output, and what the terminal showed."""
    terminal, child_end = open_terminal()
    try:
        process = subprocess.Popen([str(UNO_AUDIT), *argv], stdout=subprocess.PIPE, stderr=child_end)
        os.close(child_end)
        child_end = -1
        shown = read_until_closed(terminal).decode(errors="replace")
        printed, _ = process.communicate(timeout=120)
    finally:
        os.close(terminal)
        if child_end >= 0:
            os.close(child_end)
    return process.returncode, printed, shown


def on_a_pipe(*argv: str) -> tuple[int, bytes, bytes]:
    done = subprocess.run([str(UNO_AUDIT), *argv], capture_output=True, timeout=120, check=False)
    return done.returncode, done.stdout, done.stderr


def test_simulate_draws_progress_on_a_terminal_only() -> None:
    code, printed, shown = on_a_terminal(*SIMULATE, "--json")
    assert code == 0, shown
    assert "games:" in shown and "3/3" in shown, shown
    assert json.loads(printed)["games"] == 3

    code, printed, complaints = on_a_pipe(*SIMULATE, "--json")
    assert (code, complaints) == (0, b"")
    assert json.loads(printed)["games"] == 3


async def test_verify_all_draws_progress_on_a_terminal_only(store: EventStore, database_url: str) -> None:
    ids = {await store_simulated(store, variant, seed=3) for variant in (Variant.CLASSIC, Variant.SONIC)}

    code, printed, shown = await asyncio.to_thread(
        on_a_terminal, "verify", "--all", "--json", "--database-url", database_url
    )
    assert code == 0, shown
    assert "verifying:" in shown and "2/2" in shown, shown
    assert {row["game_id"] for row in json.loads(printed)["reports"]} == ids

    code, printed, complaints = await asyncio.to_thread(
        on_a_pipe, "verify", "--all", "--json", "--database-url", database_url
    )
    assert (code, complaints) == (0, b"")
    assert json.loads(printed)["games"] == 2


async def test_rebuild_draws_its_phases_on_a_terminal_only(store: EventStore, database_url: str) -> None:
    await store_simulated(store, Variant.CLASSIC, seed=5)

    code, printed, shown = await asyncio.to_thread(on_a_terminal, "rebuild", "--database-url", database_url)
    assert code == 0, shown
    assert "rebuild:" in shown and f"{len(PHASES)}/{len(PHASES)}" in shown and "swap done" in shown, shown
    assert json.loads(printed)["events"] > 0

    code, printed, complaints = await asyncio.to_thread(on_a_pipe, "rebuild", "--database-url", database_url)
    assert (code, complaints) == (0, b"")
    assert json.loads(printed)["events"] > 0


async def test_rebuild_names_each_phase_as_it_ends(store: EventStore, database_url: str) -> None:
    await store_simulated(store, Variant.CLASSIC, seed=5)
    ended: list[str] = []

    report = await rebuild(database_url, workers=1, on_phase=ended.append)

    assert ended == list(PHASES) == ["prepare", "bulk", "catch-up", "swap"]
    assert list(report.phases) == ended
