"""The pure parts of bench/normalization_wer.py: word error rate and the reference text (no model, no recognizer)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.normalization_wer import (
    HELD,
    Scored,
    Summary,
    edit_distance,
    pick_voice,
    read_sentences,
    reference_words,
    sign_test_p,
    spoken_words,
    to_pcm16,
    word_error_rate,
)

pytestmark = pytest.mark.unit

W = str.split


@pytest.mark.parametrize(
    ("reference", "hypothesis", "distance", "wer"),
    [
        ("the cat sat", "the cat sat", 0, 0.0),
        ("the cat sat", "the bat sat", 1, 1 / 3),  # a substitution
        ("the cat sat", "the cat sat down", 1, 1 / 3),  # an insertion at the end
        ("the cat sat", "oh the cat sat", 1, 1 / 3),  # an insertion at the start
        ("the cat sat", "the sat", 1, 1 / 3),  # a deletion
        ("the cat sat", "", 3, 1.0),  # heard nothing: every word deleted
        ("nine", "nine nine nine", 2, 2.0),  # insertions push WER over 1
        ("a b c d", "b c d e", 2, 0.5),  # a deletion and an insertion, not four substitutions
        ("seven forty five", "seven forty five p m", 2, 2 / 3),
    ],
)
def test_word_error_rate(reference, hypothesis, distance, wer):
    assert edit_distance(W(reference), W(hypothesis)) == distance
    assert word_error_rate(W(reference), W(hypothesis)) == pytest.approx(wer)


def test_distance_is_symmetric_and_zero_only_for_equal_lists():
    assert edit_distance(W("a b c"), W("x b")) == edit_distance(W("x b"), W("a b c")) == 2
    assert edit_distance([], []) == 0
    assert edit_distance([], W("a b")) == 2


def test_an_empty_reference_has_no_error_rate():
    with pytest.raises(ValueError, match="reference"):
        word_error_rate([], W("anything"))


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("Twenty-first floor.", ["twenty", "first", "floor"]),
        ("seven forty-five p m, from platform nine!", W("seven forty five p m from platform nine")),
        ("It's twelve o'clock", ["it's", "twelve", "o'clock"]),
        ("the '80s and the dogs' bowls", W("the 80s and the dogs bowls")),
        ("9:30 a.m. at the U.N.", W("9 30 a m at the u n")),
        ("  \u2014 ... ", []),
    ],
)
def test_spoken_words(text, words):
    assert spoken_words(text) == words


def test_the_reference_is_the_normalized_spoken_form():
    assert reference_words("Tickets cost $18.50 each.") == W("tickets cost eighteen dollars and fifty cents each")
    assert reference_words("The 21st floor at 7:45 p.m.") == W("the twenty first floor at seven forty five p m")
    assert reference_words("Dr. Patel saw 27 patients.") == W("doctor patel saw twenty seven patients")


def test_the_held_set_has_something_to_normalize_in_every_sentence():
    sentences = read_sentences(HELD)
    assert 25 <= len(sentences) <= 40
    assert len(set(sentences)) == len(sentences)
    for sentence in sentences:
        assert reference_words(sentence) != spoken_words(sentence), sentence


def test_pcm_is_16_khz_16_bit_padded_and_clipped():
    rate = 24000
    samples = np.full(rate, 2.0, dtype=np.float32)  # one second, out of range
    pcm = np.frombuffer(to_pcm16(samples, rate, pad_s=0.5), dtype="<i2")
    assert len(pcm) == pytest.approx(16000 + 2 * 8000, abs=2)
    assert not pcm[:8000].any()
    assert not pcm[-8000:].any()
    assert pcm.max() <= 32767
    assert pcm[16000] > 32000


def test_voice_choice():
    assert pick_voice(("jf_alpha", "af_heart")) == "af_heart"
    assert pick_voice(("jf_alpha", "jm_kumo")) == "jf_alpha"
    with pytest.raises(ValueError, match="no voices"):
        pick_voice(())


def test_summary_counts_better_worse_equal():
    def scored(on: float, off: float) -> Scored:
        return Scored("s", "r", "", "", on, off)

    summary = Summary.of([scored(0.2, 0.5), scored(0.5, 0.2), scored(0.3, 0.3), scored(0.0, 1.0)])
    assert (summary.better, summary.worse, summary.equal) == (2, 1, 1)
    assert summary.mean_on == pytest.approx(0.25)
    assert summary.mean_off == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("wins", "losses", "p"),
    [(0, 0, 1.0), (1, 1, 1.0), (5, 0, 0.0625), (0, 5, 0.0625), (10, 0, 2 / 1024), (18, 9, 0.1221)],
)
def test_sign_test(wins, losses, p):
    assert sign_test_p(wins, losses) == pytest.approx(p, abs=1e-4)
