"""OpenAI conformance: the official ``openai`` client against a real API, projector and worker, checked against
OpenAI's published document for the speech route (tests/fixtures/openai/speech_openapi.json, extracted from
openai/openai-openapi): every response_format it lists, both stream formats, the SSE events' shapes and
usage, every voice name, the speed range and errors. The bench engine speaks (a tone as long as reading the
text would take): what is checked is the service's, not the model's."""

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
import openai
import pytest
import soundfile as sf

from tests.support.apps import start_pipeline, wait_for_job

OPENAI = json.loads((Path(__file__).parents[1] / "fixtures/openai/speech_openapi.json").read_text())
REQUEST = OPENAI["components"]["schemas"]["CreateSpeechRequest"]
FORMATS: list[str] = REQUEST["properties"]["response_format"]["enum"]
STREAM_FORMATS: list[str] = REQUEST["properties"]["stream_format"]["enum"]
VOICES: list[str] = sorted(
    set(OPENAI["components"]["schemas"]["VoiceIdsShared"]["anyOf"][1]["enum"]) | {"fable", "onyx", "nova"}
)
BENCH = {"VOXLOG_ENGINE": "bench-sleep", "VOXLOG_DEFAULT_ENGINE": "bench-sleep", "VOXLOG_BENCH_SYNTH_MS": "5"}
TEXT = (
    "The lighthouse stood at the edge of the world. Every night its keeper climbed the stairs. "
    "He wound the clockwork and lit the lamp, and the beam swept over the dark water until morning."
)
# One encoder delay a stream: LAME's (1105 samples and under two frames), AAC's (1024 and under two frames).
SLACK_S = {"mp3": (1105 + 2 * 1152) / 24000, "aac": 3 * 1024 / 24000, "opus": 0.03}


def conforms(instance: Any, name: str) -> None:
    jsonschema.validate(instance, {"$ref": f"#/components/schemas/{name}", "components": OPENAI["components"]})


def decoded_seconds(data: bytes, fmt: str) -> float:
    if fmt == "pcm":  # OpenAI's pcm: 24 kHz, 16-bit little-endian, no header
        return len(data) / 2 / 24000
    if fmt in ("wav", "flac", "mp3"):  # mp3 through libsndfile (mpg123), which trusts an Info frame's count
        samples, rate = sf.read(io.BytesIO(data), dtype="float32")
        return len(samples) / rate
    with av.open(io.BytesIO(data)) as container:  # aac (ADTS), opus (Ogg)
        return sum(frame.samples / frame.sample_rate for frame in container.decode(audio=0))


def sse_events(body: bytes) -> list[dict[str, Any]]:
    lines = body.decode().splitlines()
    return [json.loads(line[len("data:") :].strip()) for line in lines if line.startswith("data:")]


@pytest.fixture
async def pipeline(apps):
    app, _ = await start_pipeline(apps, **BENCH)
    client = openai.AsyncOpenAI(base_url=f"{app.api}/v1", api_key="sk-not-needed", max_retries=0, timeout=120)
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as http:
        yield client, http


async def job_seconds(http: httpx.AsyncClient, job_id: str) -> float:
    job = await wait_for_job(http, job_id)
    assert job["state"] == "completed", job
    return float(job["total_duration_ms"]) / 1000


async def test_every_format_in_both_stream_formats_with_the_official_client(pipeline):
    client, http = pipeline
    for fmt in FORMATS:
        for stream_format in STREAM_FORMATS:
            body = {"model": "gpt-4o-mini-tts", "voice": "alloy", "input": TEXT, "response_format": fmt}
            conforms({**body, "stream_format": stream_format}, "CreateSpeechRequest")
            async with client.audio.speech.with_streaming_response.create(
                **body, stream_format=stream_format
            ) as response:
                assert response.status_code == 200
                content_type = response.headers["content-type"]
                job_id = response.headers["x-voxlog-job-id"]
                data = b"".join([chunk async for chunk in response.iter_bytes()])
            spoken_s = await job_seconds(http, job_id)
            if stream_format == "sse":
                assert content_type.startswith("text/event-stream")
                events = sse_events(data)
                for event in events:
                    conforms(event, "CreateSpeechResponseStreamEvent")
                *deltas, done = events
                assert {e["type"] for e in deltas} == {"speech.audio.delta"}, (fmt, events[-1])
                assert done["type"] == "speech.audio.done"
                data = b"".join(base64.b64decode(e["audio"]) for e in deltas)
                tokens = math.ceil(round(spoken_s / 0.025, 6))
                assert done["usage"] == {
                    "input_tokens": len(TEXT),
                    "output_tokens": tokens,
                    "total_tokens": len(TEXT) + tokens,
                }
            else:
                assert not content_type.startswith("text/event-stream")
            # The answer, streamed or as events joined, is the whole job: every segment, once.
            heard = decoded_seconds(data, fmt)
            assert spoken_s - 0.01 <= heard <= spoken_s + 0.01 + SLACK_S.get(fmt, 0), (fmt, stream_format)

        whole = await client.audio.speech.create(model="tts-1", voice="nova", input=TEXT, response_format=fmt)
        assert decoded_seconds(whole.content, fmt) == pytest.approx(spoken_s, abs=0.01 + SLACK_S.get(fmt, 0))


async def test_every_voice_name_speed_and_instruction_is_taken(pipeline):
    client, http = pipeline
    for voice in VOICES:
        async with client.audio.speech.with_streaming_response.create(
            model="tts-1", voice=voice, input="Hello.", response_format="pcm"
        ) as response:
            assert response.headers["x-voxlog-voice"] == "bench_tone"  # mapped voices it lacks: the first it has
            await response.read()

    seconds = {}
    for speed in (0.25, 1.0, 4.0):  # the document's range; beyond 0.5 to 2.0, time-stretched
        async with client.audio.speech.with_streaming_response.create(
            model="tts-1", voice="alloy", input=TEXT, response_format="pcm", speed=speed
        ) as response:
            pcm = await response.read()
            seconds[speed] = await job_seconds(http, response.headers["x-voxlog-job-id"])
        assert len(pcm) / 2 / 24000 == pytest.approx(seconds[speed], abs=0.01)
    assert seconds[0.25] / seconds[4.0] == pytest.approx(16, rel=0.02)

    async with client.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts", voice="alloy", input=TEXT, response_format="pcm", instructions="Speak slowly, warmly"
    ) as response:
        await response.read()
        assert response.headers["x-voxlog-instructions"].startswith(
            "partly mapped; speed x0.8 = 0.8; not mapped: warmly"
        )
        slow_s = await job_seconds(http, response.headers["x-voxlog-job-id"])
    assert slow_s == pytest.approx(seconds[1.0] / 0.8, rel=0.02)


async def test_errors_come_in_openais_shape_with_its_codes(pipeline):
    client, _ = pipeline
    with pytest.raises(openai.NotFoundError) as unknown_model:
        await client.audio.speech.create(model="tts-9", voice="alloy", input="Hi.")
    with pytest.raises(openai.BadRequestError) as too_fast:
        await client.audio.speech.create(model="tts-1", voice="alloy", input="Hi.", speed=4.5)
    with pytest.raises(openai.BadRequestError) as bad_format:
        await client.audio.speech.create(model="tts-1", voice="alloy", input="Hi.", response_format="m4a")  # type: ignore[arg-type]
    for refused, param, code in (
        (unknown_model, "model", "model_not_found"),
        (too_fast, "speed", "invalid_value"),
        (bad_format, "response_format", "invalid_value"),
    ):
        conforms({"error": refused.value.body}, "ErrorResponse")
        assert (refused.value.param, refused.value.code) == (param, code)  # type: ignore[attr-defined]
