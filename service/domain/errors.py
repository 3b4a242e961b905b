"""The service's one error vocabulary: what a refusal *is*, free of any transport.

The application (the command handler, the auditor) and the API's own checks raise these; each edge maps
them once: :func:`service.api.errors.status_of` to a gRPC status with a ``google.rpc.ErrorInfo`` detail,
:func:`exit_code` to the command line's exit status. Every error carries a human ``message``, a stable
machine ``reason`` (``ErrorInfo.reason``: a rule id for a rule violation) and string ``metadata`` a
client may act on (the field, the actual version, the game id…). Nothing reaches a client as UNKNOWN.
"""

from __future__ import annotations

from collections.abc import Mapping


class ServiceError(Exception):
    """A refusal: ``message`` for people, ``reason`` and ``metadata`` for programs."""

    #: The reason when none more precise is given (the kind of error, as ``ErrorInfo.reason`` names it).
    default_reason = "ERROR"

    def __init__(self, message: str, *, reason: str | None = None, **metadata: str) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason or self.default_reason
        self.metadata: Mapping[str, str] = metadata

    def __str__(self) -> str:
        return self.message


class InvalidInput(ServiceError):
    """A malformed request: ``field`` names what is wrong (the message starts with it). ``reason`` is
    ``INVALID_ARGUMENT`` unless a rule id says more (``setup.options`` for an option the rules refuse)."""

    default_reason = "INVALID_ARGUMENT"

    def __init__(self, field: str, message: str, *, reason: str | None = None, **metadata: str) -> None:
        super().__init__(f"{field}: {message}", reason=reason, field=field, **metadata)
        self.field = field
        self.detail = message


class NotFound(ServiceError):
    """No such game, dispute or record."""

    default_reason = "NOT_FOUND"


class RuleViolation(ServiceError):
    """A command the rules do not allow; ``reason`` is the rule id of docs/RULES.md."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"{rule}: {message}", reason=rule, rule=rule)
        self.rule = rule
        self.detail = message


class Precondition(ServiceError):
    """The request is well formed but the game is not in a state to take it (an imported game takes no
    commands, a dispute already ruled, a log that cannot be read as a record)."""

    default_reason = "FAILED_PRECONDITION"


class Conflict(ServiceError):
    """The game moved on meanwhile: a version the client expected, or too many concurrent writers."""

    default_reason = "ABORTED"


class AlreadyExists(ServiceError):
    """A retried creation: the game exists (``metadata["game_id"]``); its seat tokens are not shown again."""

    default_reason = "ALREADY_EXISTS"


class Unavailable(ServiceError):
    """Not now, maybe later: the read models lag, the database cannot be reached. Safe to retry."""

    default_reason = "UNAVAILABLE"


class ResourceExhausted(ServiceError):
    """Not now: the caller (or the server) holds as many of something as it may at once (``WatchGame``
    streams); ``metadata["limit"]`` says how many. Retry after closing one."""

    default_reason = "RESOURCE_EXHAUSTED"


class DataLoss(ServiceError):
    """The store contradicts itself: the command ledger and the events disagree about a command id (a row
    was edited or deleted behind the service's back). The command is not carried out, and retrying does
    not help; ``uno-audit verify --game`` names the rows."""

    default_reason = "DATA_LOSS"


class Unauthenticated(ServiceError):
    """No credentials, or credentials that do not identify the caller for this game."""

    default_reason = "UNAUTHENTICATED"


class PermissionDenied(ServiceError):
    """The caller is known but may not do this (only the adjudicator may)."""

    default_reason = "PERMISSION_DENIED"


#: The command line's exit status for a refusal of any kind (docs/cli.md: "2 refused"): the request cannot be
#: carried out as given; statuses 0 and 1 are the verdicts (valid, invalid).
EXIT_REFUSED = 2


def exit_code(error: ServiceError) -> int:
    """The exit status the command line ends with for ``error`` (every refusal is :data:`EXIT_REFUSED`)."""
    return EXIT_REFUSED
