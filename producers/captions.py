"""Captions of a job or a document: each word's time in the audio the API serves, as SRT, WebVTT or JSON.

A segment's words are timed from its own audio's start (``SegmentProduced.words``, from the model's
predicted durations); the audio served is its segments back to back, a document's with the pauses of
:mod:`producers.document_audio` after each part. Each segment is placed by its real length, counted in
samples from its WAV's size (its ``duration_ms`` is rounded, and a book's worth of rounding would
drift), and each pause by the samples the stitcher writes, so the last word of a long document is as
close to its sound as the first. A segment with no word times (recorded before they were, or by an
engine that cannot tell) is one entry spanning its audio.

Cues (SRT, WebVTT) group words as subtitles do: a sentence's end, a pause of a second or more, or 42
characters end a cue.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import msgspec

from contracts.pauses import PAUSE_MS
from contracts.word_timings import words_of
from foundation.audio import wav_seconds
from projections.reads.rows import StoredSegment

CaptionFormat = Literal["srt", "vtt", "json"]
Part = tuple[Sequence[StoredSegment], str | None]
"""A part of the audio: its segments, and the break after it (``None``: none, as in a job's audio)."""
MEDIA_TYPES: Final[dict[str, str]] = {
    "srt": "application/x-subrip; charset=utf-8",
    "vtt": "text/vtt; charset=utf-8",
    "json": "application/json",
}
CUE_CHARS: Final = 42  # a subtitle line's usual limit
CUE_GAP_MS: Final = 1000
_SENTENCE_ENDS: Final = (".", "!", "?", "\u2026", '."', '?"', '!"', ".\u201d")


@dataclass(frozen=True)
class Word:
    """A caption entry as the listener hears it: its written text, from ``start_ms`` to ``end_ms``."""

    text: str
    start_ms: int
    end_ms: int


class WordView(msgspec.Struct, frozen=True):
    text: str
    start_ms: int
    end_ms: int


class CaptionsView(msgspec.Struct, frozen=True):
    """Times in milliseconds from the start of the audio the matching audio route serves."""

    duration_ms: int
    words: list[WordView]
    cues: list[WordView]


def seconds_of(segment: StoredSegment) -> float:
    """The segment's real length: from its WAV's size, unless that does not fit its rounded duration."""
    exact = wav_seconds(segment.byte_length, segment.sample_rate)
    return exact if abs(exact * 1000 - segment.duration_ms) <= 1 else segment.duration_ms / 1000


def segment_words(segment: StoredSegment, at_s: float) -> list[Word]:
    """``segment``'s entries, placed ``at_s`` seconds into the audio."""
    offset_ms = at_s * 1000
    timed = words_of(segment.words)
    if not timed:
        end = offset_ms + seconds_of(segment) * 1000
        return [Word(segment.span_text, round(offset_ms), round(end))] if segment.span_text.strip() else []
    base = segment.span_start
    return [
        Word(
            segment.span_text[w.start - base : w.end - base], round(offset_ms + w.start_ms), round(offset_ms + w.end_ms)
        )
        for w in timed
    ]


def timeline(parts: Sequence[Part]) -> tuple[list[Word], int]:
    """The words of ``parts`` and the audio's length in milliseconds. A pause is counted as the stitcher
    writes it: a whole number of samples at the segments' rate."""
    words: list[Word] = []
    at_s = 0.0
    for segments, brk in parts:
        for segment in segments:
            words.extend(segment_words(segment, at_s))
            at_s += seconds_of(segment)
        if brk is not None:
            rate = segments[0].sample_rate if segments else 24_000
            at_s += round(rate * PAUSE_MS[brk] / 1000) / rate
    return words, round(at_s * 1000)


def cues(words: Iterable[Word]) -> list[Word]:
    """Words grouped into subtitle cues."""
    found: list[Word] = []
    current: list[Word] = []
    for word in words:
        if current and _cue_ends(current, word):
            found.append(_joined(current))
            current = []
        current.append(word)
    if current:
        found.append(_joined(current))
    return found


def _cue_ends(current: list[Word], word: Word) -> bool:
    last = current[-1]
    text = " ".join(w.text for w in current)
    return (
        last.text.endswith(_SENTENCE_ENDS)
        or word.start_ms - last.end_ms >= CUE_GAP_MS
        or len(text) + 1 + len(word.text) > CUE_CHARS
    )


def _joined(words: list[Word]) -> Word:
    return Word(" ".join(w.text for w in words), words[0].start_ms, words[-1].end_ms)


def rendered(words: list[Word], duration_ms: int, fmt: CaptionFormat) -> bytes:
    """The captions of ``words`` in ``fmt``."""
    grouped = cues(words)
    if fmt == "json":
        view = CaptionsView(
            duration_ms, [WordView(w.text, w.start_ms, w.end_ms) for w in words],
            [WordView(c.text, c.start_ms, c.end_ms) for c in grouped],
        )  # fmt: skip
        return msgspec.json.encode(view)
    if fmt == "srt":
        blocks = [
            f"{n}\n{_clock(c.start_ms, ',')} --> {_clock(c.end_ms, ',')}\n{c.text}\n" for n, c in enumerate(grouped, 1)
        ]
        return "\n".join(blocks).encode()
    blocks = [f"{_clock(c.start_ms, '.')} --> {_clock(c.end_ms, '.')}\n{c.text}\n" for c in grouped]
    return ("WEBVTT\n\n" + "\n".join(blocks)).encode()


def _clock(ms: int, separator: str) -> str:
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}{separator}{millis:03d}"
