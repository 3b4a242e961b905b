"""``uno-audit publish`` against a real PostgreSQL, its games played by bots over real gRPC: the site's
checkpoint and proofs are exactly what ``checkpoint`` and ``prove`` give and ``check-proof`` takes them,
each leaf's inputs rebuild the leaf and its last row the head, no page shows a card the table did not
show, and a bad tournament or folder is refused with exit 2, one line and nothing written.

The browser side (check.html from file://) is tests/test_publish_browser.py, on a site made here.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from projections import Projector
from service.checkpoints import Checkpoint, Signer, TournamentLeaf, tournament_origin, write_signer
from service.cli.main import main
from service.domain.auth import SPECTATOR
from service.domain.visibility import redact
from service.play.simulate import play_game
from service.rules.cards import DECKS
from service.rules.options import Variant
from service.store import EventStore
from service.store.model import event_hash
from tests.api.shared_server import serving
from tests.api.support import deal_from
from tests.postgres import PostgresServer, service_url
from tests.projections.projection_support import store_game, wait_readable

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(600)]

TOURNAMENT = "spring cup/2026"
SERVICE = "uno-audit.test"
#: The service key's seed: its verifier key's base64 holds a "+" and a "/", which a reader must not take
#: for the "+" between the key's name, id and data.
SEED = (3).to_bytes(32, "big")
LIVE = "g-live"  # a game of the tournament still in progress: no leaf
#: Every card token of every deck.
TOKENS = frozenset(card.token for deck in DECKS.values() for card in deck)
#: A token inside a sentence (``bob plays R5, colour red``): not inside a longer word or a base64 run.
_IN_TEXT = re.compile(
    r"(?<![A-Za-z0-9+/=_-])("
    + "|".join(sorted(map(re.escape, TOKENS), key=len, reverse=True))
    + r")(?![A-Za-z0-9+_-])"
)


@dataclass(frozen=True, slots=True)
class Published:
    """A tournament played by bots and published: the site's folder, the database, the key."""

    site: Path
    database_url: str
    key_file: Path
    signer: Signer


async def play_games(url: str, tournament: str, games: int) -> None:
    """``games`` bot games in ``tournament`` over a real gRPC server on ``url``'s database."""
    with pytest.MonkeyPatch.context() as patch:
        deal_from(patch, 6)  # short, same-length games each run
        async with serving(url) as running:
            argv = ["bots", "--server", f"127.0.0.1:{running.port}", "--games", str(games)]
            argv += ["--variant", "classic", "--players", "3", "--target-score", "1", "--concurrency", "2"]
            code = await asyncio.to_thread(main, [*argv, "--tournament", tournament])
            assert code == 0


async def play_tournament(url: str, tournament: str, games: int) -> None:
    """``games`` bot games in ``tournament`` over a real gRPC server on ``url``'s database, one game in
    progress stored beside them, and the read models brought up to date."""
    await play_games(url, tournament, games)
    store = await EventStore.open(service_url(url), max_size=4)
    try:
        await store_game(
            store, LIVE, play_game(Variant.CLASSIC, 3, 3), tournament_id=tournament, steps=slice(0, 6)
        )
        await wait_readable(store)
    finally:
        await store.close()
    async with await Projector.open(url) as projector:
        await projector.catch_up()


def publish_tournament(postgres_server: PostgresServer, template: str, folder: Path) -> Iterator[Published]:
    """A module's published tournament (two bot games, one in progress); its database dropped after."""
    url = postgres_server.create_database(template=template)
    try:
        asyncio.run(play_tournament(url, TOURNAMENT, 2))
        signer = Signer.from_seed(SERVICE, SEED)
        key_file = folder / "service.key"
        write_signer(signer, key_file)
        site = folder / "site"
        argv = ["publish", "--tournament", TOURNAMENT, "--out", str(site), "--key-file", str(key_file)]
        assert main([*argv, "--database-url", url]) == 0
        yield Published(site, url, key_file, signer)
    finally:
        postgres_server.drop_database(url)


@pytest.fixture(scope="module")
def published(
    postgres_server: PostgresServer, migrated_template: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Published]:
    yield from publish_tournament(postgres_server, migrated_template, tmp_path_factory.mktemp("publish"))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as usage:  # argparse's own refusals (a bad id)
        code = int(usage.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def embedded(html: str, element: str) -> Any:
    """The JSON a page embeds in ``<script id=ELEMENT type="application/json">``."""
    found = re.search(rf'<script id="{element}" type="application/json">(.*?)</script>', html, re.S)
    assert found is not None, element
    return json.loads(found.group(1))


def site_data(site: Path) -> dict[str, Any]:
    data: dict[str, Any] = embedded((site / "check.html").read_text("utf-8"), "site-data")
    return data


def cards_in(value: Any) -> set[str]:
    """Every card token a JSON value holds: a string that is one, or one inside a sentence."""
    if isinstance(value, dict):
        return {card for item in value.values() for card in cards_in(item)}
    if isinstance(value, list):
        return {card for item in value for card in cards_in(item)}
    if isinstance(value, str):
        if value in TOKENS:
            return {value}
        return set(_IN_TEXT.findall(value)) if " " in value else set()
    return set()


def test_the_checkpoint_and_proofs_are_those_checkpoint_and_prove_give(
    published: Published, capsys: pytest.CaptureFixture[str]
) -> None:
    site, db = published.site, ["--database-url", published.database_url]
    code, note, err = run(
        capsys, "checkpoint", "--tournament", TOURNAMENT, "--key-file", str(published.key_file), *db
    )
    assert code == 0, err
    assert (site / "checkpoint.txt").read_text("utf-8") == note
    vkey = published.signer.verifier.encode()
    assert (site / "keys.vkey").read_text("utf-8") == vkey + "\n"
    data = site_data(site)
    assert data["note"] == note and data["keys"] == [vkey]
    leaves = [game for game in data["games"] if game["proof"] is not None]
    assert len(leaves) == 2 == int(note.splitlines()[1])
    assert [game["game_id"] for game in data["games"] if game["proof"] is None] == [LIVE]
    for game in leaves:
        proof_file = site / game["proof_file"]
        code, proof, err = run(capsys, "prove", "--game", game["game_id"], *db)
        assert code == 0, err
        assert json.loads(proof_file.read_text("utf-8")) == json.loads(proof) == game["proof"]
        code, out, err = run(
            capsys,
            "check-proof",
            "--checkpoint",
            str(site / "checkpoint.txt"),
            "--proof",
            str(proof_file),
            "--key",
            vkey,
        )
        assert code == 0, out + err


def test_each_leaf_is_rebuilt_from_its_inputs_and_its_head_from_its_last_row(published: Published) -> None:
    data = site_data(published.site)
    for game in data["games"]:
        if game["proof"] is None:
            continue
        leaf_file = published.site / game["proof_file"].replace("proofs/", "leaves/")
        given = json.loads(leaf_file.read_text("utf-8"))
        assert given == game["leaf"]
        inputs = {key: value for key, value in given.items() if key not in ("leaf", "leaf_hash", "end")}
        leaf = TournamentLeaf.from_json(inputs)
        assert leaf.format == 2 and leaf.players == tuple(game["players"]) and leaf.variant == "classic"
        assert given["leaf"] == leaf.encode().hex() and given["leaf_hash"] == leaf.hash().hex()
        end = given["end"]
        assert end is not None
        head = event_hash(
            end["hash_version"],
            bytes.fromhex(end["prev_hash"]),
            leaf.game_id,
            leaf.version,
            end["content"].encode(),
            end["facts"].encode(),
        )
        assert head == leaf.head_hash
        row = json.loads(end["content"])
        assert row["type"] == "GameEnded"
        players = game["players"]
        assert game["result"] == {
            "winner": players[row["payload"]["winner"]],
            "scores": [[name, row["payload"]["scores"][seat]] for seat, name in enumerate(players)],
        }
        assert game["verified"] is True and game["replay"] is not None


async def _shown(url: str, game_id: str, players: list[str]) -> list[tuple[int, set[str]]]:
    """Each row's version in ``game_id`` and the cards its event shows the table (as a spectator sees it:
    played, flipped, a round's hands counted at its end)."""
    store = await EventStore.open(service_url(url), max_size=2)
    try:
        rows = await store.read_stream(game_id)
    finally:
        await store.close()
    return [(row.version, cards_in(redact(row.type, row.payload, SPECTATOR, players))) for row in rows]


def _shown_before(shown: list[tuple[int, set[str]]], version: int | None) -> set[str]:
    """The cards shown by the rows before ``version`` (all of them: ``None``)."""
    return {card for at, cards in shown if version is None or at < version for card in cards}


def _hands(replay: dict[str, Any]) -> set[str]:
    """Every card a page draws in a hand, at any position."""
    return {
        card
        for step in replay["steps"]
        if step["table"] is not None
        for hand in step["table"]["hands"]
        for card in hand["cards"] or ()
    }


def test_no_page_shows_a_card_the_table_did_not_show(published: Published) -> None:
    site = published.site
    data = site_data(site)
    for game in data["games"]:
        shown = asyncio.run(_shown(published.database_url, game["game_id"], game["players"]))
        replay = embedded((site / game["replay"]).read_text("utf-8"), "replay-data")
        assert replay["viewer"] == "the public (hand counts only)"
        steps = replay["steps"]
        for step, after in zip(steps, [*steps[1:], None], strict=True):
            # A position shows no card before the table did: by the rows up to the next position.
            allowed = _shown_before(shown, None if after is None else after["at"])
            assert cards_in(step) <= allowed, f"{game['game_id']} at {step['label']}"
            table = step["table"]
            if table is not None:
                assert table["drawn"] is None
                assert all(hand["cards"] is None for hand in table["hands"])
        assert cards_in(replay) <= _shown_before(shown, None)
        assert cards_in(replay) or game["proof"] is None  # a whole game shows the cards played
    index_text = re.sub(r"<[^>]+>", " ", (site / "index.html").read_text("utf-8"))
    assert not cards_in(index_text)
    check = dict(data, games=[dict(game, leaf=None) for game in data["games"]])
    assert not cards_in(check)  # the rows that end the games hold scores and a seed, no card


def test_the_comparison_has_teeth(published: Published) -> None:
    """The game in progress holds hands the table never showed: the adjudicator's page draws them, the
    public's does not."""
    from service.audit.replay_html import game_replay_html

    game = next(g for g in site_data(published.site)["games"] if g["game_id"] == LIVE)
    shown = _shown_before(asyncio.run(_shown(published.database_url, LIVE, game["players"])), None)
    page = asyncio.run(_adjudicators_page(published.database_url, LIVE, game_replay_html))
    hidden = _hands(embedded(page, "replay-data")) - shown
    assert hidden
    public = embedded((published.site / game["replay"]).read_text("utf-8"), "replay-data")
    assert not cards_in(public) & hidden and not _hands(public)


async def _adjudicators_page(url: str, game_id: str, render: Any) -> str:
    from service.app.auditor import Auditor

    store = await EventStore.open(service_url(url), max_size=4)
    try:
        auditor = Auditor(store)
        report = await auditor.verify(game_id, check_projections=False)
        page: str = render(await auditor.load(game_id), report)
        return page
    finally:
        await store.close()


def test_a_refused_tournament_or_folder_writes_nothing(
    published: Published, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = ["--database-url", published.database_url, "--key-file", str(published.key_file)]
    out = tmp_path / "new"
    code, printed, err = run(capsys, "publish", "--tournament", "no such cup", "--out", str(out), *db)
    assert (code, printed) == (2, "")
    assert err == "uno-audit publish: no tournament 'no such cup': no game is in it\n"
    assert not out.exists()

    code, _, err = run(capsys, "publish", "--tournament", "", "--out", str(out), *db)
    assert code == 2 and "a tournament id must be 1 to 128" in err and not out.exists()

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine\n")
    code, printed, err = run(capsys, "publish", "--tournament", TOURNAMENT, "--out", str(theirs), *db)
    assert (code, printed) == (2, "")
    refusal = f"{theirs} is a non-empty folder that publish did not make: give a new or empty one"
    assert err == f"uno-audit publish: --out: {refusal}\n"
    assert [p.name for p in theirs.iterdir()] == ["notes.txt"]

    a_file = tmp_path / "file.html"
    a_file.write_text("x")
    code, _, err = run(capsys, "publish", "--tournament", TOURNAMENT, "--out", str(a_file), *db)
    assert code == 2 and err == f"uno-audit publish: --out: {a_file} is not a folder\n"
    assert a_file.read_text() == "x"


def test_publishing_again_replaces_the_site_it_made(
    published: Published, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = ["--database-url", published.database_url, "--key-file", str(published.key_file)]
    out = tmp_path / "empty"
    out.mkdir()
    code, printed, err = run(capsys, "publish", "--tournament", TOURNAMENT, "--out", str(out), *db)
    assert code == 0, err
    assert printed == f"published tournament {TOURNAMENT}: 3 games, 2 signed, in {out}\n"
    (out / "games" / "stale.html").write_text("old")
    code, printed, err = run(capsys, "publish", "--tournament", TOURNAMENT, "--out", str(out), *db)
    assert code == 0, err
    assert printed.splitlines()[1] == (
        f"previous checkpoint kept as {out / 'previous-checkpoint.txt'}: the same games, nothing to prove"
    )
    assert not (out / "games" / "stale.html").exists()
    note = (published.site / "checkpoint.txt").read_text("utf-8")
    assert (out / "checkpoint.txt").read_text("utf-8") == note  # Ed25519 signs deterministically
    assert (out / "previous-checkpoint.txt").read_text("utf-8") == note
    assert not (out / "consistency.json").exists()
    assert "signed the same 2 game(s): the same tree head" in (out / "index.html").read_text("utf-8")
    assert site_data(out)["previous"] == {
        "note": note,
        "consistency": None,
        "file": "previous-checkpoint.txt",
        "consistency_file": "consistency.json",
    }
    assert [p.name for p in tmp_path.iterdir()] == ["empty"]  # no staging folder left behind


def test_an_imported_game_is_a_leaf_whose_result_its_leaf_does_not_bind(
    published: Published, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """An imported record with a winner is a leaf at its last record line: its proof and leaf are
    published, with no row to bind its result (the import's outcome is shown), and its replay is public."""
    db = ["--database-url", published.database_url]
    record = Path(__file__).parent / "data" / "records" / "sonic_scoring_230.jsonl"  # ann wins
    code, _, err = run(capsys, "import", str(record), "--tournament", "imported cup", *db)
    assert code in (0, 1), err
    site = tmp_path / "site"
    argv = [
        "publish",
        "--tournament",
        "imported cup",
        "--out",
        str(site),
        "--key-file",
        str(published.key_file),
    ]
    code, _, err = run(capsys, *argv, *db)
    assert code == 0, err
    [game] = site_data(site)["games"]
    assert game["leaf"]["end"] is None and game["proof"]["index"] == 0 and game["result"]["winner"] == "ann"
    leaf = json.loads((site / "leaves" / "001.json").read_text("utf-8"))
    assert leaf["end"] is None and leaf["version"] == game["proof"]["leaf"]["version"]
    vkey = published.signer.verifier.encode()
    checked = ["--checkpoint", str(site / "checkpoint.txt"), "--proof", str(site / "proofs" / "001.json")]
    code, out, err = run(capsys, "check-proof", *checked, "--key", vkey)
    assert code == 0, out + err
    replay = embedded((site / "games" / "001.html").read_text("utf-8"), "replay-data")
    assert replay["viewer"] == "the public (hand counts only)" and not _hands(replay)


REPUBLISHED = "autumn cup"


@dataclass(frozen=True, slots=True)
class Republished:
    """A tournament published after 3 games and again, into the same folder, after a fourth."""

    site: Path
    first_note: str
    printed: str
    published: Published


async def _more_games(url: str, games: int) -> None:
    await play_games(url, REPUBLISHED, games)
    async with await Projector.open(url) as projector:
        await projector.catch_up()


@pytest.fixture(scope="module")
def republished(published: Published, tmp_path_factory: pytest.TempPathFactory) -> Republished:
    url = published.database_url
    site = tmp_path_factory.mktemp("republish") / "site"
    argv = ["publish", "--tournament", REPUBLISHED, "--out", str(site), "--key-file", str(published.key_file)]
    asyncio.run(_more_games(url, 3))
    assert main([*argv, "--database-url", url]) == 0
    first_note = (site / "checkpoint.txt").read_text("utf-8")
    asyncio.run(_more_games(url, 1))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main([*argv, "--database-url", url]) == 0
    return Republished(site, first_note, printed.getvalue(), published)


def test_republishing_keeps_the_previous_checkpoint_and_the_consistency_proof_prove_gives(
    republished: Republished, capsys: pytest.CaptureFixture[str]
) -> None:
    site, published = republished.site, republished.published
    assert int(republished.first_note.splitlines()[1]) == 3
    assert (site / "previous-checkpoint.txt").read_text("utf-8") == republished.first_note
    assert republished.printed.splitlines() == [
        f"published tournament {REPUBLISHED}: 4 games, 4 signed, in {site}",
        f"consistent with the previous checkpoint (size 3 \u2192 4): {site / 'previous-checkpoint.txt'}, "
        f"{site / 'consistency.json'}",
    ]
    db = ["--database-url", published.database_url]
    code, proof, err = run(
        capsys, "prove", "--tournament", REPUBLISHED, "--from-size", "3", "--size", "4", *db
    )
    assert code == 0, err
    assert (site / "consistency.json").read_text("utf-8") == proof
    files = ["--checkpoint", str(site / "checkpoint.txt"), "--proof", str(site / "consistency.json")]
    files += ["--old-checkpoint", str(site / "previous-checkpoint.txt")]
    code, out, err = run(capsys, "check-proof", *files, "--key", published.signer.verifier.encode())
    assert (code, out) == (0, "the tournament's 4 games begin with the 3 signed before\n"), err
    index = re.sub(r"<[^>]+>|\s+", " ", (site / "index.html").read_text("utf-8"))
    assert "consistent with the previous checkpoint (size 3 \u2192 4)" in index
    assert 'href="previous-checkpoint.txt"' in (site / "index.html").read_text("utf-8")
    assert 'href="consistency.json"' in (site / "index.html").read_text("utf-8")
    assert site_data(site)["previous"] == {
        "note": republished.first_note,
        "consistency": json.loads(proof),
        "file": "previous-checkpoint.txt",
        "consistency_file": "consistency.json",
    }


def _signed_previous(site: Path, signer: Signer, origin: str, size: int, root: bytes) -> Path:
    """A copy of ``site`` whose checkpoint is replaced by one of ``origin`` at ``size`` with ``root``."""
    (site / "checkpoint.txt").write_text(Checkpoint(origin, size, root).sign(signer), "utf-8")
    return site


def test_a_previous_checkpoint_the_new_tree_does_not_extend_is_refused(
    republished: Republished, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    published = republished.published
    signer, other = published.signer, Signer.from_seed(SERVICE, (4).to_bytes(32, "big"))
    origin = tournament_origin(SERVICE, REPUBLISHED)
    root = (republished.site / "previous-checkpoint.txt").read_text("utf-8").splitlines()[2]
    old_root = base64.b64decode(root)
    cases = {
        "more": (signer, origin, 5, old_root, "signs more games than the tournament has finished (4)"),
        "root": (signer, origin, 3, bytes(32), "is not a prefix of the tournament's 4: "),
        "key": (other, origin, 3, old_root, "is not a checkpoint signed by the key uno-audit.test: "),
        "origin": (signer, tournament_origin(SERVICE, TOURNAMENT), 2, old_root, "is the checkpoint of "),
    }
    db = ["--database-url", published.database_url, "--key-file", str(published.key_file)]
    for name, (by, of, size, head, reason) in cases.items():
        site = tmp_path / name
        shutil.copytree(republished.site, site)
        _signed_previous(site, by, of, size, head)
        before = {path: path.read_bytes() for path in site.rglob("*") if path.is_file()}
        code, printed, err = run(capsys, "publish", "--tournament", REPUBLISHED, "--out", str(site), *db)
        assert (code, printed) == (2, ""), name
        assert err.startswith("uno-audit publish: ") and reason in err and err.count("\n") == 1, err
        assert {path: path.read_bytes() for path in site.rglob("*") if path.is_file()} == before
