"""The job pipeline across real processes: api, worker(s), projector, Kafka, Postgres, the real model."""

from __future__ import annotations

import asyncio
import io
from collections import Counter

import httpx
import numpy as np
import soundfile as sf

from contracts import JobClaimed, JobCompleted, decode_event
from tests.support.apps import start_pipeline, wait_for_job
from tests.support.kafka import read_to_end


def short_lines(corpus, count: int) -> list[str]:
    lines = [line for line in (corpus / "short.txt").read_text(encoding="utf-8").splitlines() if line.strip()]
    return sorted(lines, key=len)[:count]


async def test_a_submitted_job_completes_with_speech_that_grows_with_the_text(apps, corpus):
    app, voices = await start_pipeline(apps)
    voice = voices[0]
    texts = [short_lines(corpus, 12)[i] for i in (0, 5, 11)]
    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        durations = []
        for text in texts:
            submitted = await client.post("/v1/jobs", json={"text": text, "voice": voice})
            assert submitted.status_code == 202, submitted.text
            job_id = submitted.json()["job_id"]
            assert submitted.headers["location"] == f"/v1/jobs/{job_id}"
            job = await wait_for_job(client, job_id)
            assert job["state"] == "completed", job
            assert job["attempt"] == 1
            assert job["segment_count"] == len(job["segments"]) >= 1
            assert job["timings"]["claimed_at"] is not None
            audio = await client.get(f"/v1/jobs/{job_id}/audio")
            assert audio.status_code == 200
            assert audio.headers["content-type"] == "audio/wav"
            samples, rate = sf.read(io.BytesIO(audio.content), dtype="float32")
            assert rate == 24000
            assert float(np.sqrt(np.mean(samples**2))) > 0.01, "silence"
            assert abs(len(samples) / rate * 1000 - job["total_duration_ms"]) < 50
            segment = await client.get(job["segments"][0]["audio"])
            assert segment.status_code == 200
            durations.append(len(samples) / rate)
        assert durations == sorted(durations)
        assert durations[0] < durations[-1]
        assert (await client.get(f"/v1/jobs/{'0' * 8}-0000-4000-8000-{'0' * 12}")).status_code == 404


async def test_twenty_identical_submissions_are_synthesized_once(apps, topics):
    app, voices = await start_pipeline(apps)
    voice = voices[0]
    body = {"text": "Twenty callers asked for this sentence at once.", "voice": voice}
    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        responses = await asyncio.gather(*(client.post("/v1/jobs", json=body) for _ in range(20)))
        assert [r.status_code for r in responses] == [202] * 20, [r.text for r in responses]
        job_ids = {r.json()["job_id"] for r in responses}
        assert len(job_ids) == 20
        jobs = await asyncio.gather(*(wait_for_job(client, job_id) for job_id in job_ids))
    assert {job["state"] for job in jobs} == {"completed"}
    sources = {job["source_job_id"] for job in jobs if job["cache_hit"]}
    assert len(sources) == 1
    assert sum(not job["cache_hit"] for job in jobs) == 1

    events = [decode_event(r.value) for r in await read_to_end(topics.kafka, topics.jobs)]
    claims = [e for e in events if isinstance(e, JobClaimed)]
    completions = [e for e in events if isinstance(e, JobCompleted)]
    assert len(claims) == 1, "exactly one synthesis"
    assert len(completions) == 20
    assert {e.job_id for e in completions} == {j for j in map(__import__("uuid").UUID, job_ids)}


async def test_two_workers_split_sixteen_jobs_and_synthesize_each_once(apps, topics):
    app, voices = await start_pipeline(apps, workers=2, VOXLOG_THREADS="1")
    voice = voices[0]
    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        responses = await asyncio.gather(
            *(client.post("/v1/jobs", json={"text": f"Job number {i}.", "voice": voice}) for i in range(16))
        )
        assert {r.status_code for r in responses} == {202}
        jobs = await asyncio.gather(*(wait_for_job(client, r.json()["job_id"], 300) for r in responses))
    assert [job["state"] for job in jobs] == ["completed"] * 16
    assert not any(job["cache_hit"] for job in jobs)

    claims = [
        e
        for e in (decode_event(r.value) for r in await read_to_end(topics.kafka, topics.jobs))
        if isinstance(e, JobClaimed)
    ]
    per_job = Counter(e.job_id for e in claims)
    assert len(per_job) == 16
    assert set(per_job.values()) == {1}, "each job synthesized once"
    assert {e.payload.worker_id for e in claims} == {"w0", "w1"}, "the group split the partitions"
