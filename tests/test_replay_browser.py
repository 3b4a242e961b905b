"""The arbiter's replay page in a real browser: headless Chromium opens the file, the keyboard steps to
the Wild Draw Four challenge and to the UNO catch, and what the page shows there is checked — the
ruling's rule id, the evidence cards, the hands drawn as cards — with no Content-Security-Policy
violation; then markup injected past the escaping is shown to run only once the policy is removed.

Chromium and its driver are Debian's ``chromium`` and ``chromium-driver``; ``.ci/run`` installs them.
Without them the tests skip, naming what to install, unless ``UNO_AUDIT_REQUIRE_BROWSER`` is set
(``.ci/run`` sets it): then they fail, so that CI never passes without running them.
"""

from __future__ import annotations

import os
import re
import shutil
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

from service.audit.replay_html import record_replay_html
from service.records.record import read_record_file
from service.records.verify import verify_record

RECORD = Path(__file__).parent / "data" / "replay" / "wd4_challenge_and_catch.jsonl"
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
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1100"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # CSP violations are logged there
    # The system's driver, named: Selenium then looks nothing up on the network.
    session = webdriver.Chrome(service=Service(executable_path=driver), options=options)
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
    """Press → until the position label starts with ``label`` (failing past the last position)."""
    for _ in range(100):
        if _label(page).startswith(f"{label} "):
            return
        before = _label(page)
        _press(page, Keys.ARROW_RIGHT)
        assert _label(page) != before, f"stuck at {before} before reaching {label}"
    raise AssertionError(f"never reached {label}")


def test_the_arbiter_steps_to_the_rulings_and_sees_the_evidence(browser: WebDriver, tmp_path: Path) -> None:
    record = read_record_file(RECORD)
    page = browser
    _open(
        page, tmp_path / "replay.html", record_replay_html(record, verify_record(record), title=RECORD.name)
    )
    find, find_all = page.find_element, page.find_elements

    assert _label(page).startswith("line 1 ")
    _step_to(page, "line 4")

    here = find(By.ID, "here")
    assert "wd4.challenge.upheld" in here.text and "UPHELD" in here.text
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
    assert find(By.CSS_SELECTOR, "#top .card").get_attribute("data-card") == "W+4"

    _step_to(page, "line 12")
    here = find(By.ID, "here")
    assert "uno.catch" in here.text and "ann against bob: PENALTY" in here.text
    evidence_hand = here.find_elements(By.CSS_SELECTOR, '[data-evidence="hand"] .card')
    assert [card.get_attribute("data-card") for card in evidence_hand] == ["Y7"]
    opened = here.find_element(By.CSS_SELECTOR, '[data-evidence="window_opened"]')
    assert "line 11" in opened.text
    bob_cards = find_all(By.CSS_SELECTOR, '.hand[data-player="bob"] .card')
    assert [c.get_attribute("data-card") for c in bob_cards] == ["Y7", "Y2", "Y3"]

    screenshot = tmp_path / "replay-catch.png"
    assert page.save_screenshot(str(screenshot))
    data = screenshot.read_bytes()
    assert len(data) > 10_000 and data.startswith(PNG)
    print(f"screenshot: {screenshot}")

    # The evidence's window link jumps back to where the window opened; ← steps back from there.
    opened.find_element(By.CSS_SELECTOR, "button.jump").click()
    assert _label(page).startswith("line 11 ")
    assert find(By.CSS_SELECTOR, '.hand[data-player="bob"] .badge').text == "UNO window open"
    _press(page, Keys.ARROW_LEFT)
    assert _label(page).startswith("line 10 ")
    # The page's own script and stylesheet, allowed by their hashes, did all that under its policy.
    assert _violations(page) == []


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
    assert _label(page).startswith("line 1 ")  # the page's own script still runs
    violations = _violations(page)
    assert any("inline script" in message for message in violations), violations
    assert any("inline event handler" in message for message in violations), violations

    # The control: the same page without its policy runs both, so the policy is what stopped them.
    _open(page, tmp_path / "unprotected.html", POLICY.sub("", injected))
    assert page.title == "pwned"
    assert page.find_element(By.TAG_NAME, "html").get_attribute("data-pwned") == "onerror"
    assert _violations(page) == []
