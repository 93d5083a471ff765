"""Captions (producers.captions): words placed by their segments' real lengths and the stitcher's pauses."""

from __future__ import annotations

import json

import pytest

from contracts import WordTiming
from contracts.word_timings import words_json
from foundation.audio import WAV_HEADER_BYTES
from producers.captions import Word, cues, rendered, timeline
from projections.reads.rows import StoredSegment

pytestmark = pytest.mark.unit


def stored(index: int, text: str, samples: int, words: list[tuple[int, int, int, int]] | None, at: int = 0):
    timed = None if words is None else tuple(WordTiming(start=s, end=e, start_ms=a, end_ms=b) for s, e, a, b in words)
    return StoredSegment(
        segment_index=index, audio_sha256="ab" * 32, audio_uri=f"mem://{index}",
        duration_ms=round(samples / 24), span_start=at, span_text=text, sample_rate=24000,
        byte_length=WAV_HEADER_BYTES + 2 * samples, words=words_json(timed),
    )  # fmt: skip


def test_each_segments_words_start_where_its_audio_starts_counted_in_samples_not_rounded_ms():
    # 1000 segments of 1000.4 ms each: rounded to 1000 ms, they would drift 400 ms by the last one.
    segments = [stored(i, "Hi.", 24_010, [(7 * i, 7 * i + 3, 100, 500)], at=7 * i) for i in range(1000)]
    words, duration_ms = timeline([(segments, None)])
    assert words[0] == Word("Hi.", 100, 500)
    assert words[-1] == Word("Hi.", round(999 * 24_010 / 24 + 100), round(999 * 24_010 / 24 + 500))
    assert duration_ms == round(1000 * 24_010 / 24)


def test_a_documents_pauses_are_in_the_timeline_as_the_stitcher_writes_them():
    first = stored(0, "One two.", 24_000, [(0, 3, 0, 300), (4, 8, 400, 900)])
    second = stored(0, "Three.", 12_000, [(0, 6, 50, 450)])
    words, duration_ms = timeline([([first], "p"), ([second], "c")])
    assert [w.text for w in words] == ["One", "two.", "Three."]
    assert words[2].start_ms == 1000 + 700 + 50, "after the first part's second of audio and its 700 ms pause"
    assert duration_ms == 1000 + 700 + 500 + 2000


def test_a_segment_without_word_times_is_one_entry_spanning_its_audio():
    words, _ = timeline([([stored(0, "Said before words were timed.", 48_000, None)], None)])
    assert words == [Word("Said before words were timed.", 0, 2000)]


def test_cues_end_at_a_sentence_a_long_pause_or_forty_two_characters():
    said = [
        Word(t, 100 * i, 100 * i + 80)
        for i, t in enumerate(["Hello", "there.", "A", "rather", "long", "run", "of", "words", "that", "goes", "on"])
    ]
    said.append(Word("later", 9000, 9500))
    grouped = cues(said)
    assert [c.text for c in grouped] == ["Hello there.", "A rather long run of words that goes on", "later"]
    assert (grouped[0].start_ms, grouped[0].end_ms) == (0, 180)
    assert all(len(c.text) <= 42 for c in grouped)


def test_srt_vtt_and_json_say_the_same_times():
    words = [Word("Hello", 1234, 1500), Word("world.", 3_601_000, 3_601_250)]
    assert rendered(words, 3_602_000, "srt").decode() == (
        "1\n00:00:01,234 --> 00:00:01,500\nHello\n\n2\n01:00:01,000 --> 01:00:01,250\nworld.\n"
    )
    assert rendered(words, 3_602_000, "vtt").decode() == (
        "WEBVTT\n\n00:00:01.234 --> 00:00:01.500\nHello\n\n01:00:01.000 --> 01:00:01.250\nworld.\n"
    )
    body = json.loads(rendered(words, 3_602_000, "json"))
    assert body["duration_ms"] == 3_602_000
    assert body["words"] == [
        {"text": "Hello", "start_ms": 1234, "end_ms": 1500},
        {"text": "world.", "start_ms": 3_601_000, "end_ms": 3_601_250},
    ]
    assert [c["text"] for c in body["cues"]] == ["Hello", "world."]
