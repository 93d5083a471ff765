"""POST /v1/audio/speech streams by default (producers.speech), in-process over ASGI with a scripted projection.

The official ``openai`` client sends no ``stream_format``; OpenAI's endpoint and Kokoro-FastAPI stream
then, and so does voxlog for every format that can be streamed. The projection here is a script of what
``reader.job`` returns, one entry a call (the last repeats), so that no Kafka or PostgreSQL is needed.
"""

from __future__ import annotations

import io
import uuid
from typing import Any

import httpx
import numpy as np
import pytest
import soundfile as sf
from litestar import Litestar
from litestar.response import Stream

from contracts.events import Producer
from foundation.audio import encode_wav
from foundation.audio_formats import supported_formats
from foundation.blobs import BlobNotFound
from producers.deps import ApiDeps
from producers.ports import Polling
from producers.queries import EngineVoices, ProjectionUnavailable
from producers.speech import _streamed, openai_speech
from producers.submit import Limits

RATE = 24000
TONES = {0: (440, 0.5), 1: (660, 0.7)}  # segment index -> (Hz, seconds)
TOTAL_S = sum(seconds for _, seconds in TONES.values())
ENGINES = [EngineVoices("kokoro-onnx", "m1", RATE, ("af_heart",), ("en-us",), 1)]
needs_mp3 = pytest.mark.skipif("mp3" not in supported_formats(), reason="this libsndfile cannot write mp3")


def segment(index: int) -> dict[str, Any]:
    return {"segment_index": index, "audio_sha256": "ab" * 32, "audio_uri": f"mem://{index}", "duration_ms": 100}


class Blobs:
    def __init__(self, missing: bool = False) -> None:
        self.missing = missing

    def get(self, ref: Any) -> bytes:
        if self.missing:
            raise BlobNotFound(f"{ref.uri} is gone")
        hz, seconds = TONES[int(ref.uri.rsplit("/", 1)[1])]
        return encode_wav(
            (0.5 * np.sin(2 * np.pi * hz * np.arange(int(RATE * seconds)) / RATE)).astype(np.float32), RATE
        )


class Reader:
    """The projection as a script of job rows; ``ProjectionUnavailable`` entries are raised."""

    def __init__(self, *script: dict[str, Any] | Exception) -> None:
        self.script = list(script)
        self.reads = 0

    async def engines(self) -> list[EngineVoices]:
        return ENGINES

    async def job_by_key(self, key: str) -> None:
        return None

    async def cached_job_id(self, fingerprint: str) -> None:
        return None

    async def job(self, job_id: uuid.UUID) -> dict[str, Any] | None:
        self.reads += 1
        entry = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(entry, Exception):
            raise entry
        return entry


class Log:
    def __init__(self) -> None:
        self.published: list[Any] = []

    async def publish(self, event: Any, partition: int | None = None) -> None:
        self.published.append(event)

    async def check(self) -> None:
        return None


def claimed(*segments: dict[str, Any]) -> dict[str, Any]:
    return {"state": "claimed", "segments": list(segments)}


def completed(*segments: dict[str, Any]) -> dict[str, Any]:
    return {"state": "completed", "segments": list(segments), "error_message": None, "error_code": None}


TWO_SEGMENTS = (claimed(segment(0)), completed(segment(0), segment(1)))


def deps(reader: Reader, blobs: Blobs | None = None) -> ApiDeps:
    limits = Limits(max_text_chars=1000, min_speed=0.5, max_speed=2.0, default_engine="kokoro-onnx")
    return ApiDeps(
        reader=reader,  # type: ignore[arg-type]
        publisher=Log(),
        blobs=blobs or Blobs(),  # type: ignore[arg-type]
        limits=limits,
        producer=Producer(service="api", instance="test"),
        audit=None,  # type: ignore[arg-type]
        lag=None,  # type: ignore[arg-type]
        speech_timeout_s=5.0,
        changes=Polling(0.0),
        openai_default_voice="af_heart",
    )


async def speak(reader: Reader, blobs: Blobs | None = None, **fields: Any) -> httpx.Response:
    app = Litestar(route_handlers=[openai_speech])
    app.state.deps = deps(reader, blobs)
    body = {"model": "tts-1", "voice": "alloy", "input": "First part. Second part.", **fields}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api", timeout=30) as client:
        return await client.post("/v1/audio/speech", json=body)


def decoded_seconds(data: bytes) -> tuple[float, int]:
    samples, rate = sf.read(io.BytesIO(data), dtype="float32")
    return len(samples) / rate, rate


@pytest.mark.parametrize(
    ("fields", "content_type"),
    [
        pytest.param({}, "audio/mpeg", marks=needs_mp3, id="openai-client-default-mp3"),
        pytest.param({"response_format": "wav"}, "audio/wav", id="wav"),
        pytest.param(
            {"response_format": "mp3", "stream_format": "audio"}, "audio/mpeg", marks=needs_mp3, id="mp3-audio"
        ),
    ],
)
async def test_without_stream_format_a_streamable_format_is_streamed(fields, content_type):
    response = await speak(Reader(*TWO_SEGMENTS), **fields)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith(content_type)
    assert "content-length" not in response.headers, "a stream's length is not known when it starts"
    assert response.headers["x-voxlog-job-id"]
    duration, rate = decoded_seconds(response.content)
    assert rate == RATE
    assert TOTAL_S <= duration <= TOTAL_S + 0.2, "both segments, whatever the decoder trusts"


async def test_pcm_is_streamed_and_holds_every_sample():
    response = await speak(Reader(*TWO_SEGMENTS), response_format="pcm")
    assert response.status_code == 200
    assert "content-length" not in response.headers
    assert len(response.content) == 2 * round(TOTAL_S * RATE)


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"response_format": "flac"}, id="flac-cannot-stream"),
        pytest.param({"response_format": "flac", "stream_format": "audio"}, id="flac-audio"),
        pytest.param({"response_format": "mp3", "stream": False}, marks=needs_mp3, id="mp3-stream-false"),
        pytest.param({"response_format": "wav", "stream": False, "stream_format": "audio"}, id="wav-stream-false"),
    ],
)
async def test_a_format_that_cannot_stream_or_stream_false_is_answered_whole(fields):
    response = await speak(Reader(*TWO_SEGMENTS), **fields)
    assert response.status_code == 200, response.text
    assert int(response.headers["content-length"]) == len(response.content)
    duration, _ = decoded_seconds(response.content)
    assert duration == pytest.approx(TOTAL_S, abs=0.02), "one whole file, gapless"


async def test_sse_cannot_be_asked_for_with_stream_false():
    response = await speak(Reader(*TWO_SEGMENTS), stream_format="sse", stream=False)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "stream"


@pytest.mark.parametrize(
    ("script", "blobs", "status", "message"),
    [
        (
            (
                {
                    "state": "failed",
                    "segments": [],
                    "error_message": "no speakable text",
                    "error_code": "input_rejected",
                },
            ),
            None,
            400,
            "no speakable text",
        ),
        (
            ({"state": "failed", "segments": [], "error_message": "engine died", "error_code": "engine_error"},),
            None,
            500,
            "engine died",
        ),
        ((ProjectionUnavailable("PostgreSQL is down"),), None, 503, "cannot be read"),
        (TWO_SEGMENTS, Blobs(missing=True), 500, "is gone"),
    ],
    ids=["rejected", "failed", "projection-down", "blob-gone"],
)
async def test_what_fails_before_the_first_audio_is_an_http_error_in_openais_shape(script, blobs, status, message):
    response = await speak(Reader(*script), blobs, response_format="wav")  # streamed
    assert response.status_code == status, response.text
    assert message in response.json()["error"]["message"]


async def test_the_body_starts_with_the_first_segment_before_the_job_completes():
    reader = Reader(claimed(segment(0)), claimed(segment(0)), completed(segment(0), segment(1)))
    answer = await _streamed(deps(reader), uuid.uuid4(), "ab" * 32, "wav", RATE)
    assert isinstance(answer, Stream)
    assert reader.reads == 1, "answered after the first projected segment, while the job was still claimed"
    chunks = [chunk async for chunk in answer.iterator]  # type: ignore[union-attr]
    assert len(chunks) == 3, "the header, then one chunk per segment"
    assert reader.reads == 3
