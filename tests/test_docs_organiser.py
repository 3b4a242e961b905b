"""docs/arbiter.md's walk-through "A tournament from start to published results" runs as written: its
``uno-audit`` commands, in order, against a real server on the test's database, print what it shows; a
player's game verifies in the published check.html (headless Chromium); its Python files and rules on a
dispute over gRPC with the admin token; and the site published again shows the consistency proof, in
the command's output, to ``check-proof`` and in the browser.

The server deals every game from one fixed seed (tests.api.support.deal_from): the seeded bots then play
the same short games each run, so the positions and ruling the doc shows are this run's. Chromium as in
tests/test_replay_browser.py: without it the browser test skips, unless ``UNO_AUDIT_REQUIRE_BROWSER``.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.wait import WebDriverWait

from service.api.config import ServeConfig
from service.api.server import start_server
from service.checkpoints import Signer, write_signer
from service.cli.main import main
from tests.api.support import deal_from
from tests.doc_commands import DOCS, follows, shell_block, steps
from tests.test_replay_browser import browser

if TYPE_CHECKING:  # the root conftest is not importable as a module of a package
    from tests.conftest import ServiceLogin

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

__all__ = ["browser"]  # the fixture, used by name

ARBITER = DOCS / "arbiter.md"
HEADING = "## A tournament from start to published results"
ADMIN_TOKEN = "organiser-admin-token-0123456789"
#: The doc's stand-ins: the first game's id, the server's port, the service's verifier key.
GAME, PORT, KEY = "98bc3b46-…", "127.0.0.1:50051", "uno-audit+…"


def section() -> str:
    text = ARBITER.read_text(encoding="utf-8")
    start = text.index(HEADING)
    return text[start : text.index("\n## ", start + len(HEADING))]


def python_block() -> str:
    text = section()
    at = text.index("```python\n") + len("```python\n")
    return text[at : text.index("```\n", at)]


def test_the_section_shows_the_organisers_flow_in_order() -> None:
    blocks = [steps(shell_block(ARBITER, HEADING, nth)) for nth in range(3)]
    assert [[" ".join(words[1:3]) for words, _ in block] for block in blocks] == [
        ["tournament create", "bots --server", "publish --tournament"],
        ["verify --game"],
        ["bots --server", "publish --tournament", "check-proof --checkpoint"],
    ]
    text = section()
    assert "site/check.html" in text and "as_seat=1" in text
    assert text.index("```python") > text.index("$ uno-audit verify") and "--database-url" not in text
    whole = ARBITER.read_text(encoding="utf-8")
    assert whole.index(HEADING) < whole.index("## Publishing a tournament")


class Walk:
    """The walk-through's run: the ids and port the doc's stand-ins are replaced by, and its lines."""

    def __init__(self, port: int, key: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.port, self.key, self.capsys = port, key, capsys
        self.games: list[str] = []

    def word(self, word: str) -> str:
        if word == GAME:
            return self.games[0]
        if word == PORT:
            return f"127.0.0.1:{self.port}"
        return self.key if word == KEY else word

    async def block(self, nth: int) -> None:
        """Run the ``nth`` shell block's commands; each prints its lines of the doc, in order."""
        for words, expected in steps(shell_block(ARBITER, HEADING, nth)):
            args = [self.word(word) for word in words[1:]]
            code = await asyncio.to_thread(main, args)
            printed = self.capsys.readouterr().out.splitlines()
            assert code == 0, (args, printed)
            if args[0] == "bots":
                self.games += [line for line in printed if re.fullmatch(r"[0-9a-f-]{36}", line)]
            assert follows(expected, printed) == [], f"{' '.join(args)} printed:\n" + "\n".join(printed)

    def snippet(self) -> None:
        """The doc's Python, with the real game id and port; it prints the line under it."""
        code = python_block()
        expected = [line.removeprefix("# ") for line in code.splitlines() if line.startswith("# ")]
        code = code.replace(f'"{GAME}"', repr(self.games[0])).replace(PORT, f"127.0.0.1:{self.port}")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(ARBITER), "exec"), {})  # the docs' own code, as a reader runs it
        assert out.getvalue().splitlines() == expected


def check_page(page: WebDriver, site: Path) -> dict[str, str]:
    """check.html's verdicts: the site's, the consistency line's and each game's row, by id."""
    page.get((site / "check.html").as_uri())
    verdict = page.find_element(By.ID, "site-verdict")
    WebDriverWait(page, 30).until(lambda _: verdict.get_attribute("data-verdict") != "pending")
    rows = page.find_elements(By.CSS_SELECTOR, "#checks tr[data-game]")
    found = {str(row.get_attribute("data-game")): str(row.get_attribute("data-verdict")) for row in rows}
    found["site"] = str(verdict.get_attribute("data-verdict"))
    found["history"] = str(page.find_element(By.ID, "consistency-line").get_attribute("data-verdict"))
    return found


async def test_the_organisers_flow_runs_as_the_docs_show(
    database_url: str,
    service_login: ServiceLogin,
    browser: WebDriver,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # As in the doc: the commands run in serve's folder, on its database, and sign with the key it keeps.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("UNO_AUDIT_ADMIN_TOKEN", ADMIN_TOKEN)
    monkeypatch.delenv("UNO_AUDIT_CHECKPOINT_KEY", raising=False)
    signer = Signer.generate("uno-audit")
    (tmp_path / "uno-audit-data").mkdir()
    write_signer(signer, tmp_path / "uno-audit-data" / "checkpoint.key")
    deal_from(monkeypatch, 6)
    server = await start_server(
        ServeConfig(
            listen="127.0.0.1:0", database_url=await service_login.url(database_url), admin_token=ADMIN_TOKEN
        )
    )
    site = tmp_path / "site"
    try:
        walk = Walk(server.port, signer.verifier.encode(), capsys)
        await walk.block(0)
        assert len(walk.games) == 2
        first = check_page(browser, site)
        assert first == {**dict.fromkeys(walk.games, "verifies"), "site": "verifies", "history": "none"}
        await walk.block(1)
        await asyncio.to_thread(walk.snippet)
        await walk.block(2)
    finally:
        await server.stop(grace=2.0)
    again = check_page(browser, site)
    assert again == {**dict.fromkeys(walk.games, "verifies"), "site": "verifies", "history": "verifies"}
    line = browser.find_element(By.ID, "consistency-line").text
    assert line.startswith("the previous results are a prefix of these (size 2 \u2192 3): verifies")
    index = re.sub(r"<[^>]+>|\s+", " ", (site / "index.html").read_text("utf-8"))
    assert "consistent with the previous checkpoint (size 2 \u2192 3)" in index
