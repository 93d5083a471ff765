"""The documentation site's hook (mkdocs.yml names it): README.md is the site's home page.

``docs/index.md`` stands in for it: that page is made from README.md, whose links into ``docs/`` are made
relative to ``docs/`` (``docs/api.md`` → ``api.md``), and a page's link to the README (``../README.md``, as
GitHub reads it) goes to the home page. The README stays the one front door, on GitHub and on the site,
and ``mkdocs build --strict`` checks its links as it checks every page's. A link to anything else outside
``docs/`` is left as it is, for the build to refuse.

In a table, GitHub needs a pipe inside code escaped (``wav\\|mp3``) and Python-Markdown shows the backslash:
a table row's code is given its pipes back.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Final

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

ROOT: Final = Path(__file__).resolve().parent.parent
HOME: Final = "index.md"
_LINK: Final = re.compile(r"(\]\()(?![a-z][a-z0-9+.-]*:|#)([^)#\s]+)")  # a relative link's path: ](path
_CODE: Final = re.compile(r"`[^`\n]*`")  # a code span, paired from the left as Markdown pairs them


def on_page_markdown(markdown: str, /, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    source = page.file.src_uri
    if source == HOME:
        markdown = repoint((ROOT / "README.md").read_text(), ".", HOME)
    else:
        markdown = repoint(markdown, posixpath.dirname(f"docs/{source}"), source)
    return unescape_table_code(markdown)


def unescape_table_code(markdown: str) -> str:
    """``markdown`` with ``\\|`` as ``|`` in the code of its table rows (where Python-Markdown needs no escape)."""
    return "\n".join(
        _CODE.sub(lambda code: code[0].replace("\\|", "|"), line) if line.startswith("|") else line
        for line in markdown.split("\n")
    )


def repoint(markdown: str, written_in: str, page: str) -> str:
    """``markdown``'s relative links, written from ``written_in`` (a folder of the checkout), as links from
    ``page`` (under docs/): the README is the home page."""
    at = posixpath.dirname(f"docs/{page}")

    def link(match: re.Match[str]) -> str:
        target = posixpath.normpath(posixpath.join(written_in, match[2]))
        if target == "README.md":
            target = f"docs/{HOME}"
        if not target.startswith("docs/"):
            return match[0]
        return match[1] + posixpath.relpath(target, at)

    return _LINK.sub(link, markdown)
