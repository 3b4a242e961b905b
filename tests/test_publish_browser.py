"""A published tournament checked in headless Chromium from file://: check.html recomputes every game's
leaf and inclusion proof and checks the checkpoint's Ed25519 signature with WebCrypto, and says the site
verifies; one edit of a game's result, of a byte of its proof, or of a byte of the checkpoint's root or
signature, and that game or the whole site does NOT verify. A site published again shows, checked there
too, that the previous results are a prefix of these (the previous checkpoint's signature, the consistency
proof), and not with a byte of either edited. Nothing is fetched and no page's policy is crossed.

Chromium and its driver as in tests/test_replay_browser.py (whose fixture this uses): without them the
tests skip, unless ``UNO_AUDIT_REQUIRE_BROWSER`` is set, then they fail.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.command import Command
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.wait import WebDriverWait

from service.audit.site import Previous, Site, site_files, write_site
from service.checkpoints import Checkpoint, Signer, TournamentLeaf, tournament_checkpoint, tournament_tree
from service.cli.checkpoints import consistency_to_json
from tests import tiers
from tests.test_publish import LIVE, Published, Republished, published, republished, site_data
from tests.test_replay_browser import _console, browser

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(600)]

__all__ = ["browser", "published", "republished"]  # the fixtures, used by name

_DATA = re.compile(r'(<script id="site-data" type="application/json">)(.*?)(</script>)', re.S)


def _check(page: WebDriver, site: Path) -> tuple[str, dict[str, str]]:
    """Open ``site``'s check.html from disk and wait for its verdict: the site's and each game's."""
    _console(page)  # drop what earlier pages logged
    page.get((site / "check.html").as_uri())
    verdict = page.find_element(By.ID, "site-verdict")
    WebDriverWait(page, 30).until(lambda _: verdict.get_attribute("data-verdict") != "pending")
    rows = page.find_elements(By.CSS_SELECTOR, "#checks tr[data-game]")
    games = {str(row.get_attribute("data-game")): str(row.get_attribute("data-verdict")) for row in rows}
    return str(verdict.get_attribute("data-verdict")), games


def _clean(page: WebDriver) -> None:
    """Nothing fetched, no policy crossed, no script error."""
    fetched = page.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert fetched == []
    entries: list[dict[str, Any]] = page.execute(Command.GET_LOG, {"type": "browser"})["value"]
    assert [e["message"] for e in entries if "Content Security Policy" in e["message"]] == []
    assert [e["message"] for e in entries if e["level"] == "SEVERE"] == []


def test_the_published_site_verifies_from_file(browser: WebDriver, published: Published) -> None:
    page = browser
    site, games = _check(page, published.site)
    assert site == "verifies", page.find_element(By.ID, "site-verdict").text
    leaves = [game["game_id"] for game in site_data(published.site)["games"] if game["proof"] is not None]
    assert len(leaves) == 2
    assert games == {**dict.fromkeys(leaves, "verifies"), LIVE: "none"}
    assert page.find_element(By.ID, "checkpoint-line").get_attribute("data-verdict") == "verifies"
    assert "The site verifies: all 2 games" in page.find_element(By.ID, "site-verdict").text
    _clean(page)
    for name in ("index.html", "games/001.html"):  # the other pages load nothing either
        _console(page)
        page.get((published.site / name).as_uri())
        _clean(page)
    assert page.find_element(By.ID, "position-label").text  # the public replay's own script ran


def _flip_hex(text: str, at: int = 0) -> str:
    return text[:at] + ("1" if text[at] == "0" else "0") + text[at + 1 :]


def _flip_base64(text: str, at: int) -> str:
    # A character in the middle: the text stays canonical base64, its bytes change.
    return text[:at] + ("B" if text[at] == "A" else "A") + text[at + 1 :]


def _edit_result(data: dict[str, Any]) -> str:
    # The row's result: check.html shows the one it rebuilds from the signed row, so the row it ended at.
    game = next(game for game in data["games"] if game["proof"] is not None)
    end = game["leaf"]["end"]
    row = json.loads(end["content"])
    row["payload"]["winner"] = (row["payload"]["winner"] + 1) % len(row["payload"]["scores"])
    end["content"] = json.dumps(row, separators=(",", ":"))
    return str(game["game_id"])


def _edit_proof(data: dict[str, Any]) -> str:
    game = next(game for game in data["games"] if game["proof"] is not None)
    game["proof"]["proof"][0] = _flip_hex(game["proof"]["proof"][0], 5)
    return str(game["game_id"])


def _edit_root(data: dict[str, Any]) -> None:
    origin, size, root, *rest = data["note"].split("\n")
    data["note"] = "\n".join([origin, size, _flip_base64(root, 10), *rest])


def _edit_signature(data: dict[str, Any]) -> None:
    text, signatures = data["note"].split("\n\n")
    dash, name, signature = signatures.rstrip("\n").split(" ")
    data["note"] = f"{text}\n\n{dash} {name} {_flip_base64(signature, 30)}\n"


EDITS: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "a game's result": _edit_result,
    "a byte of a proof": _edit_proof,
    "a byte of the checkpoint's root": _edit_root,
    "a byte of the checkpoint's signature": _edit_signature,
}


def _edited(site: Path, into: Path, edit: Callable[[dict[str, Any]], str | None]) -> str | None:
    """A copy of ``site`` in ``into`` whose check.html's data ``edit`` changed; what ``edit`` returns."""
    shutil.copytree(site, into)
    page_file = into / "check.html"
    html = page_file.read_text("utf-8")
    found = _DATA.search(html)
    assert found is not None
    data = json.loads(found.group(2))
    edited = edit(data)
    # Embedded as the page embeds it (Jinja's tojson): no "<", ">", "&" or "'" as such.
    text = json.dumps(data)
    for char in "<>&'":
        text = text.replace(char, f"\\u{ord(char):04x}")
    page_file.write_text(html[: found.start(2)] + text + html[found.end(2) :], "utf-8")
    return edited


@pytest.mark.parametrize("edit", EDITS, ids=list(EDITS))
def test_an_edit_does_not_verify(browser: WebDriver, published: Published, tmp_path: Path, edit: str) -> None:
    site = tmp_path / "site"
    edited = _edited(published.site, site, EDITS[edit])

    verdict, games = _check(browser, site)
    assert verdict == "fails", browser.find_element(By.ID, "site-verdict").text
    assert "does NOT verify" in browser.find_element(By.ID, "site-verdict").text
    if edited is not None:  # one game's data: that game fails, the others still verify
        assert games.pop(edited) == "fails"
        assert games == {**{game: "verifies" for game in games if game != LIVE}, LIVE: "none"}
    else:  # the checkpoint's: every game fails with it
        line = browser.find_element(By.ID, "checkpoint-line")
        assert line.get_attribute("data-verdict") == "fails"
        assert "the checkpoint does NOT verify" in line.text
        assert {verdict for game, verdict in games.items() if game != LIVE} == {"fails"}
    _clean(browser)


#: Run before the page's own script (DevTools, not the page: its policy does not apply): a browser whose
#: WebCrypto has no Ed25519.
_NO_ED25519 = """
const importKey = crypto.subtle.importKey.bind(crypto.subtle);
crypto.subtle.importKey = (format, key, algorithm, ...rest) =>
  algorithm && algorithm.name === "Ed25519"
    ? Promise.reject(new DOMException("Ed25519 is not supported", "NotSupportedError"))
    : importKey(format, key, algorithm, ...rest);
"""


def test_a_browser_without_ed25519_is_told_so_and_shown_the_command_line(
    browser: WebDriver, published: Published
) -> None:
    added = browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": _NO_ED25519})
    try:
        verdict, games = _check(browser, published.site)
    finally:
        browser.execute_cdp_cmd(
            "Page.removeScriptToEvaluateOnNewDocument", {"identifier": added["identifier"]}
        )
    text = browser.find_element(By.ID, "site-verdict").text
    assert verdict == "unsupported", text
    assert "cannot check Ed25519 signatures" in text and "uno-audit check-proof --checkpoint" in text
    # The proofs are still checked, against the root as written; the signature is not.
    assert {game: v for game, v in games.items() if game != LIVE} == dict.fromkeys(
        [game for game in games if game != LIVE], "unsupported"
    )


def _consistency(page: WebDriver) -> tuple[str, str]:
    line = page.find_element(By.ID, "consistency-line")
    return str(line.get_attribute("data-verdict")), line.text


def test_a_republished_site_shows_that_the_previous_results_are_a_prefix(
    browser: WebDriver, republished: Republished
) -> None:
    verdict, games = _check(browser, republished.site)
    assert verdict == "verifies", browser.find_element(By.ID, "site-verdict").text
    assert set(games.values()) == {"verifies"} and len(games) == 4
    assert _consistency(browser) == (
        "verifies",
        "the previous results are a prefix of these (size 3 \u2192 4): verifies, the previous checkpoint's "
        "signature and the consistency proof",
    )
    _clean(browser)


def _edit_consistency_proof(data: dict[str, Any]) -> None:
    proof = data["previous"]["consistency"]["proof"]
    proof[-1] = _flip_hex(proof[-1], 7)


def _edit_previous_root(data: dict[str, Any]) -> None:
    origin, size, root, *rest = data["previous"]["note"].split("\n")
    data["previous"]["note"] = "\n".join([origin, size, _flip_base64(root, 10), *rest])


HISTORY_EDITS: dict[str, Callable[[dict[str, Any]], None]] = {
    "a byte of the consistency proof": _edit_consistency_proof,
    "a byte of the previous checkpoint's root": _edit_previous_root,
}


@pytest.mark.parametrize("edit", HISTORY_EDITS, ids=list(HISTORY_EDITS))
def test_an_edit_of_the_history_does_not_verify(
    browser: WebDriver, republished: Republished, tmp_path: Path, edit: str
) -> None:
    site = tmp_path / "site"
    _edited(republished.site, site, HISTORY_EDITS[edit])
    verdict, games = _check(browser, site)
    text = browser.find_element(By.ID, "site-verdict").text
    assert verdict == "fails" and "the previous results are NOT a prefix of these" in text, text
    line, said = _consistency(browser)
    assert line == "fails" and said.startswith(
        "the previous results are a prefix of these: does NOT verify"
    ), said
    assert set(games.values()) == {"verifies"}  # the games themselves still are in the new checkpoint
    _clean(browser)


def test_the_pages_consistency_check_agrees_with_merkle_py_at_every_size(
    browser: WebDriver, tmp_path: Path
) -> None:
    """check.js's RFC 9162 verification, for every pair of sizes up to 9 (every shape of the algorithm's
    paths: powers of two, odd and even splits), on proofs from service/checkpoints/merkle.py; and each
    fails on another previous root. The fast tier stops at size 4."""
    top = 9 if tiers.full else 4
    leaves = [TournamentLeaf(f"g{n}", 1, bytes([n]) * 32) for n in range(1, top + 1)]
    signer = Signer.from_seed("uno-audit.test", bytes(32))
    for size in range(1, top + 1):
        tree = tournament_tree(leaves[:size])
        new = tournament_checkpoint(signer.name, "t", leaves[:size])
        for old_size in range(0, size + 1):
            for forged in (False, True):
                old = tournament_checkpoint(signer.name, "t", leaves[:old_size])
                if forged:
                    old = Checkpoint(old.origin, old.size, bytes(32))
                proof = tree.consistency_proof(old_size, size)
                consistency = (
                    None if old_size in (0, size) else consistency_to_json("t", old_size, size, proof)
                )
                site = Site(
                    "t",
                    new.sign(signer),
                    size,
                    new.root_hash,
                    (signer.verifier.encode(),),
                    (),
                    (),
                    0,
                    Previous(old.sign(signer), old_size, old.root_hash, consistency),
                )
                folder = tmp_path / f"{old_size}-{size}-{forged}"
                write_site(folder, site_files(site))
                _check(browser, folder)
                assert _consistency(browser)[0] == ("fails" if forged else "verifies"), (
                    old_size,
                    size,
                    forged,
                )


_EVERY_POSITION = """
const slider = document.getElementById("slider"), shown = new Set();
for (let at = 0; at <= Number(slider.max); at++) {
  slider.value = String(at);
  slider.dispatchEvent(new Event("input"));
  document.querySelectorAll("#hands [data-card]").forEach(c => shown.add(c.getAttribute("data-card")));
}
return [Number(slider.max) + 1, [...shown]];
"""


def test_no_replay_on_the_site_draws_a_hand_card(browser: WebDriver, published: Published) -> None:
    """Every published replay, at every position, as Chromium draws it: each hand is card backs only (the
    cards the table showed are on the table, not in a hand)."""
    pages = sorted((published.site / "games").glob("*.html"))
    assert len(pages) == 3
    for path in pages:
        browser.get(path.as_uri())
        positions, shown = browser.execute_script(_EVERY_POSITION)
        assert positions > 1 and shown == ["hidden"], (path.name, positions, shown)
