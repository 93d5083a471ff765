"""POST /dev/captioned_speech (producers.captioned_speech): Kokoro-FastAPI's shape, in-process over ASGI."""

from __future__ import annotations

import base64

import msgspec
import pytest

from contracts import WordTiming
from contracts.word_timings import words_json
from foundation.audio import WAV_HEADER_BYTES
from tests.support.api_fakes import client, segment
from tests.unit.test_speech_streams_by_default import RATE, TONES, Blobs, completed, decoded_seconds, deps, scripted

pytestmark = pytest.mark.unit


def timed(index: int, text: str, at: int, words: list[tuple[int, int, int, int]]):
    seconds = TONES[index][1]
    return msgspec.structs.replace(
        segment(index),
        span_start=at,
        span_text=text,
        byte_length=WAV_HEADER_BYTES + 2 * round(RATE * seconds),
        duration_ms=round(1000 * seconds),
        words=words_json(tuple(WordTiming(start=s, end=e, start_ms=a, end_ms=b) for s, e, a, b in words)),
    )


async def captioned(**fields):
    done = completed(
        timed(0, "First part.", 0, [(0, 5, 50, 200), (6, 11, 250, 450)]), timed(1, "Second.", 12, [(12, 19, 100, 600)])
    )
    body = {"model": "tts-1", "voice": "alloy", "input": "First part. Second.", "response_format": "wav", **fields}
    async with client(deps(scripted(done), Blobs())) as api:
        return await api.post("/dev/captioned_speech", json=body)


async def test_the_whole_audio_and_each_words_seconds_from_its_start():
    response = await captioned(stream=False)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["audio_format"] == "wav"
    assert decoded_seconds(base64.b64decode(body["audio"])) == (TONES[0][1] + TONES[1][1], RATE)
    assert body["timestamps"] == [
        {"word": "First", "start_time": 0.05, "end_time": 0.2},
        {"word": "part.", "start_time": 0.25, "end_time": 0.45},
        {"word": "Second.", "start_time": 0.6, "end_time": 1.1},  # after the first segment's 0.5 s
    ]


async def test_without_timestamps_asked_there_are_none_and_stream_true_is_answered_whole_too():
    response = await captioned(return_timestamps=False)
    assert response.status_code == 200, response.text
    assert response.json()["timestamps"] is None
    assert response.headers["content-type"].startswith("application/json")
