"""The rules digest's own sentence for each rule id, from docs/RULES.md (the project's copy).

A rule is a bullet ``- `rule.id`: sentence`` (a scope in words or a parenthesis may stand between the id
and the colon); its sentence runs to the next bullet or the end of the paragraph. The first bullet of an
id is its rule (later ones, "How the engine reads the settled corners", only gloss it). Markdown emphasis
and code marks are dropped: the replay page shows the sentences as plain text. An installed package has
no docs/, so the sentences ship as rule_sentences.json: ``python -m service.audit.rule_text`` writes it,
``--check`` (CI) fails when it differs from the digest.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path

#: The project's copy of the rules digest, in a source tree.
RULES_PATH = Path(__file__).resolve().parents[2] / "docs" / "RULES.md"
#: Its sentences as package data, what the pages embed (written from :data:`RULES_PATH`).
SENTENCES_PATH = Path(__file__).with_name("rule_sentences.json")
_BULLET = re.compile(r"^(?P<indent> *)- (?P<text>.*)$")
_HEAD = re.compile(r"^(?:[A-Z][\w ]*? )?`(?P<id>[a-z][a-z0-9-]*(?:\.[a-z0-9-]+)+)`")


def plain(text: str) -> str:
    """Markdown text as the page shows it: emphasis and code marks dropped, whitespace collapsed."""
    return " ".join(text.replace("**", "").replace("`", "").split())


def _sentence(rest: str) -> str | None:
    """The sentence after a rule id: past an optional parenthesis (which may hold colons), the colon (or
    the full stop closing a parenthesis that is a sentence of its own, as ``house.stacking``'s)."""
    rest, stop = rest.lstrip(), ":"
    if rest.startswith("("):
        stop = ":."
        depth = 0
        for index, char in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0:
                rest = rest[index + 1 :].lstrip()
                break
    return plain(rest[1:]) if rest[:1] and rest[0] in stop else None


def _bullets(lines: Iterable[str]) -> Iterable[str]:
    """Each bullet's text with its continuation lines (deeper indented, not a bullet of their own)."""
    current: list[str] | None = None
    indent = 0
    for line in lines:
        bullet = _BULLET.match(line)
        deeper = line.strip() and len(line) - len(line.lstrip()) > indent
        if bullet is None and current is not None and deeper:
            current.append(line.strip())
            continue
        if current is not None:
            yield " ".join(current)
            current = None
        if bullet is not None:
            current, indent = [bullet["text"]], len(bullet["indent"])
    if current is not None:
        yield " ".join(current)


def parse_rules(text: str) -> dict[str, str]:
    """Every rule id of a digest's ``text`` with its sentence (the first bullet naming it wins)."""
    found: dict[str, str] = {}
    for bullet in _bullets(text.splitlines()):
        head = _HEAD.match(bullet)
        if head is None or head["id"] in found:
            continue
        sentence = _sentence(bullet[head.end() :])
        if sentence:
            found[head["id"]] = sentence
    return found


@cache
def rule_sentences() -> Mapping[str, str]:
    """The digest's sentences by rule id, read once from the packaged :data:`SENTENCES_PATH`."""
    loaded: dict[str, str] = json.loads(SENTENCES_PATH.read_text(encoding="utf-8"))
    return loaded


def sentences_of(rule_ids: Iterable[str]) -> dict[str, str]:
    """The sentences of ``rule_ids`` only (those the digest has), in id order: what a page embeds."""
    known = rule_sentences()
    return {rule: known[rule] for rule in sorted(set(rule_ids)) if rule in known}


def _written() -> str:
    return json.dumps(parse_rules(RULES_PATH.read_text(encoding="utf-8")), indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write :data:`SENTENCES_PATH` from the digest, or with ``--check`` say whether it is up to date."""
    parser = argparse.ArgumentParser(description="the replay page's rule sentences from docs/RULES.md")
    parser.add_argument("--check", action="store_true", help="fail if rule_sentences.json is out of date")
    args = parser.parse_args(argv)
    text = _written()
    if args.check:
        if SENTENCES_PATH.read_text(encoding="utf-8") != text:
            print(f"{SENTENCES_PATH} is out of date: python -m service.audit.rule_text", file=sys.stderr)
            return 1
        print(f"{SENTENCES_PATH.name} is up to date")
        return 0
    SENTENCES_PATH.write_text(text, encoding="utf-8")
    print(f"wrote {SENTENCES_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
