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
