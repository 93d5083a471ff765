from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.work import growth, linear
from tts_node import segmenter
from tts_node.segmenter import MAX_TOKENS, segment_text, sentence_spans


def letters(text: str) -> list[int]:
    """Stand-in G2P: one id per letter, nothing for spaces, digits, punctuation or emoji."""
    return [ord(c) % 177 + 1 for c in text if c.isalpha()]


def texts(text: str, max_tokens: int = MAX_TOKENS, *, quick_start: bool = False) -> list[str]:
    return [s.text for s in segment_text(text, letters, max_tokens, quick_start=quick_start)]


def test_spans_index_the_original_text():
    text = "  Hello there.\n\n  General Kenobi!  You are a bold one…  "
    segments = segment_text(text, letters)
    assert [s.text for s in segments] == ["Hello there.", "General Kenobi!", "You are a bold one…"]
    for s in segments:
        assert text[s.start : s.end] == s.text
    assert segments[0].start == 2
    assert [s.index for s in segments] == [0, 1, 2]


def test_every_corpus_paragraph_splits_into_its_sentences(corpus):
    lines = [line for line in (corpus / "paragraphs.txt").read_text(encoding="utf-8").splitlines() if line.strip()]
    total = 0
    for line in lines:
        segments = texts(line)
        # The corpus paragraphs are single-spaced and have no abbreviations.
        assert " ".join(segments) == line
        for sentence in segments:
            assert sentence[-1] in ".!?", sentence
            assert not re.search(r"[.!?] [A-Z]", sentence), sentence
        total += len(segments)
    assert total > len(lines)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Dr. Smith went home. Then he slept.", ["Dr. Smith went home.", "Then he slept."]),
        ("Call before 9:30 a.m. on Jan. 5th. Thanks!", ["Call before 9:30 a.m. on Jan. 5th.", "Thanks!"]),
        ('He said "Stop." Then he left?! Yes.', ['He said "Stop."', "Then he left?!", "Yes."]),
        ("Pi is 3.14 exactly. Or not", ["Pi is 3.14 exactly.", "Or not"]),
        ("first line\nsecond line", ["first line", "second line"]),
        ("\u4e00\u4e8c\u3002\u4e09\uff1f", ["\u4e00\u4e8c\u3002", "\u4e09\uff1f"]),  # CJK: no space needed
    ],
)
def test_sentence_rules(text, expected):
    assert texts(text) == expected
    assert [text[s:e] for s, e in sentence_spans(text)] == expected


def test_a_long_sentence_is_split_at_clauses_and_regrouped_greedily():
    clauses = [f"clause number {word} goes here," for word in ("one", "two", "three", "four", "five", "six")]
    text = " ".join(clauses)[:-1] + "."
    max_tokens = 50  # each clause has 22..24 letters: two fit, three do not
    segments = segment_text(text, letters, max_tokens, quick_start=False)
    assert len(segments) == 3
    for s in segments:
        assert len(s.token_ids) <= max_tokens
        assert s.text[-1] in ",."
    for a, b in itertools.pairwise(segments):
        assert len(a.token_ids) + len(b.token_ids) > max_tokens  # greedy: neighbours could not merge


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "When the storm passed over the valley, the farmers counted their losses. Fields flooded, all of them.",
            [
                "When the storm passed over the valley,",
                "the farmers counted their losses.",
                "Fields flooded, all of them.",
            ],
        ),
        ("Yes, it is. Fine.", ["Yes, it is.", "Fine."]),  # too short a clause to be worth its own call
        ("Well, well, well, here we are again, old friend.", ["Well, well, well, here we are again,", "old friend."]),
        (
            "No clause ends in this sentence at all. Then one, here.",
            ["No clause ends in this sentence at all.", "Then one, here."],
        ),
    ],
)
def test_the_first_segment_is_the_first_clause_of_four_words_or_more(text, expected):
    assert texts(text, quick_start=True) == expected
    assert " ".join(expected) == text


def test_a_long_clause_is_split_at_words():
    text = " ".join(["abcd"] * 30) + "."
    segments = segment_text(text, letters, max_tokens=10)
    assert [len(s.token_ids) for s in segments] == [8] * 15
    assert all(text[s.start : s.end] == s.text for s in segments)
    assert " ".join(s.text for s in segments) == text


def test_a_single_huge_word_is_truncated_to_max_tokens():
    text = "Short. " + "a" * 600 + " end."
    segments = segment_text(text, letters)
    assert [s.text for s in segments] == ["Short.", "a" * 600, "end."]
    assert len(segments[1].token_ids) == MAX_TOKENS


@pytest.mark.parametrize("text", ["", "   \n ", "... !!! ???", "\U0001f389\U0001f680 \u2014 \U0001f600.", "1 2 3."])
def test_text_without_letters_gives_no_segments(text):
    assert segment_text(text, letters) == []


def test_unspeakable_sentences_are_dropped_and_indexes_stay_contiguous():
    segments = segment_text("One. \U0001f389! Two. ... Three.", letters)
    assert [s.text for s in segments] == ["One.", "Two.", "Three."]
    assert [s.index for s in segments] == [0, 1, 2]


# Characters the rules treat specially, mixed with arbitrary ones.
PIECES = st.one_of(
    st.sampled_from([*"ab \n\t.,;!?\u2026\u2014-:'\"\u3002\u3001\U0001f389\u00e9", "Dr. ", "a.m. ", "3.1"]),
    st.characters(),
)


@settings(deadline=None, max_examples=200)
@given(parts=st.lists(PIECES, max_size=80), max_tokens=st.integers(min_value=1, max_value=12))
def test_segments_are_ordered_disjoint_spans_of_the_text(parts, max_tokens):
    text = "".join(parts)
    segments = segment_text(text, letters, max_tokens)
    position = 0
    for i, s in enumerate(segments):
        assert s.index == i
        assert position <= s.start < s.end <= len(text)
        assert s.text == text[s.start : s.end]
        assert not s.text[0].isspace()
        assert not s.text[-1].isspace()
        assert 1 <= len(s.token_ids) <= max_tokens
        position = s.end
    if len(letters(text)) <= max_tokens:
        # Nothing needed truncating, so every letter is spoken exactly once.
        assert sum(len(s.token_ids) for s in segments) == len(letters(text))


# Work linear in the text: counted (regex steps in the engine's step model, lines of Python), never timed,
# so the same on any machine under any load. Each fails with the pattern it pins put back.


def test_regression_a_run_of_full_stops_was_segmented_in_quadratic_steps():
    """The sentence-end pattern was tried from every full stop of a run, scanning the rest of it each time.
    Counted, not timed: the same count on any machine under any load, so it cannot flake."""
    counts = growth(lambda n: sentence_spans("." * n + "x"), (segmenter,), 2000)
    assert linear(counts, 2000), counts


def test_regression_a_run_of_clause_marks_was_split_in_quadratic_steps():
    """The clause-end pattern, likewise. Counted, not timed: cannot flake."""
    counts = growth(lambda n: segmenter._clause_spans("," * n + "x", (0, n + 1)), (segmenter,), 2000)
    assert linear(counts, 2000), counts
