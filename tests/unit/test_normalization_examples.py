"""docs/engines.md's normalization tables (tts_node.normalization.examples): each row as the rules say it, and
the page showing the tables as the data prints them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tts_node.normalization import normalize
from tts_node.normalization.examples import CASES, SENTENCES, Example, markdown_table

pytestmark = pytest.mark.unit

PAGE = Path(__file__).resolve().parents[2] / "docs" / "engines.md"
REGENERATE = "run `voxlog docs`: it writes the tables into docs/engines.md's Text normalization section"


def rows(examples: tuple[Example, ...]) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("example", examples, ids=[example.written for example in examples])


@rows(SENTENCES)
def test_each_readme_sentence_is_said_as_the_table_says(example: Example) -> None:
    assert normalize(example.written, "en-us") == example.spoken


@rows(CASES)
def test_each_readme_case_is_said_as_the_table_says(example: Example) -> None:
    assert normalize(example.written, "en-us") == example.spoken


@rows(SENTENCES + CASES)
def test_a_spoken_form_is_left_as_it_is(example: Example) -> None:
    assert normalize(example.spoken, "en-us") == example.spoken


def test_the_cases_are_thirty_or_more_and_each_written_once() -> None:
    written = [example.written for example in SENTENCES + CASES]
    assert len(CASES) >= 30
    assert len(written) == len(set(written))


@pytest.mark.parametrize("examples", [SENTENCES, CASES], ids=["sentences", "cases"])
def test_the_page_shows_the_table_as_the_data_prints_it(examples: tuple[Example, ...]) -> None:
    assert markdown_table(examples) in PAGE.read_text(encoding="utf-8"), REGENERATE


def test_a_row_whose_text_holds_a_pipe_or_backtick_would_break_the_table() -> None:
    for example in SENTENCES + CASES:
        assert not {"|", "`"} & set(example.written + example.spoken + example.kind), example
