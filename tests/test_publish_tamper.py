"""Every single-file edit of a published site, swept in headless Chromium: each file of the site (the
checkpoint, the keys, every proof and leaf, both pages with their rows and embedded data, the replays), and
in each the values a reader could care about (a score, a name, a leaf field, a proof hash, a signature, a
row's text): every row's cell, and a quarter of the other values in the full tier, an eighth in the fast.
Each edit is either caught by the page (index.html and check.html say the site does NOT verify) or changes
nothing the page shows as verified. The site is served over HTTP, where the pages read the files they
check; the names swapped in every file fail too; and a key pinned in check.html's address decides whose
signature counts (a site re-signed by whoever edits it verifies only unpinned).
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.wait import WebDriverWait

from service.checkpoints import Signer, cosign, parse_note, sign_text
from service.cli.main import main
from tests import tiers
from tests.test_publish import Published, published, site_data
from tests.test_replay_browser import browser

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(1200)]

__all__ = ["browser", "published"]  # the fixtures, used by name

_DATA = re.compile(r'(<script id="site-data" type="application/json">)(.*?)(</script>)', re.S)
#: What a page shows as verified: its verdict, and each row it says verifies with the texts it shows.
_SHOWN = """
const verdict = document.getElementById("site-verdict");
const rows = [...document.querySelectorAll("#checks tr[data-game], #games tr[data-game]")]
  .filter(tr => tr.dataset.verdict === "verifies")
  .map(tr => [tr.dataset.game, ...[...tr.cells].map(td => td.textContent.trim())]);
const lines = ["checkpoint-line", "consistency-line", "key-line"].map(id => {
  const e = document.getElementById(id);
  return e && e.dataset.verdict === "verifies" ? e.textContent : null;
});
return [verdict.dataset.verdict, verdict.textContent, rows, lines];
"""

Shown = tuple[str, str, list[list[str]], list[str | None]]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A folder served over HTTP on 127.0.0.1, and its address."""
    root = tmp_path_factory.mktemp("served")
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def _shown(page: WebDriver, url: str) -> Shown:
    page.get(url)
    verdict = page.find_element(By.ID, "site-verdict")
    WebDriverWait(page, 30, poll_frequency=0.02).until(
        lambda _: verdict.get_attribute("data-verdict") != "pending"
    )
    verdict_, text, rows, lines = page.execute_script(_SHOWN)
    return str(verdict_), str(text), rows, lines


def _both(page: WebDriver, base: str) -> dict[str, Shown]:
    return {name: _shown(page, f"{base}/{name}") for name in ("index.html", "check.html")}


# --- the edits: each a meaningful change of one value ------------------------------------------------------


def _flip(text: str) -> str:
    """Another text of the same shape: a hex or base64 digit changed in the middle, else a letter."""
    at = len(text) // 2
    return text[:at] + ("1" if text[at] == "0" else "0") + text[at + 1 :]


def _values(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every scalar in a JSON value, with its path."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _values(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _values(item, (*path, index))
    else:
        yield path, value


def _changed(value: Any, players: list[str]) -> list[Any]:
    """The meaningful edits of one scalar: a number moved by one, a name swapped for another player's, a
    hash or signature with one digit changed, a row's result (its winner, a score) changed inside it."""
    if isinstance(value, bool) or value is None:
        return [not value] if isinstance(value, bool) else []
    if isinstance(value, int):
        return [value + 1]
    if not isinstance(value, str) or not value:
        return []
    if value in players:
        return [next(name for name in players if name != value)]
    if value.startswith("{") and '"GameEnded"' in value:  # the row a game ended at: its result
        row = json.loads(value)
        payload = row["payload"]
        won = dict(row, payload=dict(payload, winner=(payload["winner"] + 1) % len(payload["scores"])))
        scored = dict(row, payload=dict(payload, scores=[payload["scores"][0] + 1, *payload["scores"][1:]]))
        return [json.dumps(won, separators=(",", ":")), json.dumps(scored, separators=(",", ":"))]
    return [_flip(value)]


def _set(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _set(value[path[0]], path[1:], new)
    return copy


def _json_edits(text: str, players: list[str]) -> Iterator[tuple[str, str]]:
    value = json.loads(text)
    for path, scalar in _values(value):
        for new in _changed(scalar, players):
            yield f"{'/'.join(map(str, path))}={str(new)[:40]}", json.dumps(_set(value, path, new)) + "\n"


def _note_edits(text: str) -> Iterator[tuple[str, str]]:
    body, signatures = text.split("\n\n", 1)
    origin, size, root = body.split("\n")
    yield "origin", f"{origin}x\n{size}\n{root}\n\n{signatures}"
    yield "size", f"{origin}\n{int(size) + 1}\n{root}\n\n{signatures}"
    yield "root", f"{origin}\n{size}\n{_flip(root)}\n\n{signatures}"
    dash, name, signature = signatures.splitlines()[0].split(" ")
    yield "signature", f"{body}\n\n{dash} {name} {_flip(signature)}\n"
    yield "no signature", f"{body}\n\n"


def _html_edits(text: str, players: list[str]) -> Iterator[tuple[str, str]]:
    """The embedded data's every value, and every row's cell the page shows (a name, a score, a variant)."""
    found = _DATA.search(text)
    if found is not None:
        for what, data in _json_edits(found.group(2), players):
            embedded = data.strip()
            for char in "<>&'":  # as the page embeds it (Jinja's tojson)
                embedded = embedded.replace(char, f"\\u{ord(char):04x}")
            yield f"data {what}", text[: found.start(2)] + embedded + text[found.end(2) :]
    for cell in re.finditer(r'data-field="(\w+)">([^<]*)<', text):
        shown = cell.group(2)
        names = [name for name in players if name in shown]
        digits = re.search(r"\d+", shown)
        edits = []
        if names:
            other = next(name for name in players if name != names[0])
            edits.append(shown.replace(names[0], other, 1))
        if digits:
            edits.append(shown[: digits.start()] + str(int(digits.group()) + 1) + shown[digits.end() :])
        if not names and not digits:
            edits.append(shown + "x")
        for new in edits:
            yield f"row {cell.group(1)}={new[:40]}", text[: cell.start(2)] + new + text[cell.end(2) :]


def _edits(name: str, text: str, players: list[str]) -> Iterator[tuple[str, str]]:
    if name.endswith(".json"):
        yield from _json_edits(text, players)
    elif name.endswith(".txt"):
        yield from _note_edits(text)
    elif name == "keys.vkey":
        other = Signer.from_seed(text.split("+")[0], bytes(range(32)))  # the same name, another key
        yield "another key, same name", other.verifier.encode() + "\n"
        yield "no key", ""
    elif name in ("index.html", "check.html"):
        yield from _html_edits(text, players)
    elif name.endswith(".html"):  # a replay: the publisher's rendering, which no page shows as verified
        first, second = [name for name in players if name in text][:2]
        yield "a player's name", text.replace(first, "\0").replace(second, first).replace("\0", second)
        yield "a card", re.sub(r'"[RGBY][0-9]"', '"W"', text, count=1)


def _copy(site: Path, into: Path, name: str | None = None, text: str | None = None) -> None:
    shutil.rmtree(into, ignore_errors=True)
    shutil.copytree(site, into)
    if name is not None and text is not None:
        (into / name).write_text(text, "utf-8")


def test_every_single_file_edit_is_caught_or_changes_nothing_shown_as_verified(
    browser: WebDriver, published: Published, served: tuple[Path, str]
) -> None:
    root, base = served
    site = published.site
    players = sorted({name for game in site_data(site)["games"] for name in game["players"]})
    _copy(site, root / "site")
    original = _both(browser, f"{base}/site")
    for page in ("index.html", "check.html"):
        original[f"file:{page}"] = _shown(browser, (root / "site" / page).as_uri())
    for page, (verdict, text, rows, _) in original.items():
        assert verdict == "verifies" and "The site verifies: all 2 games" in text, (page, text)
        assert len(rows) == 2, (page, rows)  # both signed games' rows verify, on both pages
    files = sorted(str(path.relative_to(site)) for path in site.rglob("*") if path.is_file())
    files.remove(".uno-audit-site")
    tally: dict[str, list[int]] = {}
    shown_as_verified: list[str] = []
    for name in files:
        text = (site / name).read_text("utf-8")
        caught = harmless = 0
        for number, (what, edited) in enumerate(_edits(name, text, players)):
            assert edited != text, (name, what)
            # Every file and every row's cell; of the other values a quarter in the full tier and an
            # eighth in the fast one, in turn (all of them took the full tier's run past its budget).
            if number % (4 if tiers.full else 8) and not what.startswith("row"):
                continue
            folder = f"e-{len(tally)}-{number}"
            _copy(site, root / folder, name, edited)
            # A page reads no other page: an edit of one of them is seen by that one alone, served (where
            # it checks the files it reads) and from disk (where it checks the copies it embeds).
            urls = {page: f"{base}/{folder}/{page}" for page in ("index.html", "check.html")}
            if name in urls:
                urls = {name: urls[name], f"file:{name}": (root / folder / name).as_uri()}
            for page, url in urls.items():
                shown = _shown(browser, url)
                if shown[0] == "fails":
                    caught += 1
                elif shown == original[page]:
                    harmless += 1
                else:
                    shown_as_verified.append(f"{name}: {what}: {page} shows {shown}")
            shutil.rmtree(root / folder)
        tally[name] = [caught, harmless]
        assert caught + harmless, f"no edit of {name}"
    print("\n".join(f"{name}: {c} caught, {h} harmless (page loads)" for name, (c, h) in tally.items()))
    assert shown_as_verified == []
    for name in files:  # every signed file, edited, is caught by the pages that read it
        if name.startswith(("proofs/", "leaves/", "checkpoint", "keys")) or name == "index.html":
            assert tally[name][0], name


def test_the_players_names_swapped_in_every_file_fail(
    browser: WebDriver, published: Published, served: tuple[Path, str]
) -> None:
    """bot names swapped everywhere, so that the site says the other player won: the leaf signs the names
    by seat, and the page fails (served, and from disk)."""
    root, base = served
    site = published.site
    game = next(game for game in site_data(site)["games"] if game["proof"] is not None)
    first, second = game["players"][:2]
    swapped = root / "swapped"
    _copy(site, swapped)
    for path in swapped.rglob("*"):
        if path.is_file() and path.suffix in (".html", ".json"):
            text = path.read_text("utf-8")
            path.write_text(text.replace(first, "\0").replace(second, first).replace("\0", second), "utf-8")
    for page, shown in _both(browser, f"{base}/swapped").items():
        assert shown[0] == "fails" and shown[2] == [], (page, shown)
    for page in ("index.html", "check.html"):
        verdict, _, rows, _ = _shown(browser, (swapped / page).as_uri())
        assert verdict == "fails" and rows == [], page


def _resign(site: Path, into: Path, signer: Signer) -> None:
    """``site`` as whoever edits it could re-sign it: the checkpoint signed by their key, published as its."""
    _copy(site, into)
    note = (site / "checkpoint.txt").read_text("utf-8")
    text = note.split("\n\n")[0] + "\n"
    resigned = parse_note(note)
    fresh = sign_text(text, [signer])
    assert parse_note(fresh).text == resigned.text
    (into / "checkpoint.txt").write_text(fresh, "utf-8")
    (into / "keys.vkey").write_text(signer.verifier.encode() + "\n", "utf-8")
    for page in ("index.html", "check.html"):
        html = (into / page).read_text("utf-8")
        found = _DATA.search(html)
        assert found is not None
        data = json.loads(found.group(2))
        data.update(note=fresh, keys=[signer.verifier.encode()])
        html = html[: found.start(2)] + json.dumps(data).replace("<", "\\u003c") + html[found.end(2) :]
        (into / page).write_text(html, "utf-8")


def _key_line(page: WebDriver) -> tuple[str, str]:
    line = page.find_element(By.ID, "key-line")
    return str(line.get_attribute("data-verdict")), line.text


def test_a_pinned_key_decides_whose_signature_counts(
    browser: WebDriver, published: Published, served: tuple[Path, str]
) -> None:
    root, base = served
    genuine = published.signer.verifier.encode()
    _copy(published.site, root / "genuine")
    verdict, text, _, _ = _shown(browser, f"{base}/genuine/check.html")
    assert verdict == "verifies" and "which you have not pinned" in text
    state, said = _key_line(browser)
    assert state == "none" and "whoever can edit the site could re-sign it" in said
    verdict, text, rows, _ = _shown(browser, f"{base}/genuine/check.html#key={genuine}")
    assert verdict == "verifies" and "signed by the key you pinned" in text and len(rows) == 2
    assert _key_line(browser)[1].endswith("the site's key is that one.")
    # Re-signed by whoever edits the site, with a key of the same name: unpinned it verifies (which is
    # what the page warns of); pinned to the organiser's key it does not.
    _resign(published.site, root / "resigned", Signer.from_seed(published.signer.name, bytes(range(32))))
    assert _shown(browser, f"{base}/resigned/check.html")[0] == "verifies"
    verdict, text, rows, _ = _shown(browser, f"{base}/resigned/check.html#key={genuine}")
    assert verdict == "fails" and rows == [], text
    assert _key_line(browser)[0] == "fails"
    verdict, _, _, _ = _shown(browser, f"{base}/resigned/index.html#key={genuine}")
    assert verdict == "fails"
    # Pasted in: the page pins it in its address and checks again.
    browser.get(f"{base}/resigned/check.html")
    browser.find_element(By.ID, "pin-input").send_keys(genuine)
    browser.find_element(By.ID, "pin-button").click()
    WebDriverWait(browser, 30).until(lambda page: "#key=" in page.current_url)
    verdict_element = browser.find_element(By.ID, "site-verdict")
    WebDriverWait(browser, 30).until(lambda _: verdict_element.get_attribute("data-verdict") == "fails")


def test_witness_cosignatures_are_shown_and_checked_with_a_witness_key(
    browser: WebDriver, published: Published, served: tuple[Path, str]
) -> None:
    root, base = served
    witness = Signer.from_seed("witness.test", bytes(31) + b"\x07")
    site = root / "cosigned"
    _copy(published.site, site)
    note = (site / "checkpoint.txt").read_text("utf-8")
    (site / "checkpoint.txt").write_text(cosign(note, witness, [published.signer.verifier]), "utf-8")
    verdict, _, _, _ = _shown(browser, f"{base}/cosigned/check.html")
    line = browser.find_element(By.ID, "witness-line").text
    assert verdict == "verifies" and "co-signed by witness.test" in line and "not checked" in line
    _shown(browser, f"{base}/cosigned/check.html#witness={witness.verifier.encode()}")
    line = browser.find_element(By.ID, "witness-line").text
    assert "co-signed by witness.test" in line and "verifies with the witness key you gave" in line
    _copy(published.site, root / "plain")
    _shown(browser, f"{base}/plain/check.html")
    assert "no witness co-signature" in browser.find_element(By.ID, "witness-line").text


def test_the_command_line_on_check_html_names_files_that_exist_and_checks_them(
    published: Published, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    html = (published.site / "check.html").read_text("utf-8")
    line = re.search(r"<pre>(uno-audit check-proof [^\n<]*)", html)
    assert line is not None
    argv = line.group(1).replace("&#39;", "'").split()[1:]
    argv = [arg.strip("'") for arg in argv]
    proof, leaf = argv[argv.index("--proof") + 1], argv[argv.index("--leaf") + 1]
    assert (published.site / proof).is_file() and (published.site / leaf).is_file()
    monkeypatch.chdir(published.site)
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "players by seat: 0 " in out and "result (from the row it ended at): " in out
    edited = json.loads((published.site / leaf).read_text("utf-8"))
    edited["players"] = edited["players"][::-1]
    swapped = published.site.parent / "swapped-leaf.json"
    swapped.write_text(json.dumps(edited), "utf-8")
    argv[argv.index("--leaf") + 1] = str(swapped)
    assert main(argv) == 1
