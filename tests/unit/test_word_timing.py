"""Word times from phoneme durations (tts_node.word_timing): written words to spoken ones, ids to words."""

from __future__ import annotations

import itertools

import pytest

from tts_node.engine import Segment
from tts_node.word_timing import LEAD_FRAMES, entries, id_runs, word_times

pytestmark = pytest.mark.unit

SPACE, COMMA = 16, 3
SILENT = frozenset({SPACE, COMMA})


def segment(text: str, spoken: str, ids: list[int], start: int = 0) -> Segment:
    return Segment(index=0, start=start, end=start + len(text), text=text, token_ids=tuple(ids), spoken=spoken)


def test_a_written_form_the_normalizer_spelled_out_is_one_entry_spanning_its_spoken_words():
    written = "It weighs 2.5 kg today."
    found = entries(written, "It weighs two point five kilograms today.")
    assert [(written[e.start : e.end], e.spoken) for e in found] == [
        ("It", ("It",)),
        ("weighs", ("weighs",)),
        ("2.5 kg", ("two", "point", "five", "kilograms")),
        ("today.", ("today.",)),
    ]


def test_spoken_words_with_no_written_word_go_to_a_neighbour_and_symbols_said_as_nothing_to_none():
    assert [e.spoken for e in entries("Hi", "well Hi")] == [("well", "Hi")]
    assert [(e.start, e.end) for e in entries("A \u2192 B", "A B")] == [(0, 1), (4, 5)]


def test_ids_split_into_words_at_spaces_with_punctuation_left_out():
    assert id_runs([1, 2, COMMA, SPACE, 5, SPACE, SPACE, 6, 7], SPACE, SILENT) == [[0, 1], [4], [7, 8]]


def test_each_word_starts_at_its_first_phoneme_and_ends_after_its_last_scaled_to_the_real_audio():
    # "ab, c": pad, a, b, comma, space, c, pad (frames 4, 1, 2, 3, 1, 2, 5: 18 in all)
    seg = segment("ab, c", "ab, c", [1, 2, COMMA, SPACE, 5], start=100)
    words = word_times(seg, [4, 1, 2, 3, 1, 2, 5], 18 * 600, SPACE, SILENT)
    lead = LEAD_FRAMES
    assert [(w.start, w.end, w.first, w.last) for w in words or ()] == [
        (100, 103, (4 - lead) * 600, (7 - lead) * 600),  # "ab," frames 4 to 7: the comma's pause is not in it
        (104, 105, (11 - lead) * 600, (13 - lead) * 600),
    ]
    scaled = word_times(seg, [4, 1, 2, 3, 1, 2, 5], 9 * 600, SPACE, SILENT)
    assert [(w.first, w.last) for w in scaled or ()] == [
        ((4 - lead) * 300, (7 - lead) * 300),
        ((11 - lead) * 300, (13 - lead) * 300),
    ]


def test_when_espeak_says_another_number_of_words_each_entry_takes_its_share_of_the_ids():
    # "2.5" read as written: one spoken word to the normalizer, three to espeak.
    seg = segment("x 2.5", "x 2.5", [1, SPACE, 2, SPACE, 3, SPACE, 4, 5])
    words = word_times(seg, [0, 1, 1, 1, 1, 1, 1, 1, 1, 0], 8 * 600, SPACE, SILENT) or ()
    assert [(w.start, w.end) for w in words] == [(0, 1), (2, 5)]
    assert words[0].first == 0
    assert words[-1].last == (8 - LEAD_FRAMES) * 600, "heard a little before its frames say"
    assert all(a.last <= b.first for a, b in itertools.pairwise(words))


def test_durations_that_do_not_fit_the_ids_give_no_times():
    seg = segment("ab", "ab", [1, 2])
    assert word_times(seg, [1, 1, 1], 1800, SPACE, SILENT) is None
    assert word_times(seg, [0, 0, 0, 0], 1800, SPACE, SILENT) is None
