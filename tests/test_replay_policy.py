"""The replay page's Content-Security-Policy, read from the page itself: it comes first in ``<head>``,
its hashes are the SHA-256 of the page's own inline script and stylesheet (and nothing else), it loads
nothing, and the markup relies on nothing the policy blocks (inline handlers, ``style`` attributes).
tests/test_replay_browser.py shows Chromium enforcing it.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from pathlib import Path

import pytest

from service.audit.replay_html import record_replay_html
from service.records.record import read_record_file
from service.records.verify import verify_record

DATA = Path(__file__).parent / "data"
RECORD = DATA / "replay" / "wd4_challenge_and_catch.jsonl"
META = re.compile(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">')
#: Every ``<script>``, its attributes and text. The browser runs those with no type or a JavaScript one;
#: a data block (the page's JSON) never runs, so the policy needs no hash for it.
SCRIPT = re.compile(r"<script((?:\s[^>]*)?)>(.*?)</script>", re.S | re.I)
STYLE = re.compile(r"<style(?:\s[^>]*)?>(.*?)</style>", re.S | re.I)
JAVASCRIPT_TYPE = re.compile(r'\btype="(text/javascript|module)"', re.I)


def page_of(path: Path, seat: int | None = None, title: str | None = None) -> str:
    record = read_record_file(path)
    return record_replay_html(record, verify_record(record), seat=seat, title=title or path.name)


def directives(page: str) -> dict[str, list[str]]:
    """The page's policy, directive by directive (its sources in order)."""
    found = META.findall(page)
    assert len(found) == 1, "the page has exactly one policy"
    parsed: dict[str, list[str]] = {}
    for directive in html.unescape(found[0]).split(";"):
        name, *sources = directive.split()
        assert name not in parsed, f"{name} given twice (the browser would ignore the second)"
        parsed[name] = sources
    return parsed


def sha256_source(text: str) -> str:
    return f"'sha256-{base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()}'"


PAGES = {
    "adjudicator": lambda: page_of(RECORD),
    "seat": lambda: page_of(RECORD, seat=1),
    "hostile title": lambda: page_of(RECORD, title='"><script>alert(1)</script>'),
    "score chart": lambda: page_of(DATA / "records" / "sonic_scoring_230.jsonl"),
}


@pytest.fixture(params=sorted(PAGES), scope="module")
def page(request: pytest.FixtureRequest) -> str:
    rendered: str = PAGES[request.param]()
    return rendered


def test_the_policy_comes_first_in_head(page: str) -> None:
    head = page[page.index("<head>") : page.index("</head>")]
    meta = META.search(head)
    assert meta is not None, "the policy is in <head>"
    # Only the character set may precede it: the policy covers nothing parsed before it.
    assert " ".join(head[: meta.start()].split()) == '<head> <meta charset="utf-8">'


def test_the_hashes_are_those_of_the_pages_own_script_and_stylesheet(page: str) -> None:
    policy = directives(page)
    scripts = [
        text
        for attributes, text in SCRIPT.findall(page)
        if "type=" not in attributes or JAVASCRIPT_TYPE.search(attributes)
    ]
    styles = STYLE.findall(page)
    assert len(scripts) == 1 and len(styles) == 1  # the page's one script and stylesheet
    assert sorted(policy["script-src"]) == sorted(sha256_source(text) for text in scripts)
    assert sorted(policy["style-src"]) == sorted(sha256_source(text) for text in styles)


def test_the_policy_allows_nothing_else(page: str) -> None:
    policy = directives(page)

    assert policy["default-src"] == ["'none'"]
    assert policy["object-src"] == ["'none'"]
    assert policy["base-uri"] == ["'none'"]
    assert policy["form-action"] == ["'none'"]
    assert set(policy) == {"default-src", "script-src", "style-src", "object-src", "base-uri", "form-action"}
    sources = [source for listed in policy.values() for source in listed]
    assert all(source == "'none'" or source.startswith("'sha256-") for source in sources), sources
    text = META.findall(page)[0]
    for loose in ("'unsafe-inline'", "'unsafe-eval'", "'unsafe-hashes'", "'strict-dynamic'", "*", "data:"):
        assert loose not in html.unescape(text)


def test_the_markup_needs_nothing_the_policy_blocks(page: str) -> None:
    # Inline handlers, style attributes and javascript: links would be silently blocked by the policy:
    # the page works without them (its script sets styles and listeners through the DOM, which is allowed).
    markup = STYLE.sub("", SCRIPT.sub("", page))
    assert not re.search(r"<[a-z][^>]*\s(on[a-z]+|style)\s*=", markup, re.I)
    assert "javascript:" not in markup.lower()
