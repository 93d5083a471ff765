"""Priorities on real processes: an interactive request submitted behind a batch goes first."""

from __future__ import annotations

import asyncio
from datetime import datetime

import httpx

from tests.support.apps import start_pipeline, wait_for_job

SLOW = {"VOXLOG_ENGINE": "bench-sleep", "VOXLOG_DEFAULT_ENGINE": "bench-sleep", "VOXLOG_BENCH_SYNTH_MS": "300"}


async def test_an_interactive_request_overtakes_a_batch_submitted_before_it(apps, topics):
    app, voices = await start_pipeline(apps, workers=1, **SLOW)
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:
        batch = [{"text": f"Batch request number {i}.", "voice": voices[0]} for i in range(10)]
        submitted = await client.post("/v1/batches", json={"requests": batch})
        assert submitted.status_code == 202, submitted.text
        interactive = await client.post("/v1/jobs", json={"text": "An interactive request.", "voice": voices[0]})
        assert interactive.status_code == 202
        quick = await wait_for_job(client, interactive.json()["job_id"])
        batch_jobs = await asyncio.gather(*(wait_for_job(client, j["job_id"]) for j in submitted.json()["jobs"]))
    assert {job["state"] for job in [quick, *batch_jobs]} == {"completed"}
    done_at = datetime.fromisoformat(quick["timings"]["completed_at"])
    after = [job for job in batch_jobs if datetime.fromisoformat(job["timings"]["completed_at"]) > done_at]
    # At most the batch job in hand when it arrived (and one more by the fairness turn) went first.
    assert len(after) >= 8, f"only {len(after)} of 10 batch jobs completed after the interactive one"


async def test_an_interactive_request_sent_during_a_batch_job_is_done_before_the_batch_jobs_held_with_it(apps, topics):
    """Interactive work waits for the segment in hand, never for a batch job: the worker holds several batch
    claims at once, and the interactive request, claimed beside them, takes the engine at the next segment.
    (Its order is pinned without timing by tests/unit/test_scheduling.py.)"""
    app, voices = await start_pipeline(apps, workers=1, **SLOW)
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:
        batch = [{"text": f"Batch request number {i}. It has a second sentence.", "voice": voices[0]} for i in range(4)]
        submitted = await client.post("/v1/batches", json={"requests": batch})
        assert submitted.status_code == 202, submitted.text
        ids = [j["job_id"] for j in submitted.json()["jobs"]]
        await _first_claimed(client, ids)
        interactive = await client.post("/v1/jobs", json={"text": "An interactive request.", "voice": voices[0]})
        quick = await wait_for_job(client, interactive.json()["job_id"])
        batch_jobs = await asyncio.gather(*(wait_for_job(client, job_id) for job_id in ids))
    done = datetime.fromisoformat(quick["timings"]["completed_at"])
    before = [job for job in batch_jobs if datetime.fromisoformat(job["timings"]["completed_at"]) < done]
    assert len(before) <= 1, f"{len(before)} batch jobs finished before the interactive request that came"


async def _first_claimed(client: httpx.AsyncClient, ids: list[str], within_s: float = 60) -> str:
    """The batch job the worker took first, once the projection shows it running (two segments of 300 ms
    each: the interactive request sent now arrives well before it ends)."""
    deadline = asyncio.get_running_loop().time() + within_s
    while asyncio.get_running_loop().time() < deadline:
        for job_id in ids:
            job = (await client.get(f"/v1/jobs/{job_id}")).json()
            if job.get("state") == "claimed":
                return job_id
        await asyncio.sleep(0.02)
    raise AssertionError("no batch job was claimed")
