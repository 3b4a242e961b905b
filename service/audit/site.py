"""A tournament's public site, as static files: standings and results, each game's public replay (hand
counts only), the signed tournament checkpoint with its verifier keys, every game's inclusion proof and
leaf, and ``check.html``, which recomputes the leaves and proofs and checks the signature in the browser
(and, on a site published again, the previous checkpoint and the consistency proof: :class:`Previous`).

Pure: the command line (:mod:`service.cli.publish`) reads the store and the verifier; this module lays the
files out (:func:`site_files`) and writes them (:func:`write_site`). A game's result is bound to its leaf
by the row it ended at (:class:`GameEnd`): its hash is the leaf's head. docs/arbiter.md ("Publishing a
tournament").
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markupsafe import Markup

from service.audit.pages import content_policy, templates
from service.checkpoints import TournamentLeaf
from service.store import StoredEvent
from service.store.canonical import canonical
from service.store.model import event_hash, row_facts

#: The file that marks a folder as one ``publish`` made: only such a folder (or an empty one) is replaced.
MARKER = ".uno-audit-site"
#: A republished site's previous checkpoint, and the consistency proof from it to the new one.
PREVIOUS, CONSISTENCY = "previous-checkpoint.txt", "consistency.json"


class SiteError(ValueError):
    """A site that cannot be written where asked (the message names the folder and why)."""


@dataclass(frozen=True, slots=True)
class GameEnd:
    """The row a played game's leaf is the head of (its ``GameEnded``), as its hash covers it: what a
    reader needs to recompute the head, and so to bind the game's result to the signed root."""

    hash_version: int
    prev_hash: bytes
    content: str  # canonical JSON of type and payload
    facts: str  # row_facts: metadata and time (empty for a version-1 row)

    def to_json(self) -> dict[str, object]:
        return {
            "hash_version": self.hash_version,
            "prev_hash": self.prev_hash.hex(),
            "content": self.content,
            "facts": self.facts,
        }


def signed_result(leaf: TournamentLeaf, end: Mapping[str, Any]) -> dict[str, Any]:
    """The result the row ``end`` (:meth:`GameEnd.to_json`) holds, by the names ``leaf`` signs (format 2):
    ``{"winner", "scores": [[name, total], …]}``, what check.html rebuilds in the browser and ``check-proof
    --leaf`` on the command line. :class:`ValueError` if the row does not hash to the leaf's head, is not a
    ``GameEnded``, or the leaf names no players (format 1)."""
    if leaf.players is None:
        raise ValueError("a format-1 leaf names no players: its result is not bound to names")
    try:
        version, content, facts = int(end["hash_version"]), str(end["content"]), str(end["facts"])
        prev = bytes.fromhex(end["prev_hash"])
        head = event_hash(version, prev, leaf.game_id, leaf.version, content.encode(), facts.encode())
        row = json.loads(content)
    except (KeyError, TypeError, ValueError) as bad:
        raise ValueError(f"the row the game ended at cannot be read: {bad}") from None
    if head != leaf.head_hash:
        raise ValueError("the row the game ended at does not hash to the leaf's head")
    if row.get("type") != "GameEnded":
        raise ValueError("the row the leaf is the head of is not the game's end")
    payload, players = row["payload"], leaf.players
    if len(payload["scores"]) != len(players) or not 0 <= payload["winner"] < len(players):
        raise ValueError("the row's seats are not the leaf's players")
    return {
        "winner": players[payload["winner"]],
        "scores": [[name, payload["scores"][seat]] for seat, name in enumerate(players)],
    }


def game_end(row: StoredEvent, leaf: TournamentLeaf) -> GameEnd | None:
    """The :class:`GameEnd` of ``leaf`` from its stored ``row`` (the row at the leaf's version); ``None``
    when that row is not a ``GameEnded`` (an imported game's last record line binds no result).
    :class:`ValueError` if the row's hash is not the leaf's head."""
    if row.version != leaf.version or row.game_id != leaf.game_id:
        raise ValueError(f"game {leaf.game_id}: the row given is not the leaf's")
    content = canonical(row.type, row.payload)
    facts = row_facts(row.hash_version, row.metadata, row.recorded_at)
    head = event_hash(row.hash_version, row.prev_hash, row.game_id, row.version, content, facts)
    if head != leaf.head_hash:
        raise ValueError(f"game {leaf.game_id}: the row at version {row.version} does not hash to its leaf")
    if row.type != "GameEnded":
        return None
    return GameEnd(row.hash_version, row.prev_hash, content.decode(), facts.decode())


@dataclass(frozen=True, slots=True)
class SiteGame:
    """One game of the tournament as the site shows it. ``result``: ``{"winner", "scores": [[name,
    total], …]}`` or ``None``; ``verified``: the verifier's verdict (``None``: not verified) and its first
    problem; ``replay``: its public replay page, if it has one; ``inclusion``: its proof as ``prove``
    prints it (a leaf only); ``end``: what binds its result to the leaf (a played, finished game)."""

    game_id: str
    variant: str
    players: tuple[str, ...]
    status: str
    result: Mapping[str, Any] | None
    verified: bool | None
    problem: str | None
    replay: str | None
    inclusion: Mapping[str, Any] | None
    end: GameEnd | None


@dataclass(frozen=True, slots=True)
class Previous:
    """The signed checkpoint of the site this one replaces (its note, size and root), and the consistency
    proof from it to the new one as ``prove --from-size`` prints it (``None`` when there is nothing to
    prove: it signed no game, or the same games)."""

    note: str
    size: int
    root_hash: bytes
    consistency: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class Site:
    """Everything the site shows: the tournament, its signed checkpoint (the note as ``checkpoint
    --tournament`` prints it, its size and root), the verifier keys to check it with, the games in
    listing order, the standings (rows as dictionaries) as of read-model position ``position``, and the
    previous site's checkpoint (a republication)."""

    tournament: str
    note: str
    size: int
    root_hash: bytes
    keys: tuple[str, ...]
    games: tuple[SiteGame, ...]
    standings: tuple[Mapping[str, Any], ...]
    position: int
    previous: Previous | None = None


def site_files(site: Site) -> dict[str, bytes]:
    """The site's files by their path in the site's folder."""
    files: dict[str, bytes] = {
        "checkpoint.txt": site.note.encode(),
        "keys.vkey": "".join(f"{key}\n" for key in site.keys).encode(),
    }
    rows = []
    for number, game in enumerate(site.games, start=1):
        paths = _paths(number)
        if game.replay is not None:
            files[paths["replay"]] = game.replay.encode()
        if game.inclusion is not None:
            files[paths["proof"]] = (json.dumps(game.inclusion, ensure_ascii=False) + "\n").encode()
            files[paths["leaf"]] = (json.dumps(_leaf_json(game), ensure_ascii=False) + "\n").encode()
        rows.append(_game_row(game, paths))
    previous = site.previous
    if previous is not None:
        files[PREVIOUS] = previous.note.encode()
        if previous.consistency is not None:  # byte for byte as ``prove`` prints it
            files[CONSISTENCY] = (json.dumps(previous.consistency) + "\n").encode()
    data = {
        "tournament": site.tournament,
        "note": site.note,
        "keys": list(site.keys),
        "games": rows,
        "previous": None
        if previous is None
        else {
            "note": previous.note,
            "consistency": None if previous.consistency is None else dict(previous.consistency),
            "file": PREVIOUS,
            "consistency_file": CONSISTENCY,
        },
    }
    files["index.html"] = _index(site, rows, data).encode()
    files["check.html"] = _check(site, data, rows).encode()
    return files


def _paths(number: int) -> dict[str, str]:
    """A game's files, named by its place in the listing (game ids may hold any printable character)."""
    return {
        "replay": f"games/{number:03d}.html",
        "proof": f"proofs/{number:03d}.json",
        "leaf": f"leaves/{number:03d}.json",
    }


def _leaf_json(game: SiteGame) -> dict[str, object]:
    """The leaf's inputs, its bytes and hash, and the row that binds the result (see :class:`GameEnd`)."""
    assert game.inclusion is not None
    leaf = TournamentLeaf.from_json(game.inclusion["leaf"])
    return {
        **leaf.to_json(),
        "leaf": leaf.encode().hex(),
        "leaf_hash": leaf.hash().hex(),
        "end": None if game.end is None else game.end.to_json(),
    }


def _game_row(game: SiteGame, paths: Mapping[str, str]) -> dict[str, Any]:
    """A game as ``check.html``'s data and the index's table hold it."""
    return {
        "game_id": game.game_id,
        "variant": game.variant,
        "players": list(game.players),
        "status": game.status,
        "result": None if game.result is None else dict(game.result),
        "verified": game.verified,
        "problem": game.problem,
        "replay": paths["replay"] if game.replay is not None else None,
        "proof_file": paths["proof"] if game.inclusion is not None else None,
        "proof": None if game.inclusion is None else dict(game.inclusion),
        "leaf_file": paths["leaf"] if game.inclusion is not None else None,
        "leaf": None if game.inclusion is None else _leaf_json(game),
    }


def _index(site: Site, rows: Sequence[Mapping[str, Any]], data: Mapping[str, Any]) -> str:
    stylesheet, script = (
        templates().get_template(name).render() for name in ("site_style.css.j2", "site_check.js.j2")
    )
    return (
        templates()
        .get_template("site_index.html.j2")
        .render(
            policy=Markup(content_policy(scripts=(script,), styles=(stylesheet,), read_site=True)),
            stylesheet=Markup(stylesheet),
            script=Markup(script),
            data=data,
            tournament=site.tournament,
            size=site.size,
            root=site.root_hash.hex(),
            keys=site.keys,
            previous=site.previous,
            previous_file=PREVIOUS,
            consistency_file=CONSISTENCY,
            standings=site.standings,
            position=site.position,
            games=rows,
        )
    )


def _check(site: Site, data: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
    stylesheet, script = (
        templates().get_template(name).render() for name in ("site_style.css.j2", "site_check.js.j2")
    )
    return (
        templates()
        .get_template("site_check.html.j2")
        .render(
            policy=Markup(content_policy(scripts=(script,), styles=(stylesheet,), read_site=True)),
            stylesheet=Markup(stylesheet),
            script=Markup(script),
            tournament=site.tournament,
            key=site.keys[0] if site.keys else "",
            first=next((row for row in rows if row["proof_file"] is not None), None),
            data=data,
            previous=site.previous,
            previous_file=PREVIOUS,
            consistency_file=CONSISTENCY,
        )
    )


def check_out(out: Path) -> None:
    """Refuse (:class:`SiteError`) an ``out`` that is not a folder, or a non-empty folder that ``publish``
    did not make (it never replaces files of anyone else's)."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise SiteError(f"{out} is not a folder")
    try:
        foreign = out.is_dir() and not (out / MARKER).is_file() and any(out.iterdir())
    except OSError as error:
        raise SiteError(f"cannot read {out}: {error.strerror or error}") from None
    if foreign:
        raise SiteError(f"{out} is a non-empty folder that publish did not make: give a new or empty one")


def write_site(out: Path, files: Mapping[str, bytes]) -> None:
    """Write ``files`` as the folder ``out``: into a new folder beside it, then swapped in for the old
    (:func:`check_out` first), so that a reader never sees half a site, nor one site's files in another's."""
    check_out(out)
    out = out.resolve()  # "." or "site/..": its parent is where the new folder is made beside it
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    except OSError as error:
        raise SiteError(f"cannot write {out}: {error.strerror or error}") from None
    try:
        for name, data in files.items():
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        (staging / MARKER).write_text("made by uno-audit publish: publish replaces this folder\n")
        for folder in (staging, *(path for path in staging.rglob("*") if path.is_dir())):
            os.chmod(folder, 0o755)  # mkdtemp's 0700 would hide the site from a web server
        if out.exists():
            old = staging.with_name(staging.name + ".old")
            out.rename(old)
            staging.rename(out)
            shutil.rmtree(old)
        else:
            staging.rename(out)
    except OSError as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise SiteError(f"cannot write {out}: {error.strerror or error}") from None
