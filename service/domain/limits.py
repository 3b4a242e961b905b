"""Every bound on what a client may send, in one place, and the checks that enforce them.

A request is checked against these before anything is decided or stored; a value out of bounds is
:class:`~service.domain.errors.InvalidInput` naming its field. The proto comments and docs/grpc.md's
"Limits" table state the same numbers, and the gRPC server's message size limits are derived from them.
docs/DESIGN.md ("Bounds on what a client sends") says why each bound.
"""

from __future__ import annotations

import re
from typing import Any

from service.domain.errors import InvalidInput
from service.rules.setup import MAX_NAME as MAX_NAME
from service.rules.setup import MAX_PLAYERS as MAX_PLAYERS

#: Game, command, dispute ids, tournament ids and page tokens: 1 to 128 printable characters.
MAX_ID = 128
# MAX_NAME: a player's name, 1 to 64 printable characters, not only spaces; MAX_PLAYERS: players at a
# table, 2 to 10 (both :mod:`service.rules.setup`, where the rules check them).
#: A card or colour token, such as ``W+4``, ``R7`` or ``B`` (the longest real one is a few characters).
MAX_TOKEN = 16
#: Cards in a fixed deck (every deck of every rule set has fewer; a fixed deck may repeat none).
MAX_DECK = 256
#: Option keys in ``CreateGame.options``, the length of a key, and how deep a value may nest.
MAX_OPTIONS = 32
MAX_OPTION_KEY = 64
MAX_OPTION_DEPTH = 4
#: A dispute's claim and a ruling's note.
MAX_CLAIM = 2000
#: A game record (``ImportRecord``, ``verify --record``): 4 MiB of UTF-8, JSON nested at most 16 deep.
MAX_RECORD_BYTES = 4 * 1024 * 1024
MAX_JSON_DEPTH = 16
#: Games per ``ListGames`` page.
MAX_PAGE = 500
#: Receipts per ``CheckReceipts`` or ``VerifyGame`` request, and the size of one (a signed note).
MAX_RECEIPTS = 10_000
MAX_RECEIPT_BYTES = 64 * 1024
#: The largest request the server receives: a full-size record with room for the other fields. Replies
#: are held to gRPC's default 4 MiB, the limit every client has unless told otherwise: lists are paged.
MAX_REQUEST_BYTES = MAX_RECORD_BYTES + 64 * 1024
MAX_REPLY_BYTES = 4 * 1024 * 1024


def printable(value: str) -> bool:
    """No control, format, separator or unassigned characters (``str.isprintable``), spaces allowed."""
    return value.isprintable()


def identifier(value: str, field: str) -> str:
    """A required id: 1 to :data:`MAX_ID` printable characters."""
    if not value or len(value) > MAX_ID or not printable(value):
        raise InvalidInput(field, f"must be 1 to {MAX_ID} printable characters")
    return value


def optional_identifier(value: str, field: str) -> str | None:
    """An id that may be left empty (``None`` then)."""
    return identifier(value, field) if value else None


def token(value: str, field: str) -> str:
    """A card or colour token, before it is parsed: short and printable, so that an error may quote it."""
    if len(value) > MAX_TOKEN or not printable(value):
        raise InvalidInput(field, f"must be at most {MAX_TOKEN} printable characters")
    return value


def free_text(value: str, field: str, *, required: bool) -> str:
    """A claim or a note: at most :data:`MAX_CLAIM` characters, printable apart from line breaks."""
    if required and not value.strip():
        raise InvalidInput(field, f"say it in 1 to {MAX_CLAIM} characters")
    if len(value) > MAX_CLAIM or not printable(value.replace("\n", " ").replace("\t", " ")):
        raise InvalidInput(field, f"at most {MAX_CLAIM} characters, printable apart from line breaks")
    return value


def page_size(value: int, default: int) -> int:
    """A page size: 0 means ``default``, else 1 to :data:`MAX_PAGE`."""
    size = value or default
    if not 1 <= size <= MAX_PAGE:
        raise InvalidInput("page_size", f"must be 1 to {MAX_PAGE}")
    return size


def count(items: Any, field: str, most: int) -> None:
    """A repeated field of at most ``most`` items."""
    if len(items) > most:
        raise InvalidInput(field, f"at most {most} items, not {len(items)}")


def receipts(items: Any, field: str) -> list[str]:
    """Signed checkpoints sent back to be checked: at most :data:`MAX_RECEIPTS`, each non-empty and at
    most :data:`MAX_RECEIPT_BYTES` of UTF-8 (whether each is a valid note is the check's to say)."""
    count(items, field, MAX_RECEIPTS)
    for index, note in enumerate(items):
        if not note or len(note.encode()) > MAX_RECEIPT_BYTES:
            raise InvalidInput(f"{field}[{index}]", f"a receipt is 1 to {MAX_RECEIPT_BYTES} bytes")
    return list(items)


_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")


def json_depth(text: str) -> int:
    """How deep the arrays and objects of the JSON ``text`` nest (0 for a scalar), without parsing it: a
    parser would recurse once per level, and a hostile document of a few kilobytes nests thousands
    deep."""
    depth = deepest = 0
    for bracket in _BRACKETS.finditer(_STRINGS.sub("", text)):
        depth += 1 if bracket.group() in "[{" else -1
        deepest = max(deepest, depth)
    return deepest
