"""What a tournament's checkpoint is made of, read from the store: its finished games, in the order
they finished, each as ``(game id, version of its GameEnded, head at that version, variant, players)``
(leaf format 2); an imported record whose game has a winner counts as finished at its last record line.

Heads are recomputed from the events and must equal the stored chain (``ChainBroken`` otherwise); a
tournament no game names is ``UnknownTournament``. docs/DESIGN.md ("Merkle trees and tournaments") says
why only finished games are leaves.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from service.checkpoints import TournamentLeaf
from service.checkpoints.receipts import recomputed_heads
from service.domain.catalogue import decode_entry
from service.domain.entries import RecordImported, RecordLine
from service.store import EventStore, StoredEvent

#: Games are listed a page at a time (the catalogue's own limit).
_PAGE = 500


class ChainBroken(ValueError):
    """A game whose stored chain does not match its events: verify it before anything is signed."""


class UnknownTournament(LookupError):
    """A tournament id that no stored game names."""


@dataclass(frozen=True, slots=True)
class GameHead:
    """A game's current version and head, recomputed from its events."""

    game_id: str
    version: int
    head: bytes


def head_of(game_id: str, rows: list[StoredEvent]) -> GameHead:
    """The game's head at its last version; raises :class:`ChainBroken` if the stored chain differs."""
    heads = recomputed_heads(game_id, rows)
    for version, (row, head) in enumerate(zip(rows, heads, strict=True), start=1):
        if row.version != version or row.hash != head:
            raise ChainBroken(f"game {game_id}: the stored chain breaks at version {version}")
    if not heads:
        raise ChainBroken(f"game {game_id} has no events")
    return GameHead(game_id, len(heads), heads[-1])


async def game_head(store: EventStore, game_id: str) -> GameHead:
    """:func:`head_of` the game's stored stream."""
    return head_of(game_id, await store.read_stream(game_id))


async def tournament_leaves(store: EventStore, tournament_id: str) -> list[TournamentLeaf]:
    """The leaves of ``tournament_id``'s tree: its finished games in the order they finished; raises
    :class:`UnknownTournament` when no game is in the tournament."""
    ended: list[tuple[int, TournamentLeaf]] = []
    after: str | None = None
    while True:
        page = await store.list_games(tournament_id=tournament_id, after=after, limit=_PAGE)
        if after is None and not page:
            raise UnknownTournament(f"no tournament {tournament_id!r}: no game is in it")
        for game in page:
            rows = await store.read_stream(game.game_id)
            head_of(game.game_id, rows)  # the whole chain must hold, not only up to its end
            heads = recomputed_heads(game.game_id, rows)
            end = imported_end(rows)
            if end is not None:
                variant, players = _seats(rows)
                leaf = TournamentLeaf(game.game_id, end, heads[end - 1], variant, players)
                ended.append((rows[end - 1].position, leaf))
                continue
            for row in rows:
                if row.type == "GameEnded":
                    variant, players = _seats(rows)
                    leaf = TournamentLeaf(game.game_id, row.version, heads[row.version - 1], variant, players)
                    ended.append((row.position, leaf))
                    break
        if len(page) < _PAGE:
            break
        after = page[-1].game_id
    return [leaf for _, leaf in sorted(ended, key=lambda item: item[0])]


def imported_end(rows: list[StoredEvent]) -> int | None:
    """An imported game's end: the version of its last record line, if the record's game has a winner
    (the import stores the whole record in one write, so that head never changes); ``None`` for a game
    played on the service, or a record that stops before the end of its game."""
    if not rows or rows[0].type != "RecordImported":
        return None
    try:
        imported = decode_entry(rows[0].type, rows[0].payload)
    except ValueError as bad:  # an edited entry (CatalogueError is a ValueError)
        raise ChainBroken(f"game {rows[0].game_id}: its RecordImported cannot be read: {bad}") from None
    assert isinstance(imported, RecordImported)
    last = 1 + imported.lines
    if imported.outcome.get("winner") is None or last > len(rows):
        return None
    return last


def _seats(rows: list[StoredEvent]) -> tuple[str, tuple[str, ...]]:
    """The game's variant and its players by seat, as its first row holds them (a played game's
    ``GameCreated``) or its record's header line (an imported game's): what a format-2 leaf signs."""
    first = rows[0]
    try:
        if first.type == "GameCreated":
            header = first.payload
        else:  # imported: the header is the record's first line that is neither blank nor a comment
            lines = (decode_entry(row.type, row.payload) for row in rows[1:] if row.type == "RecordLine")
            texts = (line.text.strip() for line in lines if isinstance(line, RecordLine))
            header = json.loads(next(text for text in texts if text and not text.startswith("#")))
        variant, players = header["variant"], header["players"]
        if not isinstance(variant, str) or not isinstance(players, list):
            raise ValueError("no variant and players")
        return variant, tuple(str(name) for name in players)
    except (ValueError, KeyError, StopIteration) as bad:
        raise ChainBroken(f"game {first.game_id}: its players cannot be read: {bad!r}") from None
