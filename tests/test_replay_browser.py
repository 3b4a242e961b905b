"""The arbiter's replay page in a real browser at a laptop's 1366×768: headless Chromium opens the file,
the keyboard steps to the Wild Draw Four challenge and to the UNO catch, a stored game's dispute is
stepped to, and what the page shows is checked — the ruling in words with the rule's sentence, the
evidence beside the board, the position in the address — with no Content-Security-Policy violation and
nothing fetched; then markup injected past the escaping is shown to run only once the policy is removed.
With ``UNO_AUDIT_WRITE_SCREENSHOTS=1`` the screenshots go to docs/img/ (docs/arbiter.md shows them).

Chromium and its driver are Debian's ``chromium`` and ``chromium-driver``; ``.ci/run`` installs them.
Without them the tests skip, naming what to install, unless ``UNO_AUDIT_REQUIRE_BROWSER`` is set
(``.ci/run`` sets it): then they fail, so that CI never passes without running them.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.command import Command
from selenium.webdriver.remote.webdriver import WebDriver

from service.app.auditor import Auditor
from service.audit.replay_html import record_replay_html
from service.audit.rule_text import RULES_PATH, plain
from service.records.record import read_record_file
from service.records.verify import verify_record
from service.store import EventStore
from tests.audit.support import import_and_rule

ROOT = Path(__file__).parent.parent
RECORD = Path(__file__).parent / "data" / "replay" / "wd4_challenge_and_catch.jsonl"
SCREENSHOTS_ENV = "UNO_AUDIT_WRITE_SCREENSHOTS"
WIDTH, HEIGHT = 1366, 768
CHROMIUM = ("chromium", "chromium-browser")
PNG = b"\x89PNG\r\n\x1a\n"
REQUIRE_BROWSER_ENV = "UNO_AUDIT_REQUIRE_BROWSER"
POLICY = re.compile(r'<meta http-equiv="Content-Security-Policy" content="[^"]*">')
#: What an attacker who got past the escaping would put where the record's text goes: an inline script
#: and an inline event handler, each leaving a mark if it runs.
INJECTED = (
    "<script>document.title = 'pwned'</script>"
    "<img src=x onerror=\"document.documentElement.setAttribute('data-pwned', 'onerror')\">"
)


def _binary(names: tuple[str, ...]) -> str | None:
    return next((found for name in names if (found := shutil.which(name)) is not None), None)


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    chromium, driver = _binary(CHROMIUM), _binary(("chromedriver",))
    if chromium is None or driver is None:
        missing = (
            "headless Chromium and its driver are not installed: apt-get install chromium chromium-driver"
        )
        if os.environ.get(REQUIRE_BROWSER_ENV):
            pytest.fail(f"{missing} ({REQUIRE_BROWSER_ENV} is set, so this test may not skip)")
        pytest.skip(missing)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size={WIDTH},{HEIGHT}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # CSP violations are logged there
    # The system's driver, named: Selenium then looks nothing up on the network.
    session = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    # The window's chrome takes some of its 768 pixels: the page itself gets a laptop's whole screen.
    metrics = {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}
    session.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    try:
        yield session
    finally:
        session.quit()


def _console(page: WebDriver) -> list[str]:
    """What the browser has logged since it was last asked (Chromium's ``get_log``, typed)."""
    entries: list[dict[str, Any]] = page.execute(Command.GET_LOG, {"type": "browser"})["value"]
    return [str(entry["message"]) for entry in entries]


def _open(page: WebDriver, path: Path, html: str) -> None:
    """Write ``html`` to ``path`` and open it from disk, as the page is meant to be."""
    path.write_text(html, "utf-8")
    _console(page)  # the browser is the module's: drop what earlier pages logged
    page.get(path.as_uri())


def _violations(page: WebDriver) -> list[str]:
    """The Content-Security-Policy violations the page has logged since it was opened."""
    return [message for message in _console(page) if "Content Security Policy" in message]


def _label(page: WebDriver) -> str:
    text: str = page.find_element(By.ID, "position-label").text
    return text


def _press(page: WebDriver, key: str) -> None:
    """Press ``key`` on the page, as a person would (on whatever has the focus)."""
    ActionChains(page).send_keys(key).perform()


def _step_to(page: WebDriver, label: str) -> None:
    """Press → until the position label is ``label`` (failing past the last position)."""
    for _ in range(100):
        if _label(page) == label:
            return
        before = _label(page)
        _press(page, Keys.ARROW_RIGHT)
        assert _label(page) != before, f"stuck at {before} before reaching {label}"
    raise AssertionError(f"never reached {label}")


def _digest_sentence(rule: str) -> str:
    """The sentence of ``rule`` as docs/RULES.md writes it: its bullet's text after the colon, to the next
    bullet (read here without service.audit.rule_text, which the page's text is checked against)."""
    text = RULES_PATH.read_text(encoding="utf-8")
    found = re.search(
        rf"^ *- `{re.escape(rule)}`(?: \([^)]*\))?: (.*?)(?=\n *- |\n\n|\n#)", text, re.M | re.S
    )
    assert found is not None, rule
    return plain(found.group(1))


def _screenshot(page: WebDriver, tmp_path: Path, name: str) -> Path:
    """Save the window (1366×768) as ``name``: into docs/img/ when asked to (the guide's pictures)."""
    folder = ROOT / "docs" / "img" if os.environ.get(SCREENSHOTS_ENV) == "1" else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    assert page.execute_script("return scrollY") == 0  # stepping scrolled only the list of positions
    assert page.save_screenshot(str(path))
    data = path.read_bytes()
    assert len(data) > 10_000 and data.startswith(PNG)
    assert struct.unpack(">II", data[16:24]) == (WIDTH, HEIGHT)  # the PNG's IHDR: a laptop's window
    return path


def _nothing_fetched(page: WebDriver) -> None:
    """The page loaded nothing but itself, and its policy was never crossed."""
    fetched = page.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert fetched == []
    entries: list[dict[str, Any]] = page.execute(Command.GET_LOG, {"type": "browser"})["value"]
    assert [e["message"] for e in entries if "Content Security Policy" in e["message"]] == []
    assert [e["message"] for e in entries if e["level"] == "SEVERE"] == []  # nor any error of its script


def _beside_the_board(page: WebDriver) -> None:
    """The evidence panel is in the first screen, right of the board (not below it)."""
    board = page.find_element(By.ID, "table").rect
    evidence = page.find_element(By.ID, "evidence").rect
    assert page.execute_script("return [innerWidth, innerHeight]") == [WIDTH, HEIGHT]
    assert evidence["y"] < HEIGHT and evidence["x"] >= board["x"] + board["width"], (board, evidence)


def test_the_arbiter_steps_to_the_rulings_and_sees_the_evidence(browser: WebDriver, tmp_path: Path) -> None:
    record = read_record_file(RECORD)
    page = browser
    _open(
        page, tmp_path / "replay.html", record_replay_html(record, verify_record(record), title=RECORD.name)
    )
    find, find_all = page.find_element, page.find_elements

    assert _label(page) == "line 1"  # one number: the line's own, no index of steps beside it
    _beside_the_board(page)
    _step_to(page, "line 4")

    here = find(By.ID, "here")
    assert "wd4.challenge.upheld" in here.text and "UPHELD" in here.text
    words = {
        w.get_attribute("data-words"): w.text for w in here.find_elements(By.CSS_SELECTOR, "[data-words]")
    }
    assert words["table"].endswith("the table upheld the challenge: ann took 4 cards (G7 G8 G9 Y1)")
    assert "ann held 1 card (B2) of the active colour B; ann draws 4" in words["rules"]
    assert words["remedy"] == "none: the table did what the rules require"
    sentence = here.find_element(By.CSS_SELECTOR, '[data-rule="wd4.challenge.upheld"] .sentence').text
    assert sentence == _digest_sentence("wd4.challenge.upheld")
    matching = here.find_elements(By.CSS_SELECTOR, '[data-evidence="matching"] .card[data-card="B2"]')
    assert len(matching) == 1 and matching[0].is_displayed()
    marked = here.find_elements(By.CSS_SELECTOR, '[data-evidence="hand"] .card.matching')
    assert [card.get_attribute("data-card") for card in marked] == ["B2"]
    # The hands, drawn as cards: ann holds ten after the upheld challenge, bob seven.
    ann = find_all(By.CSS_SELECTOR, '.hand[data-player="ann"] .card')
    bob = find_all(By.CSS_SELECTOR, '.hand[data-player="bob"] .card')
    assert (len(ann), len(bob)) == (10, 7)
    assert {card.get_attribute("data-card") for card in ann} >= {"G7", "G8", "G9", "Y1", "B2"}
    blue = next(card for card in ann if card.get_attribute("data-card") == "B2")
    assert blue.value_of_css_property("background-color") in ("rgba(29, 111, 209, 1)", "rgb(29, 111, 209)")
    assert blue.size["height"] > blue.size["width"] > 30  # a card, upright and readable
    # Every card says its colour in a letter, not in its colour alone (W: a wild).
    for card in find_all(By.CSS_SELECTOR, "#table .card:not(.back)"):
        token = card.get_attribute("data-card") or ""
        letter = card.find_element(By.CSS_SELECTOR, ".letter")
        assert letter.text == ("W" if token.startswith("W") else token[0]) and letter.is_displayed()
    assert find(By.CSS_SELECTOR, "#top .card").get_attribute("data-card") == "W+4"
    assert find(By.CSS_SELECTOR, "#top .card .letter").text == "W"
    # The raw events are folded away until asked for.
    raw = find(By.ID, "raw-events")
    assert raw.get_attribute("open") is None and not find(By.CSS_SELECTOR, "#events li").is_displayed()
    _beside_the_board(page)
    _screenshot(page, tmp_path, "replay-wd4.png")

    _step_to(page, "line 12")
    assert page.execute_script("return location.hash") == "#p=12"  # stepping keeps the address
    here = find(By.ID, "here")
    assert "uno.catch" in here.text and "ann against bob: PENALTY" in here.text
    assert "the table gave the UNO penalty: bob took 2 cards (Y2 Y3)" in here.text
    assert here.find_element(By.CSS_SELECTOR, '[data-rule="uno.penalty"] .sentence').text == _digest_sentence(
        "uno.penalty"
    )
    evidence_hand = here.find_elements(By.CSS_SELECTOR, '[data-evidence="hand"] .card')
    assert [card.get_attribute("data-card") for card in evidence_hand] == ["Y7"]
    opened = here.find_element(By.CSS_SELECTOR, '[data-evidence="window_opened"]')
    assert "line 11" in opened.text
    bob_cards = find_all(By.CSS_SELECTOR, '.hand[data-player="bob"] .card')
    assert [c.get_attribute("data-card") for c in bob_cards] == ["Y7", "Y2", "Y3"]

    # The evidence's window link jumps back to where the window opened; ← steps back from there.
    opened.find_element(By.CSS_SELECTOR, "button.jump").click()
    assert _label(page) == "line 11"
    assert find(By.CSS_SELECTOR, '.hand[data-player="bob"] .badge').text == "UNO window open"
    _press(page, Keys.ARROW_LEFT)
    assert _label(page) == "line 10" and page.execute_script("return location.hash") == "#p=10"
    # The page's own script and stylesheet, allowed by their hashes, did all that under its policy.
    _nothing_fetched(page)


def test_the_address_opens_the_page_at_its_position(browser: WebDriver, tmp_path: Path) -> None:
    record = read_record_file(RECORD)
    path = tmp_path / "replay.html"
    path.write_text(record_replay_html(record, verify_record(record)), "utf-8")
    page = browser
    _console(page)

    page.get(path.as_uri() + "#p=11")
    assert _label(page) == "line 11"
    assert page.find_element(By.CSS_SELECTOR, "#steps li.current").text.startswith("line 11")
    _press(page, Keys.ARROW_RIGHT)
    assert _label(page) == "line 12" and page.current_url.endswith("#p=12")
    page.execute_script("location.hash = '#p=4'")  # a link followed inside the page
    assert _label(page) == "line 4"
    _nothing_fetched(page)


async def test_a_disputed_catch_is_stepped_to_and_ruled_in_words(
    browser: WebDriver, tmp_path: Path, store: EventStore
) -> None:
    auditor = Auditor(store)
    ruled = await import_and_rule(
        auditor, claim="bob caught me after he had played his G1", note="the penalty is withdrawn"
    )
    game = ruled.game_id
    assert (ruled.filed_at, ruled.ruled_at) == (13, 14)
    page = browser
    _open(page, tmp_path / "disputed.html", await auditor.replay(game))

    _step_to(page, "position 11")
    here = page.find_element(By.ID, "here")
    assert "ann gives back the 2 cards (B8 B9) taken as the penalty" in here.text
    # The catch's ruling and the dispute of it are both here: the rule's sentence is quoted once, and the
    # dispute's ruling says what it decided of the dispute, not the catch's bare verdict.
    assert len(here.find_elements(By.CSS_SELECTOR, '[data-rule="uno.catch.invalid"]')) == 1
    decided = here.find_element(By.CSS_SELECTOR, ".decision")
    assert decided.get_attribute("data-outcome") == "upheld"
    assert decided.text == (
        "ruled at position 14: the dispute is upheld: bob's catch of ann earned no penalty by the rules "
        "(window closed at position 10), but the table gave the penalty; remedy: ann gives back the cards "
        "taken as the UNO penalty"
    )
    assert "THE TABLE APPLIED SOMETHING ELSE" not in page.page_source
    # The dispute's filing and its ruling are positions of their own, marked on the timeline.
    _press(page, Keys.ARROW_RIGHT)
    assert _label(page) == "position 12"
    _press(page, Keys.ARROW_RIGHT)
    assert _label(page) == "position 13"
    assert "ann disputes the uno catch at position 11" in page.find_element(By.ID, "what").text
    _press(page, Keys.ARROW_RIGHT)
    assert _label(page) == "position 14"
    here = page.find_element(By.ID, "here")
    assert "uno-catch dispute" in here.text and "the penalty is withdrawn" in here.text
    words = {
        w.get_attribute("data-words"): w.text for w in here.find_elements(By.CSS_SELECTOR, "[data-words]")
    }
    assert words["table"] == "bob caught ann; the table gave the UNO penalty: ann took 2 cards (B8 B9)"
    assert words["rules"].startswith("no penalty (window closed at position 10)")
    assert words["remedy"] == "ann gives back the 2 cards (B8 B9) taken as the penalty"
    sentence = here.find_element(By.CSS_SELECTOR, '[data-rule="uno.catch.invalid"] .sentence').text
    assert sentence == _digest_sentence("uno.catch.invalid")
    marks = page.find_elements(By.CSS_SELECTOR, "#marks .k-dispute")
    assert {m.get_attribute("title").split(":")[0] for m in marks} >= {"position 13", "position 14"}
    _beside_the_board(page)
    _screenshot(page, tmp_path, "replay-catch.png")
    _nothing_fetched(page)


def test_markup_past_the_escaping_runs_only_without_the_policy(browser: WebDriver, tmp_path: Path) -> None:
    record = read_record_file(RECORD)
    clean = record_replay_html(record, verify_record(record), title="TITLE-MARK")
    heading = "<h1>Replay: TITLE-MARK"
    assert clean.count(heading) == 1 and len(POLICY.findall(clean)) == 1
    injected = clean.replace(heading, f"<h1>Replay: {INJECTED}")
    page = browser

    _open(page, tmp_path / "injected.html", injected)
    assert page.title == "Replay: TITLE-MARK"
    assert page.find_element(By.TAG_NAME, "html").get_attribute("data-pwned") is None
    assert _label(page) == "line 1"  # the page's own script still runs
    violations = _violations(page)
    assert any("inline script" in message for message in violations), violations
    assert any("inline event handler" in message for message in violations), violations

    # The control: the same page without its policy runs both, so the policy is what stopped them.
    _open(page, tmp_path / "unprotected.html", POLICY.sub("", injected))
    assert page.title == "pwned"
    assert page.find_element(By.TAG_NAME, "html").get_attribute("data-pwned") == "onerror"
    assert _violations(page) == []
