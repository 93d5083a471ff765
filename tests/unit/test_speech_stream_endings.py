"""How a streamed job ends (producers.speech): whole only when the job completed."""

from __future__ import annotations

import numpy as np
import pytest

from contracts import JobState
from foundation.audio import encode_wav
from producers.audio_out import StreamEnd, segments_as_they_appear
from producers.speech import StreamBroken, _raw_stream
from tests.support.api_fakes import progress, segment

SEGMENT = segment(0, uri="file:///x.wav")


class OneBlob:
    def get(self, ref):
        return encode_wav(np.zeros(2400, dtype=np.float32), 24000)


def reads(*script):
    """Successive reads of the job (the last repeats), each giving the segments from the index asked for."""
    remaining = list(script)

    async def read_since(since: int):
        state, segments = remaining.pop(0) if len(remaining) > 1 else remaining[0]
        return state, [s for s in segments if s.segment_index >= since]

    return read_since


async def no_wait() -> None:
    """Between reads: read again at once (the scripted job changes on every read)."""


async def collect(stream) -> list[bytes]:
    return [chunk async for chunk in stream]


async def test_regression_a_job_that_fails_after_its_first_audio_breaks_the_stream_instead_of_ending_it():
    end = StreamEnd()
    segments = segments_as_they_appear(
        reads(
            progress(JobState.CLAIMED, SEGMENT),
            progress(JobState.FAILED, error="engine died", code="engine_error"),
        ),
        no_wait,
        30.0,
        end,
    )
    chunks: list[bytes] = []

    async def consume() -> None:
        async for chunk in _raw_stream(OneBlob(), "wav", 24000, segments, end):  # type: ignore[arg-type]
            chunks.append(chunk)

    with pytest.raises(StreamBroken, match="engine died"):
        await consume()
    assert len(b"".join(chunks)) == 44 + 2 * 2400, "the header and the one segment were sent"
    assert (end.state, end.error_code) == ("failed", "engine_error")


async def test_a_completed_job_ends_the_stream_normally():
    end = StreamEnd()
    segments = segments_as_they_appear(reads(progress(JobState.COMPLETED, SEGMENT)), no_wait, 30.0, end)
    chunks = await collect(_raw_stream(OneBlob(), "pcm", 24000, segments, end))  # type: ignore[arg-type]
    assert len(chunks) == 1
    assert end.completed


async def test_a_job_that_does_not_finish_in_time_ends_as_a_timeout():
    end = StreamEnd()
    segments = segments_as_they_appear(reads(progress(JobState.CLAIMED)), no_wait, 0.0, end)
    assert await collect(segments) == []
    assert end.state == "timeout"
