"""``uno-audit dispute file|list|rule``: disputes and rulings over gRPC, on a running server.

AuditService's FileDispute, ListDisputes and RuleOnDispute, each argument checked first as the server
checks it (:mod:`service.domain.limits`). The token, a seat's or the adjudicator's, comes from a file or
the environment, never from the command line. A refusal is one line on standard error, its status and
``ErrorInfo.reason``, and exits as its domain error does (:func:`service.domain.errors.exit_code`); a
server that does not answer exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.cli.admin import read_secret
from service.cli.audit import DISPUTE_KINDS
from service.cli.console import print_json
from service.cli.exits import EXIT_INVALID, EXIT_OK, EXIT_USAGE, Refused
from service.cli.options import (
    MAX_SEAT,
    Parser,
    bounded,
    from_environment,
    game_id,
    host_port,
    tls_client_options,
)
from service.cli.serve import ADMIN_TOKEN_ENV
from service.domain import limits
from service.domain.entries import DisputeKind
from service.domain.errors import InvalidInput, RuleViolation, ServiceError, exit_code

if TYPE_CHECKING:  # the command line imports gRPC only in the commands that use it
    import grpc

    from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb
    from uno_audit_client.gen.uno.audit.v1.audit_pb2_grpc import AuditServiceStub

SEAT_TOKEN_ENV = "UNO_AUDIT_SEAT_TOKEN"
#: The server's address when ``--server`` is not given: set once, as ``DATABASE_URL`` is.
SERVER_ENV = "UNO_AUDIT_SERVER"
#: The largest position a request carries (``int64`` on the wire).
MAX_POSITION = 2**63 - 1
#: Options that would put a token on the command line, where every user of the machine sees it.
SECRET_OPTIONS = ("--token", "--seat-token", "--admin-token")

#: An action's work: the stub, the token, whether it is the admin's, the arguments; its exit status.
Action = Callable[["AuditServiceStub", str, bool, argparse.Namespace], Awaitable[int]]


def _checked(check: Callable[[str, str], object], field: str) -> Callable[[str], str]:
    """An argument type that checks its text as the server checks ``field`` (a :mod:`limits` check)."""

    def parse(text: str) -> str:
        try:
            check(text, field)
        except InvalidInput as bad:
            raise argparse.ArgumentTypeError(bad.detail) from None
        return text

    return parse


def _claim(text: str, field: str) -> str:
    return limits.free_text(text, field, required=True)


def _note(text: str, field: str) -> str:
    return limits.free_text(text, field, required=False)


def register(commands: Any) -> None:  # argparse's sub-parsers action: its type is private to typeshed
    """The ``dispute`` command and its ``file``, ``list`` and ``rule``."""
    dispute = commands.add_parser("dispute", help="file, list and rule on disputes, on a running server")
    actions = dispute.add_subparsers(dest="action", required=True, parser_class=type(dispute))
    address, connection = _connection_options()
    parents = [address, connection]

    file = actions.add_parser(
        "file", parents=parents, help="file a dispute about the catch or challenge at a position"
    )
    file.add_argument("kind", choices=sorted(DISPUTE_KINDS), help="catch or challenge")
    file.add_argument("--game", type=game_id, required=True, metavar="ID", help="the game's id")
    file.add_argument(
        "--position",
        type=bounded(1, MAX_POSITION),
        required=True,
        metavar="N",
        help="the position in the game's log (line n of an imported record is position n + 1)",
    )
    file.add_argument(
        "--claim",
        type=_checked(_claim, "claim"),
        required=True,
        metavar="TEXT",
        help=f"the filer's own words: 1 to {limits.MAX_CLAIM} characters, printable apart from line breaks",
    )
    seat = bounded(0, MAX_SEAT)
    file.add_argument(
        "--by", type=seat, metavar="SEAT", help="the catcher (challenger) the dispute names, if any"
    )
    file.add_argument(
        "--target", type=seat, metavar="SEAT", help="the seat that should (not) have been caught, if any"
    )
    file.add_argument(
        "--as-seat", type=seat, metavar="SEAT", help="the seat the adjudicator files for (a seat: its own)"
    )

    listing = actions.add_parser(
        "list", parents=parents, help="a game's disputes (without --game: every game's, the adjudicator)"
    )
    listing.add_argument("--game", type=game_id, metavar="ID", help="the game's id; none: every game's")
    listing.add_argument("--status", choices=("open", "ruled"), help="only open or only ruled disputes")

    rule = actions.add_parser("rule", parents=parents, help="rule on an open dispute (the adjudicator)")
    rule.add_argument("--game", type=game_id, required=True, metavar="ID", help="the game's id")
    rule.add_argument(
        "--dispute",
        type=_checked(limits.identifier, "dispute_id"),
        required=True,
        metavar="ID",
        help="the dispute's id, as `dispute file` or `dispute list` printed it",
    )
    rule.add_argument(
        "--note",
        type=_checked(_note, "note"),
        default="",
        metavar="TEXT",
        help=f"the adjudicator's remark, at most {limits.MAX_CLAIM} characters (default: none)",
    )

    work: tuple[tuple[argparse.ArgumentParser, Action], ...] = (
        (file, _file),
        (listing, _list),
        (rule, _rule),
    )
    for sub, action in work:
        assert isinstance(sub, Parser)
        sub.environment += address.environment  # the parent's action is the sub-parser's own
        if sub is not listing:
            sub.add_argument(
                "--command-id",
                type=_checked(limits.identifier, "command_id"),
                metavar="ID",
                help="the request's id (1-128 printable characters): the same again is carried out once; "
                "none: a new one, printed",
            )
        sub.add_argument("--json", action="store_true", help="print one JSON object")
        sub.set_defaults(run=lambda args, action=action: _run(args, action))


def _connection_options() -> tuple[Parser, Parser]:
    """The parents every action shares: the server's address (also from ``$UNO_AUDIT_SERVER``), and its
    TLS, the deadline and the token. Only the address has a variable: serve's ``$UNO_AUDIT_TLS_CERT`` is
    a server's certificate, not one for a client to present."""
    address = Parser(add_help=False)
    address.add_argument(
        "--server", type=host_port, default="127.0.0.1:50051", metavar="HOST:PORT", help="the server"
    )
    from_environment(address, {"server": SERVER_ENV})
    connection = Parser(add_help=False)
    connection.add_argument(
        "--timeout", type=bounded(1, 3_600), default=10, metavar="S", help="give up after S seconds"
    )
    tls_client_options(connection)
    tokens = connection.add_mutually_exclusive_group()
    tokens.add_argument(
        "--seat-token-file",
        type=Path,
        metavar="PATH",
        help=f"a file holding a seat token (as `import` printed it); none: ${SEAT_TOKEN_ENV}, if set",
    )
    tokens.add_argument(
        "--admin-token-file",
        type=Path,
        metavar="PATH",
        help=f"a file holding the adjudicator's token; none: ${ADMIN_TOKEN_ENV}, if no seat token is set",
    )
    # Refused with a message of their own: argparse would otherwise take them for abbreviations of the
    # token file options (and read the token as a path), or echo the token as an unknown argument.
    for option in SECRET_OPTIONS:
        connection.add_argument(option, help=argparse.SUPPRESS)
    return address, connection


def _token(args: argparse.Namespace) -> tuple[str, bool]:
    """The token the calls present, and whether it is the admin's: a file given, else a seat token in the
    environment, else the admin's. :class:`Refused` when there is none or it is unfit."""
    for option in SECRET_OPTIONS:
        if getattr(args, option.lstrip("-").replace("-", "_")) is not None:
            raise Refused(
                f"{option} is not accepted (every user of the machine sees it in `ps`): put the token in a "
                f"file named by --seat-token-file or --admin-token-file, or in ${SEAT_TOKEN_ENV} or "
                f"${ADMIN_TOKEN_ENV}"
            )
    admin = args.admin_token_file is not None
    if args.seat_token_file is not None:
        token = read_secret("seat token", args.seat_token_file, SEAT_TOKEN_ENV)
    elif admin:
        token = read_secret("admin token", args.admin_token_file, ADMIN_TOKEN_ENV)
    else:
        token = read_secret("seat token", None, SEAT_TOKEN_ENV)
        if token is None:
            admin, token = True, read_secret("admin token", None, ADMIN_TOKEN_ENV)
    if token is None:
        raise Refused(
            f"no token: a seat's in --seat-token-file or ${SEAT_TOKEN_ENV}, or the adjudicator's in "
            f"--admin-token-file or ${ADMIN_TOKEN_ENV}"
        )
    if not (token.isascii() and token.isprintable()):
        raise Refused("the token must be printable ASCII (it travels in a gRPC header)")
    return token, admin


def _run(args: argparse.Namespace, action: Action) -> int:
    """The action over one channel; any failure one line on standard error, and its exit status."""
    # gRPC's core would add lines of its own about a refused connection: the one line here says it.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    import grpc

    from service.api.tls import TLSError, channel_credentials
    from uno_audit_client import new_command_id, open_channel
    from uno_audit_client.gen.uno.audit.v1 import audit_pb2_grpc

    command = f"uno-audit dispute {args.action}"
    if args.action != "list" and args.command_id is None:
        args.command_id = new_command_id()
    try:
        token, admin = _token(args)
        credentials = channel_credentials(args.tls_ca, args.tls_cert, args.tls_key)
    except TLSError as error:
        print(f"{command}: {error}", file=sys.stderr)
        return EXIT_USAGE
    except Refused as refused:
        print(f"{command}: {refused}", file=sys.stderr)
        return refused.code

    async def session() -> int:
        async with open_channel(args.server, credentials) as channel:
            stub = audit_pb2_grpc.AuditServiceStub(channel)  # type: ignore[no-untyped-call]
            return await action(stub, token, admin, args)

    try:
        return asyncio.run(session())
    except Refused as refused:
        print(f"{command}: {refused}", file=sys.stderr)
        return refused.code
    except grpc.aio.AioRpcError as error:
        print(f"{command}: {_failure(error, args)}", file=sys.stderr)
        refusal = refusal_of(error)
        return EXIT_INVALID if refusal is None else exit_code(refusal)


def refusal_of(error: grpc.aio.AioRpcError) -> ServiceError | None:
    """The service's refusal a failed call carries, as the domain error the server raised (its kind by
    the status code, as :data:`service.api.errors.CODES` maps them); ``None`` for a call the service did
    not refuse: no answer, our deadline, or a failure of its own (INTERNAL)."""
    from service.api.errors import CODES, DOMAIN
    from uno_audit_client import error_info

    info = error_info(error)
    # FAILED_PRECONDITION is a broken rule or a state unfit for the request: a refusal either way.
    kinds = {code: kind for kind, code in CODES.items() if kind is not RuleViolation}
    kind = kinds.get(error.code())
    if info is None or info.domain != DOMAIN or kind is None:
        return None
    message, metadata = error.details() or "", dict(info.metadata)
    if kind is InvalidInput:
        field = metadata.pop("field", "request")
        return InvalidInput(field, message.removeprefix(f"{field}: "), reason=info.reason, **metadata)
    return kind(message, reason=info.reason, **metadata)


def _failure(error: grpc.aio.AioRpcError, args: argparse.Namespace) -> str:
    """One line: the status, ``ErrorInfo.reason`` and message; where a resend may succeed, the command id
    to resend with (the server carries out a command id once)."""
    import grpc

    from uno_audit_client import error_info, retryable

    info = error_info(error)
    status = error.code().name if info is None else f"{error.code().name} ({info.reason})"
    line = f"{status}: {' '.join((error.details() or '').split())}"
    if info is None:
        line = f"no answer from {args.server}: {line}"
    command_id = getattr(args, "command_id", None)
    # ABORTED is GAME_BUSY here (AuditService takes no expected version): the same request may pass.
    if command_id is not None and (retryable(error) or error.code() == grpc.StatusCode.ABORTED):
        line += f"; resend with --command-id {command_id} (it is carried out once)"
    return line


async def _file(stub: AuditServiceStub, token: str, admin: bool, args: argparse.Namespace) -> int:
    from uno_audit_client import bearer
    from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb

    if admin and args.as_seat is None:
        raise Refused("the adjudicator files for a seat: give --as-seat SEAT")
    request = apb.FileDisputeRequest(
        game_id=args.game,
        command_id=args.command_id,
        kind=DISPUTE_KINDS[args.kind].name,  # the enum's name, as audit.proto spells it
        position=args.position,
        claim=args.claim,
    )
    for field in ("by", "target", "as_seat"):
        if getattr(args, field) is not None:
            setattr(request, field, getattr(args, field))
    filed = await stub.FileDispute(request, metadata=bearer(token), timeout=args.timeout)
    _show(filed, args)
    return EXIT_OK


async def _rule(stub: AuditServiceStub, token: str, admin: bool, args: argparse.Namespace) -> int:
    from uno_audit_client import bearer
    from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb

    request = apb.RuleOnDisputeRequest(
        game_id=args.game, dispute_id=args.dispute, command_id=args.command_id, note=args.note
    )
    ruled = await stub.RuleOnDispute(request, metadata=bearer(token), timeout=args.timeout)
    _show(ruled, args)
    return EXIT_OK


async def _list(stub: AuditServiceStub, token: str, admin: bool, args: argparse.Namespace) -> int:
    from uno_audit_client import bearer
    from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb

    if args.game is None and not admin:
        raise Refused("a seat token lists its own game's disputes: give --game")
    found: list[apb.Dispute] = []
    page = ""
    while True:  # every page, each as large as the server gives
        request = apb.ListDisputesRequest(
            game_id=args.game or "", status=args.status or "", page_size=limits.MAX_PAGE, page_token=page
        )
        reply = await stub.ListDisputes(request, metadata=bearer(token), timeout=args.timeout)
        found += reply.disputes
        page = reply.next_page_token
        if not page:
            break
    if args.json:
        shown = [dispute_json(dispute) for dispute in found]
        print_json({"game_id": args.game, "status": args.status, "disputes": shown})
        return EXIT_OK
    if not found:
        which = f"{args.status} " if args.status else ""
        print(f"no {which}disputes" + (f" in game {args.game}" if args.game else ""))
    for dispute in found:
        print("\n".join(dispute_lines(dispute)))
    return EXIT_OK


def _show(dispute: apb.Dispute, args: argparse.Namespace) -> None:
    """The dispute a filing or a ruling answered with, and the command id it was sent with."""
    if args.json:
        print_json({"command_id": args.command_id, "dispute": dispute_json(dispute)})
    else:
        print("\n".join(dispute_lines(dispute, args.command_id)))


def _kind(value: int) -> str:
    """A ``DisputeKind`` of audit.proto by the name the log and the reports give it (``uno-catch``)."""
    from uno_audit_client.gen.uno.audit.v1 import audit_pb2 as apb

    try:
        return DisputeKind[apb.DisputeKind.Name(value)].value
    except (KeyError, ValueError):  # a kind newer than this command: shown as its number
        return str(value)


def dispute_lines(dispute: apb.Dispute, command_id: str | None = None) -> list[str]:
    """A dispute for a person, in the words of ``verify --game``'s report (seats by number: a reply does
    not name the players)."""
    kind = _kind(dispute.kind)
    sent = f" (command id {command_id})" if command_id is not None else ""
    named = "".join(
        f" {word} seat {getattr(dispute, field)}"
        for word, field in (("by", "by"), ("of", "target"))
        if dispute.HasField(field)
    )
    lines = [
        f"dispute {dispute.dispute_id} of game {dispute.game_id}{sent}",
        f"  filed at position {dispute.filed_at} by seat {dispute.seat}: {kind}{named} at position "
        f"{dispute.position}: {dispute.claim!r}",
    ]
    if not dispute.HasField("ruling"):
        return [*lines, "  open"]
    ruling = dispute.ruling
    judged = (
        f"the {kind} recorded at position {ruling.position}"
        if ruling.recorded
        else f"the {kind} described, as made right after position {ruling.position} (none is recorded there)"
    )
    why = f" ({ruling.reason})" if ruling.reason else ""
    lines.append(
        f"  ruled at position {dispute.ruled_at} on {judged}: {ruling.verdict} [{ruling.rule}]{why}, "
        f"by {ruling.by or '-'} against {ruling.against or '-'}"
    )
    if ruling.mismatch:
        lines.append(f"  NOT AS NAMED: {ruling.mismatch}")
    if dispute.note:
        lines.append(f"  note: {dispute.note!r}")
    return lines


def dispute_json(dispute: apb.Dispute) -> dict[str, Any]:
    """A dispute for a program: the reply's fields, an unset one ``None``, kinds by the log's names."""
    from google.protobuf import json_format

    ruling = None
    if dispute.HasField("ruling"):
        given = dispute.ruling
        ruling = {
            "kind": _kind(given.kind),
            "verdict": given.verdict,
            "rule": given.rule,
            "reason": given.reason or None,
            "by": given.by or None,
            "against": given.against or None,
            "position": given.position,
            "recorded": given.recorded,
            "evidence": _whole(json_format.MessageToDict(given.evidence)),
            "mismatch": given.mismatch or None,
        }
    return {
        "dispute_id": dispute.dispute_id,
        "game_id": dispute.game_id,
        "filed_at": dispute.filed_at,
        "ruled_at": dispute.ruled_at or None,
        "seat": dispute.seat,
        "kind": _kind(dispute.kind),
        "position": dispute.position,
        "by": dispute.by if dispute.HasField("by") else None,
        "target": dispute.target if dispute.HasField("target") else None,
        "claim": dispute.claim,
        "status": dispute.status,
        "ruling": ruling,
        "note": dispute.note or None,
    }


def _whole(value: Any) -> Any:
    """A ``Struct``'s value with its whole numbers as integers: a ``Struct`` holds doubles, and the
    evidence's numbers are positions and counts."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _whole(item) for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_whole(item) for item in value]
    return value
