"""The job pipeline across real processes: api, worker(s), projector, Kafka, Postgres, on the bench engine.

What the real model says is the subject of test_speech_api, test_captions and test_lexicon. The one-worker
tests share a deployment (issue 38, item 6), each reading the log for its own jobs only; the two workers'
split has one of its own: the API places a new deployment's first jobs by a reading of the group taken for
them, a later one by a reading up to seconds old (producers/placement.py)."""

from __future__ import annotations

import asyncio
import io
import os
import uuid
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import httpx
import numpy as np
import pytest
import pytest_asyncio
import soundfile as sf

from contracts import JobClaimed, JobCompleted, decode_event
from tests.e2e.conftest import ModuleApps
from tests.e2e.test_fair_scheduling import open_gate
from tests.integration.conftest import Topics
from tests.support.apps import AppStack, start_pipeline, wait_for_job
from tests.support.kafka import read_to_end

TWENTY = "Twenty callers asked for this sentence at once."
GATED = "Twenty callers"  # the bench engine holds the first segment that says it at the module's gate


class Pipeline(NamedTuple):
    app: AppStack
    voices: list[str]
    topics: Topics
    gate: Path  # holds the synthesis of TWENTY until the test opens it


@pytest_asyncio.fixture(scope="module")
async def pipeline(module_apps: ModuleApps, tmp_path_factory: pytest.TempPathFactory) -> Pipeline:
    """A projector, a worker and the API, for the module's one-worker tests."""
    gate = tmp_path_factory.mktemp("pipeline") / "gate"
    os.mkfifo(gate)
    apps = await module_apps.new()
    app, voices = await start_pipeline(apps, VOXLOG_BENCH_FAULT=f"gate:{GATED}@{gate}")
    return Pipeline(app, voices, apps.topics, gate)


async def events_of(topics: Topics, job_ids: set[str]) -> list:
    """The jobs topic's events of ``job_ids``, in log order."""
    wanted = {uuid.UUID(job_id) for job_id in job_ids}
    events = [decode_event(r.value) for r in await read_to_end(topics.kafka, topics.jobs)]
    return [e for e in events if e.job_id in wanted]


def short_lines(corpus, count: int) -> list[str]:
    lines = [line for line in (corpus / "short.txt").read_text(encoding="utf-8").splitlines() if line.strip()]
    return sorted(lines, key=len)[:count]


async def test_a_submitted_job_completes_with_speech_that_grows_with_the_text(pipeline, corpus):
    app, voices, _, _ = pipeline
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


async def test_twenty_identical_submissions_are_synthesized_once(pipeline):
    app, voices, topics, gate = pipeline
    voice = voices[0]
    body = {"text": TWENTY, "voice": voice}
    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        responses = await asyncio.gather(*(client.post("/v1/jobs", json=body) for _ in range(20)))
        assert [r.status_code for r in responses] == [202] * 20, [r.text for r in responses]
        job_ids = {r.json()["job_id"] for r in responses}
        assert len(job_ids) == 20
        await open_gate(gate)  # the one synthesis was held until every submission was accepted
        jobs = await asyncio.gather(*(wait_for_job(client, job_id) for job_id in job_ids))
    assert {job["state"] for job in jobs} == {"completed"}
    sources = {job["source_job_id"] for job in jobs if job["cache_hit"]}
    assert len(sources) == 1
    assert sum(not job["cache_hit"] for job in jobs) == 1

    events = await events_of(topics, job_ids)
    claims = [e for e in events if isinstance(e, JobClaimed)]
    completions = [e for e in events if isinstance(e, JobCompleted)]
    assert len(claims) == 1, "exactly one synthesis"
    assert len(completions) == 20
    assert {e.job_id for e in completions} == set(map(uuid.UUID, job_ids))


async def test_two_workers_split_sixteen_jobs_and_synthesize_each_once(apps, topics):
    app, voices = await start_pipeline(apps, workers=2)
    voice = voices[0]
    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        responses = await asyncio.gather(
            *(client.post("/v1/jobs", json={"text": f"Job number {i}.", "voice": voice}) for i in range(16))
        )
        assert {r.status_code for r in responses} == {202}
        jobs = await asyncio.gather(*(wait_for_job(client, r.json()["job_id"], 300) for r in responses))
    assert [job["state"] for job in jobs] == ["completed"] * 16
    assert not any(job["cache_hit"] for job in jobs)

    claims = [e for e in await events_of(topics, {job["job_id"] for job in jobs}) if isinstance(e, JobClaimed)]
    per_job = Counter(e.job_id for e in claims)
    assert len(per_job) == 16
    assert set(per_job.values()) == {1}, "each job synthesized once"
    assert {e.payload.worker_id for e in claims} == {"w0", "w1"}, "the group split the partitions"
