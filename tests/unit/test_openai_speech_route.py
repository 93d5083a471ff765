"""POST /v1/audio/speech against OpenAI's published document (tests/fixtures/openai/speech_openapi.json), in
process over ASGI with a scripted projection: every format in both stream formats, the SSE events and their
usage, instructions, voice names and errors. tests/e2e/test_openai_conformance.py does the same with the
official client and real processes."""

from __future__ import annotations

import base64
import io
import json
import math
from pathlib import Path
from typing import Any

import av
import httpx
import jsonschema
import numpy as np
import pytest
import soundfile as sf

from contracts import JobState
from foundation.audio import encode_wav
from producers.speech_instructions import WHY_NOT
from tests.support.api_fakes import Log, Reader, client, progress, segment
from tests.support.api_fakes import deps as api_deps

OPENAI = json.loads((Path(__file__).parents[1] / "fixtures/openai/speech_openapi.json").read_text())
SCHEMAS = OPENAI["components"]["schemas"]
FORMATS = SCHEMAS["CreateSpeechRequest"]["properties"]["response_format"]["enum"]
RATE = 24000
TONES = {0: (440, 0.5), 1: (660, 0.7)}  # segment index -> (Hz, seconds)
TOTAL_S = sum(seconds for _, seconds in TONES.values())
INPUT = "First part. Second part."


def conforms(instance: Any, name: str) -> None:
    """``instance`` is valid against the document's schema ``name`` (its references resolved in the document)."""
    jsonschema.validate(instance, {"$ref": f"#/components/schemas/{name}", "components": OPENAI["components"]})


class Blobs:
    def get(self, ref: Any) -> bytes:
        hz, seconds = TONES[int(ref.uri.rsplit("/", 1)[1])]
        tone = (0.5 * np.sin(2 * np.pi * hz * np.arange(int(RATE * seconds)) / RATE)).astype(np.float32)
        return encode_wav(tone, RATE)

    def touch(self, refs: list[Any]) -> bool:
        return True


def reader() -> Reader:
    scripted = Reader()
    scripted.script = [progress(JobState.CLAIMED, segment(0)), progress(JobState.COMPLETED, segment(0), segment(1))]
    return scripted


async def speak(log: Log | None = None, **fields: Any) -> httpx.Response:
    body = {"model": "tts-1", "voice": "alloy", "input": INPUT, **fields}
    conforms(
        {k: v for k, v in body.items() if k in SCHEMAS["CreateSpeechRequest"]["properties"]}, "CreateSpeechRequest"
    )
    deps = api_deps(reader(), log, blobs=Blobs(), speech_timeout_s=5.0, openai_default_voice="af_heart")
    async with client(deps) as api:
        api.timeout = httpx.Timeout(30)
        return await api.post("/v1/audio/speech", json=body)


def decoded_seconds(data: bytes, fmt: str) -> float:
    if fmt == "pcm":
        return len(data) / 2 / RATE
    if fmt in ("wav", "flac", "mp3"):  # mp3 through libsndfile (mpg123), which trusts an Info frame's count
        samples, rate = sf.read(io.BytesIO(data), dtype="float32")
        return len(samples) / rate
    with av.open(io.BytesIO(data)) as container:  # aac, opus (Ogg Opus decodes at 48 kHz)
        return sum(f.samples / f.sample_rate for f in container.decode(audio=0))


SLACK_S = {"mp3": (1105 + 2 * 1152) / RATE, "aac": 3 * 1024 / RATE, "opus": 0.03}


def events_of(response: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line[len("data: ") :]) for line in response.text.splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize("fmt", FORMATS)
async def test_every_format_of_the_document_comes_whole_as_long_as_the_job(fmt):
    response = await speak(response_format=fmt)
    assert response.status_code == 200, response.text
    assert decoded_seconds(response.content, fmt) == pytest.approx(TOTAL_S, abs=0.002 + SLACK_S.get(fmt, 0))


@pytest.mark.parametrize("fmt", FORMATS)
async def test_every_format_streams_as_openais_sse_events_with_usage(fmt):
    response = await speak(response_format=fmt, stream_format="sse")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    events = events_of(response)
    for event in events:
        conforms(event, "CreateSpeechResponseStreamEvent")
    *deltas, done = events
    assert {e["type"] for e in deltas} == {"speech.audio.delta"}
    assert done["type"] == "speech.audio.done"
    joined = b"".join(base64.b64decode(e["audio"]) for e in deltas)
    assert decoded_seconds(joined, fmt) == pytest.approx(TOTAL_S, abs=0.002 + SLACK_S.get(fmt, 0))
    assert done["usage"] == {
        "input_tokens": len(INPUT),
        "output_tokens": math.ceil(TOTAL_S / 0.025),
        "total_tokens": len(INPUT) + math.ceil(TOTAL_S / 0.025),
    }


async def test_aac_streams_as_adts():
    response = await speak(response_format="aac", stream_format="audio")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "audio/aac"
    assert "content-length" not in response.headers, "streamed, not answered whole"
    assert response.content[:2] in (b"\xff\xf1", b"\xff\xf9")


@pytest.mark.parametrize(
    ("instructions", "speed", "header"),
    [
        ("Speak slowly.", 0.8, "mapped; speed x0.8 = 0.8"),
        ("Speak very fast and cheerfully", 1.5, f"partly mapped; speed x1.5 = 1.5; not mapped: cheerfully ({WHY_NOT})"),
        ("Whisper, like a secret", 1.0, f"ignored; not mapped: whisper secret ({WHY_NOT})"),
        ("twice as fast", 2.0, "mapped; speed x2 = 2"),  # the fakes' fastest speed is 2.0
        ("3x", 2.0, "mapped; speed x3 = 2; speed held to the accepted range"),
    ],
)
async def test_instructions_are_mapped_or_reported_never_dropped(instructions, speed, header):
    log = Log()
    response = await speak(log, instructions=instructions, response_format="pcm")
    assert response.status_code == 200, response.text
    assert response.headers["x-voxlog-instructions"] == header
    assert log.published[0].payload.request.speed == pytest.approx(speed)


@pytest.mark.parametrize(
    ("voice", "instructions", "served"),
    [
        ("alloy", None, "jf_alpha"),  # VOXLOG_OPENAI_VOICES' default: alloy -> jf_alpha, which the engine has
        ("nova", None, "af_heart"),  # nova -> jf_nezumi, which it has not: VOXLOG_OPENAI_DEFAULT_VOICE
        ({"id": "shimmer"}, None, "jf_alpha"),  # a custom voice object
        ("jf_alpha", None, "jf_alpha"),  # the engine's own names pass as they are
        ("alloy", "Use the nova voice", "af_heart"),
        ("nova", "as jf_alpha", "jf_alpha"),
    ],
)
async def test_every_openai_voice_name_is_served_by_a_mapped_voice(voice, instructions, served):
    log = Log()
    fields = {"instructions": instructions} if instructions else {}
    response = await speak(log, voice=voice, response_format="pcm", **fields)
    assert response.status_code == 200, response.text
    assert response.headers["x-voxlog-voice"] == served
    assert log.published[0].payload.request.voice == served


async def test_the_voice_mapping_is_a_setting():
    log = Log()
    deps = api_deps(
        reader(), log, blobs=Blobs(), speech_timeout_s=5.0, openai_voices={"onyx": "af_heart(1)+jf_alpha(3)"}
    )
    async with client(deps) as api:
        response = await api.post(
            "/v1/audio/speech", json={"model": "tts-1", "voice": "onyx", "input": INPUT, "response_format": "pcm"}
        )
    assert response.status_code == 200, response.text
    assert log.published[0].payload.request.voice == "af_heart(0.2500)+jf_alpha(0.7500)"


@pytest.mark.parametrize(
    ("fields", "status", "param", "code"),
    [
        ({"model": "no-such-model"}, 404, "model", "model_not_found"),
        ({"speed": 5}, 400, "speed", "invalid_value"),
        ({"response_format": "m4a"}, 400, "response_format", "invalid_value"),
        ({"voice": "nobody"}, 400, "voice", "invalid_value"),
        ({"input": "x" * 1001}, 400, "input", "string_above_max_length"),  # the fakes' VOXLOG_MAX_TEXT_CHARS
        ({"input": None}, 400, "input", "missing_required_parameter"),
        ({"colour": "blue"}, 400, "colour", "unknown_parameter"),
    ],
)
async def test_errors_come_in_openais_shape_with_its_codes(fields, status, param, code):
    body = {"model": "tts-1", "voice": "alloy", "input": INPUT, **fields}
    deps = api_deps(reader(), blobs=Blobs(), speech_timeout_s=5.0)
    async with client(deps) as api:
        response = await api.post("/v1/audio/speech", json={k: v for k, v in body.items() if v is not None})
    assert response.status_code == status, response.text
    conforms(response.json(), "ErrorResponse")
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert (error["param"], error["code"]) == (param, code)
