"""The baseline's streaming route reads its segment rows as the streaming code wants them (no services)."""

from __future__ import annotations

import pytest

from bench.baseline.api import stored_segments
from bench.baseline.queue import _SEGMENTS

pytestmark = pytest.mark.unit


def test_regression_the_baseline_streamed_nothing_once_segments_carried_word_timings():
    """StoredSegment gained ``words``, which the baseline's table does not have: reading a row raised
    KeyError inside the stream, and `voxlog bench` (f) failed on the baseline with 'peer closed connection
    without sending complete message body'."""
    columns = _SEGMENTS.split("SELECT ", 1)[1].split(" FROM ", 1)[0].split(", ")
    row = dict.fromkeys((c.strip() for c in columns), 0) | {
        "audio_sha256": "ab" * 32,
        "audio_uri": "file:///b.wav",
        "span_text": "Hello.",
    }
    [segment] = stored_segments([row])
    assert segment.words is None
    assert segment.audio.sha256 == "ab" * 32
