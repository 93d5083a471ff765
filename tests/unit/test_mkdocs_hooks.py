"""The documentation site's hook (infra/mkdocs_hooks.py): the README as the home page, its links and the pages'
links to it made to work on the site as they do on GitHub."""

from __future__ import annotations

from infra.mkdocs_hooks import repoint, unescape_table_code


def test_the_readmes_links_into_docs_are_made_relative_to_docs():
    readme = (
        "[API](docs/api.md#routes) ![d](docs/dashboard.png) [ADR](docs/adr/0001-work-distribution.md) "
        "[x](https://example.org/docs/a.md) [here](#glossary) [q](infra/quickstart.sh)"
    )
    assert repoint(readme, ".", "index.md") == (
        "[API](api.md#routes) ![d](dashboard.png) [ADR](adr/0001-work-distribution.md) "
        "[x](https://example.org/docs/a.md) [here](#glossary) [q](infra/quickstart.sh)"
    ), "a link out of docs/ stays as it is, for the strict build to refuse"


def test_a_pages_link_to_the_readme_goes_to_the_home_page():
    assert repoint("[g](../README.md#glossary) [b](benchmarks.md)", "docs", "architecture.md") == (
        "[g](index.md#glossary) [b](benchmarks.md)"
    )
    assert repoint("[r](../../README.md) [b](../benchmarks.md)", "docs/adr", "adr/0002-fair-scheduling.md") == (
        "[r](../index.md) [b](../benchmarks.md)"
    )


def test_a_table_rows_code_gets_its_pipes_back():
    markdown = "| `wav\\|mp3` and \\| | `a` \\| `b\\|c` |\nprose `wav\\|mp3`"
    assert unescape_table_code(markdown) == "| `wav|mp3` and \\| | `a` \\| `b|c` |\nprose `wav\\|mp3`"
