"""Formats, voice mixes and the OpenAI-compatible speech endpoint, through the whole pipeline.

Two deployments for the module (issue 38, item 6): the real model, for the official client's speech and a
voice mix (two voices, which the bench engine does not have); and the bench engine that fails what says
"doomed", for the streams' shapes, their errors and a 400. No test here disturbs another's jobs."""

from __future__ import annotations

import io
import json

import httpx
import numpy as np
import openai
import pytest
import pytest_asyncio
import soundfile as sf

from tests.e2e.conftest import ModuleApps
from tests.support.apps import AppStack, start_pipeline, wait_for_job
from tests.support.engines import FAILING_ENGINE, REAL_MODEL

Deployment = tuple[AppStack, list[str]]


@pytest_asyncio.fixture(scope="module")
async def real(module_apps: ModuleApps) -> Deployment:
    """The real model: a projector, a worker and the API, for the module."""
    return await start_pipeline(await module_apps.new(), **REAL_MODEL)


@pytest_asyncio.fixture(scope="module")
async def bench(module_apps: ModuleApps) -> Deployment:
    """The bench engine (failing what says "doomed", one attempt a job), for the module."""
    return await start_pipeline(await module_apps.new(), **FAILING_ENGINE)


def rms(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(samples))))


async def test_the_official_openai_client_gets_speech(real):
    app, voices = real
    client = openai.AsyncOpenAI(base_url=f"{app.api}/v1", api_key="sk-not-needed", max_retries=0, timeout=180)
    wav = await client.audio.speech.create(
        model="tts-1", voice="alloy", input="Hello from the OpenAI client.", response_format="wav"
    )
    samples, rate = sf.read(io.BytesIO(wav.content), dtype="float32")
    assert rate == 24000
    assert rms(samples) > 0.01

    mp3 = await client.audio.speech.create(model="tts-1", voice=voices[1], input="Compressed.", response_format="mp3")
    decoded, mp3_rate = sf.read(io.BytesIO(mp3.content), dtype="float32")
    assert mp3_rate == 24000
    assert rms(decoded) > 0.01

    async with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice=voices[0], input="First part. Second part.", response_format="pcm", stream_format="audio"
    ) as streamed:
        chunks = [chunk async for chunk in streamed.iter_bytes()]
    pcm = b"".join(chunks)
    assert len(pcm) > 24000  # more than half a second of 16-bit samples
    assert len(pcm) % 2 == 0

    with pytest.raises(openai.BadRequestError) as refused:
        await client.audio.speech.create(model="tts-1", voice="nobody", input="Hi.", response_format="wav")
    assert refused.value.body["type"] == "invalid_request_error"  # type: ignore[index]
    assert f"known voices: {voices[0]}" in refused.value.body["message"]  # type: ignore[index]
    with pytest.raises(openai.BadRequestError, match="m4a"):
        await client.audio.speech.create(model="tts-1", voice=voices[0], input="Hi.", response_format="m4a")  # type: ignore[arg-type]


async def test_jobs_come_in_the_format_rate_and_voice_mix_asked_for(real):
    app, voices = real
    mix = f"{voices[0]}(2)+{voices[1]}(1)"
    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        listing = (await client.get("/v1/voices")).json()
        assert {"wav", "flac", "ogg", "pcm"} <= set(listing["formats"])
        submitted = await client.post(
            "/v1/jobs", json={"text": "Mixed voices.", "voice": mix, "format": "flac", "sample_rate": 16000}
        )
        assert submitted.status_code == 202, submitted.text
        job = await wait_for_job(client, submitted.json()["job_id"])
        assert job["state"] == "completed"
        assert job["request"]["voice"] == f"{voices[0]}(0.6667)+{voices[1]}(0.3333)"
        audio = await client.get(f"/v1/jobs/{job['job_id']}/audio")
        assert audio.headers["content-type"].startswith("audio/flac")
        samples, rate = sf.read(io.BytesIO(audio.content), dtype="float32")
        assert rate == 16000
        assert rms(samples) > 0.01

        same_mix = await client.post(
            "/v1/jobs",
            json={
                "text": "Mixed voices.",
                "voice": f"{voices[1]}(3) + {voices[0]}(6)",
                "format": "flac",
                "sample_rate": 16000,
            },
        )
        assert same_mix.status_code == 200, "the same mix written differently is the same request: a cache hit"
        hit = same_mix.json()
        assert hit["cache_hit"]
        assert hit["fingerprint"] == job["fingerprint"]
        assert hit["source_job_id"] == job["job_id"], "a job of its own, completed from the first one's audio"

        bad_rate = await client.post("/v1/jobs", json={"text": "Hi.", "voice": voices[0], "sample_rate": 8000})
        assert bad_rate.status_code == 422
        assert "48000" in bad_rate.text
        bad_mix = await client.post("/v1/jobs", json={"text": "Hi.", "voice": f"{voices[0]}(2)+"})
        assert bad_mix.status_code == 422
        assert "jf_alpha(2)+jm_kumo(1)" in bad_mix.text


async def test_regression_malformed_json_is_a_400_in_openais_shape(bench):
    """POST /v1/audio/speech with a body that is not JSON answered 500."""
    app, _ = bench
    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        response = await client.post(
            "/v1/audio/speech", content=b'{"model": "tts-1", "input": ', headers={"content-type": "application/json"}
        )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "not valid JSON" in error["message"]


async def test_regression_a_stream_of_a_failed_job_ends_with_an_error_not_done(bench):
    """Streaming answers said `speech.audio.done`, or ended a raw stream normally, when the job had failed."""
    app, voices = bench
    body = {"model": "tts-1", "voice": voices[0], "input": "A doomed request.", "response_format": "pcm"}
    async with httpx.AsyncClient(base_url=app.api, timeout=120) as client:
        raw = await client.post("/v1/audio/speech", json={**body, "stream_format": "audio"})
        assert raw.status_code == 500, raw.text  # failed before any audio: the status still says so
        assert raw.json()["error"]["code"] == "engine_error"
        sse = await client.post("/v1/audio/speech", json={**body, "stream_format": "sse"})
    events = [json.loads(line[len("data: ") :]) for line in sse.text.splitlines() if line.startswith("data: ")]
    assert [e["type"] for e in events] == ["error"]
    assert events[-1]["error"]["code"] == "job_failed"


async def test_the_openai_client_gets_mp3_streamed_by_default_and_whole_with_stream_false(bench):
    """The official client sends no stream_format: the mp3 comes chunked, segment by segment, and decodes
    to every segment (not only the first, as joined per-segment files did); "stream": false is one file."""
    app, voices = bench
    client = openai.AsyncOpenAI(base_url=f"{app.api}/v1", api_key="sk-not-needed", max_retries=0, timeout=180)
    text = "The first sentence is here. A second one follows it. And a third one ends it."
    async with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice=voices[0], input=text
    ) as streamed:
        assert streamed.headers["content-type"].startswith("audio/mpeg")
        assert "content-length" not in streamed.headers
        job_id = streamed.headers["x-voxlog-job-id"]
        mp3 = b"".join([chunk async for chunk in streamed.iter_bytes()])
    async with httpx.AsyncClient(base_url=app.api, timeout=180) as http:
        job = await wait_for_job(http, job_id)
        assert job["state"] == "completed"
        segments = job["segments"]
        assert len(segments) >= 2
        spoken_s = sum(s["duration_ms"] for s in segments) / 1000
        decoded, rate = sf.read(io.BytesIO(mp3), dtype="float32")
        assert rate == 24000
        # Each streamed segment keeps the encoder's delay (1105 samples) and padding (under a 576-sample frame).
        assert spoken_s - 0.05 <= len(decoded) / rate <= spoken_s + len(segments) * (1105 + 576) / rate

        whole = await http.post(
            "/v1/audio/speech", json={"model": "tts-1", "voice": voices[0], "input": text, "stream": False}
        )
        assert whole.status_code == 200, whole.text
        assert int(whole.headers["content-length"]) == len(whole.content)
        samples, whole_rate = sf.read(io.BytesIO(whole.content), dtype="float32")
        assert len(samples) / whole_rate == pytest.approx(spoken_s, abs=0.05)


async def test_wav_and_pcm_stream_by_default_and_flac_comes_whole(bench):
    app, voices = bench
    body = {"model": "tts-1", "voice": voices[0], "input": "One sentence here. Another sentence there."}
    async with httpx.AsyncClient(base_url=app.api, timeout=180) as client:
        wav = await client.post("/v1/audio/speech", json={**body, "response_format": "wav"})
        assert wav.status_code == 200, wav.text
        assert "content-length" not in wav.headers
        assert wav.content[4:8] == b"\xff\xff\xff\xff", "a streamed WAV's sizes say unknown"
        samples, rate = sf.read(io.BytesIO(wav.content), dtype="float32")
        assert rate == 24000
        job = await wait_for_job(client, wav.headers["x-voxlog-job-id"])
        assert len(samples) / rate == pytest.approx(job["total_duration_ms"] / 1000, abs=0.05)

        pcm = await client.post("/v1/audio/speech", json={**body, "response_format": "pcm"})
        assert pcm.status_code == 200, pcm.text
        assert "content-length" not in pcm.headers
        pcm_job = await wait_for_job(client, pcm.headers["x-voxlog-job-id"])
        assert len(pcm.content) / 2 / 24000 == pytest.approx(pcm_job["total_duration_ms"] / 1000, abs=0.05)

        flac = await client.post("/v1/audio/speech", json={**body, "response_format": "flac"})
        assert flac.status_code == 200, flac.text
        assert int(flac.headers["content-length"]) == len(flac.content), "flac cannot stream: one whole file"
        flac_samples, flac_rate = sf.read(io.BytesIO(flac.content), dtype="float32")
        flac_job = await wait_for_job(client, flac.headers["x-voxlog-job-id"])
        assert len(flac_samples) / flac_rate == pytest.approx(flac_job["total_duration_ms"] / 1000, abs=0.05)


async def test_a_default_request_that_fails_before_any_audio_gets_an_http_error(bench):
    app, voices = bench
    async with httpx.AsyncClient(base_url=app.api, timeout=120) as client:
        refused = await client.post(
            "/v1/audio/speech", json={"model": "tts-1", "voice": voices[0], "input": "\U0001f389\U0001f680"}
        )
        response = await client.post(
            "/v1/audio/speech", json={"model": "tts-1", "voice": voices[0], "input": "Another doomed request."}
        )
    assert refused.status_code == 400, refused.text  # nothing to speak: refused before anything is recorded
    assert "nothing to speak" in refused.json()["error"]["message"]
    assert response.status_code == 500, response.text
    assert response.json()["error"]["code"] == "engine_error"
