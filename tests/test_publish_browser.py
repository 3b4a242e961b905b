"""A published tournament checked in headless Chromium from file://: check.html recomputes every game's
leaf and inclusion proof and checks the checkpoint's Ed25519 signature with WebCrypto, and says the site
verifies; one edit of a game's result, of a byte of its proof, or of a byte of the checkpoint's root or
signature, and that game or the whole site does NOT verify. Nothing is fetched and no page's policy is
crossed.

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

from tests.test_publish import LIVE, Published, published, site_data
from tests.test_replay_browser import _console, browser

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(600)]

__all__ = ["browser", "published"]  # the fixtures, used by name

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
    game = next(game for game in data["games"] if game["proof"] is not None)
    result = game["result"]
    result["winner"] = next(name for name in game["players"] if name != result["winner"])
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


@pytest.mark.parametrize("edit", EDITS, ids=list(EDITS))
def test_an_edit_does_not_verify(browser: WebDriver, published: Published, tmp_path: Path, edit: str) -> None:
    site = tmp_path / "site"
    shutil.copytree(published.site, site)
    page_file = site / "check.html"
    html = page_file.read_text("utf-8")
    found = _DATA.search(html)
    assert found is not None
    data = json.loads(found.group(2))
    edited = EDITS[edit](data)
    # Embedded as the page embeds it (Jinja's tojson): no "<", ">", "&" or "'" as such.
    text = json.dumps(data)
    for char in "<>&'":
        text = text.replace(char, f"\\u{ord(char):04x}")
    page_file.write_text(html[: found.start(2)] + text + html[found.end(2) :], "utf-8")

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
