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
import schemathesis
import soundfile as sf
from litestar.response import Stream
from schemathesis.checks import content_type_conformance, response_schema_conformance

from contracts import JobState
from foundation.audio import encode_wav
from foundation.audio_formats import supported_formats
from foundation.blobs import BlobNotFound
from producers.app import create_app
from producers.deps import ApiDeps
from producers.speech import _streamed
from projections.errors import ProjectionUnavailable
from tests.support.api_fakes import Reader, client, progress, segment
from tests.support.api_fakes import deps as api_deps

RATE = 24000
TONES = {0: (440, 0.5), 1: (660, 0.7)}  # segment index -> (Hz, seconds)
TOTAL_S = sum(seconds for _, seconds in TONES.values())
needs_mp3 = pytest.mark.skipif("mp3" not in supported_formats(), reason="this libsndfile cannot write mp3")


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

    def touch(self, refs: list[Any]) -> bool:
        return True


def scripted(*script: Any) -> Reader:
    """The projection as a script of what a stream reads (the last repeats; ``ProjectionUnavailable`` entries
    are raised); a job read whole (``stream: false``) is as the last entry says."""
    reader = Reader()
    reader.script = list(script)
    return reader


def claimed(*segments: Any) -> Any:
    return progress(JobState.CLAIMED, *segments)


def completed(*segments: Any) -> Any:
    return progress(JobState.COMPLETED, *segments)


TWO_SEGMENTS = (claimed(segment(0)), completed(segment(0), segment(1)))


def deps(reader: Reader, blobs: Blobs | None = None) -> ApiDeps:
    return api_deps(reader, blobs=blobs or Blobs(), speech_timeout_s=5.0, openai_default_voice="af_heart")


async def speak(reader: Reader, blobs: Blobs | None = None, **fields: Any) -> httpx.Response:
    body = {"model": "tts-1", "voice": "alloy", "input": "First part. Second part.", **fields}
    async with client(deps(reader, blobs)) as api:
        api.timeout = httpx.Timeout(30)
        return await api.post("/v1/audio/speech", json=body)


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
    response = await speak(scripted(*TWO_SEGMENTS), **fields)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith(content_type)
    assert "content-length" not in response.headers, "a stream's length is not known when it starts"
    assert response.headers["x-voxlog-job-id"]
    duration, rate = decoded_seconds(response.content)
    assert rate == RATE
    assert TOTAL_S <= duration <= TOTAL_S + 0.2, "both segments, whatever the decoder trusts"


async def test_pcm_is_streamed_and_holds_every_sample():
    response = await speak(scripted(*TWO_SEGMENTS), response_format="pcm")
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
    response = await speak(scripted(*TWO_SEGMENTS), **fields)
    assert response.status_code == 200, response.text
    assert int(response.headers["content-length"]) == len(response.content)
    duration, _ = decoded_seconds(response.content)
    assert duration == pytest.approx(TOTAL_S, abs=0.02), "one whole file, gapless"


async def test_sse_cannot_be_asked_for_with_stream_false():
    response = await speak(scripted(*TWO_SEGMENTS), stream_format="sse", stream=False)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "stream"


@pytest.mark.parametrize(
    ("script", "blobs", "status", "message"),
    [
        (
            (progress(JobState.FAILED, error="no speakable text", code="input_rejected"),),
            None,
            400,
            "no speakable text",
        ),
        ((progress(JobState.FAILED, error="engine died", code="engine_error"),), None, 500, "engine died"),
        ((ProjectionUnavailable("PostgreSQL is down"),), None, 503, "cannot be read"),
        (TWO_SEGMENTS, Blobs(missing=True), 500, "is gone"),
    ],
    ids=["rejected", "failed", "projection-down", "blob-gone"],
)
async def test_what_fails_before_the_first_audio_is_an_http_error_in_openais_shape(script, blobs, status, message):
    response = await speak(scripted(*script), blobs, response_format="wav")  # streamed
    assert response.status_code == status, response.text
    assert message in response.json()["error"]["message"]


async def test_the_body_starts_with_the_first_segment_before_the_job_completes():
    reader = scripted(claimed(segment(0)), claimed(segment(0)), completed(segment(0), segment(1)))
    answer = await _streamed(deps(reader), uuid.uuid4(), "ab" * 32, "wav", RATE, {})
    assert isinstance(answer, Stream)
    assert len(reader.progress_reads) == 1, "answered after the first projected segment, while still claimed"
    chunks = [chunk async for chunk in answer.iterator]  # type: ignore[union-attr]
    assert len(chunks) == 2, "one chunk per segment, the first with the header (the encoder holds nothing back)"
    assert chunks[0][:4] == b"RIFF"
    assert reader.progress_reads == [0, 1, 1], "each read asks only for the segments not sent yet"


def test_regression_the_documents_event_stream_schema_said_each_event_was_a_string():
    """Found by the fuzz campaign (schemathesis' response_schema_conformance, ST108): the text/event-stream answer
    was documented as ``{"type": "string"}``, which before OpenAPI 3.2's itemSchema describes each event, and
    each event is an object (its data, its name). The document says so now."""
    schema = schemathesis.openapi.from_asgi("/schema/openapi.json", create_app(deps(scripted(*TWO_SEGMENTS))))
    body = {"model": "tts-1", "voice": "alloy", "input": "First part. Second part.", "stream_format": "sse"}
    case = schema["/v1/audio/speech"]["POST"].Case(body=body, media_type="application/json")
    answer = case.call()
    assert answer.status_code == 200
    assert answer.headers["content-type"][0].startswith("text/event-stream")
    case.validate_response(answer, checks=[response_schema_conformance, content_type_conformance])
