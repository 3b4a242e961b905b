"""What every HTML page the project writes shares: its templates, and a Content-Security-Policy that
allows the page's own inline script and stylesheet by hash and loads nothing else."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from functools import cache

import jinja2

#: Nothing is loaded, framed, posted or used as a base: a page is one file.
_POLICY = ("default-src 'none'", "object-src 'none'", "base-uri 'none'", "form-action 'none'")


def content_policy(*, scripts: Sequence[str], styles: Sequence[str], read_site: bool = False) -> str:
    """A Content-Security-Policy allowing exactly the page's inline ``scripts`` and ``styles`` (each
    element's exact text) by SHA-256, no other script or style, and loading nothing; ``read_site``: but
    the page may read files of its own site (``connect-src 'self'``: a site's check reads what it checks)."""

    def sources(texts: Sequence[str]) -> str:
        hashes = (base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() for text in texts)
        return " ".join(f"'sha256-{digest}'" for digest in hashes) or "'none'"

    default, *others = _POLICY
    connect = ("connect-src 'self'",) if read_site else ()
    policy = (default, f"script-src {sources(scripts)}", f"style-src {sources(styles)}", *connect, *others)
    return "; ".join(policy)


@cache
def templates() -> jinja2.Environment:
    """The package's templates (service/audit/templates), autoescaped, strict about undefined names."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("service.audit", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
