"""SSML across real processes (the benchmark engine): a job's audio is its pieces and its pauses' exact samples
of silence, its captions the words said, and the OpenAI route speaks the same; an element outside the subset is
refused before anything is recorded."""

from __future__ import annotations

import io

import httpx
import numpy as np
import soundfile as sf

from tests.support.apps import start_pipeline, wait_for_job
from tts_node.bench_sleep import SAMPLE_RATE, audio_seconds

BENCH = {"VOXLOG_ENGINE": "bench-sleep", "VOXLOG_DEFAULT_ENGINE": "bench-sleep"}
SSML = "<speak>Hello there.<break time='1s'/><sub alias='See you'>CU</sub> soon.</speak>"


async def test_an_ssml_job_is_its_pieces_and_its_pauses_through_every_process(apps):
    app, voices = await start_pipeline(apps, **BENCH)
    async with httpx.AsyncClient(base_url=app.api, timeout=120) as client:
        submitted = await client.post("/v1/jobs", json={"text": SSML, "voice": voices[0]})
        assert submitted.status_code == 202, submitted.text
        job = await wait_for_job(client, submitted.json()["job_id"])
        assert job["state"] == "completed", job
        audio = await client.get(f"/v1/jobs/{job['job_id']}/audio")
        captions = (await client.get(f"/v1/jobs/{job['job_id']}/captions", params={"format": "json"})).json()
        speech = await client.post(
            "/v1/audio/speech",
            json={"model": "bench-sleep", "voice": voices[0], "input": SSML, "response_format": "wav", "stream": False},
        )
        refused = await client.post("/v1/jobs", json={"text": "<speak><audio src='x'/>Hi</speak>", "voice": voices[0]})
    samples, rate = sf.read(io.BytesIO(audio.content), dtype="float32")
    first, second = (round(SAMPLE_RATE * audio_seconds(text)) for text in ("Hello there.", "See you soon."))
    assert rate == SAMPLE_RATE
    assert len(samples) == first + SAMPLE_RATE + second, "the pieces' audio and the break's 24,000 samples exactly"
    assert not np.any(samples[first : first + SAMPLE_RATE]), "the break is silence"
    assert np.abs(samples[:first]).max() > 0.05
    assert [w["text"] for w in captions["words"]] == ["Hello", "there.", "See", "you", "soon."]
    assert captions["words"][2]["start_ms"] >= 1000 * (first + SAMPLE_RATE) // SAMPLE_RATE - 1, "after the pause"
    assert speech.status_code == 200, speech.text
    assert speech.content == audio.content, "the same canonical SSML: the same fingerprint, the cached audio"
    assert refused.status_code == 422
    assert "<audio> is not supported" in refused.json()["detail"]
