"""POST /v1/batches across real processes: each request its own job, duplicates coalesced, all or nothing."""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx

from tests.support.apps import start_pipeline, wait_for_job
from tests.support.kafka import read_to_end

BENCH = {"VOXLOG_ENGINE": "bench-sleep", "VOXLOG_DEFAULT_ENGINE": "bench-sleep", "VOXLOG_MAX_BATCH": "100"}


async def test_a_batch_is_one_job_per_request_spread_over_the_workers_and_duplicates_coalesce(apps, topics):
    app, voices = await start_pipeline(apps, workers=2, **BENCH)
    texts = [f"Batch sentence number {i} of fifty." for i in range(50)] + ["The same words ten times."] * 10
    body = {"requests": [{"text": text, "voice": voices[0]} for text in texts]}
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:
        answer = await client.post("/v1/batches", json=body, headers={"Idempotency-Key": "batch-1"})
        assert answer.status_code == 202, answer.text
        batch = answer.json()
        assert (batch["queued"], batch["cached"]) == (60, 0)
        assert [job["index"] for job in batch["jobs"]] == list(range(60))
        assert len({job["job_id"] for job in batch["jobs"]}) == 60, "each request is its own job"
        assert len({job["fingerprint"] for job in batch["jobs"]}) == 51

        jobs = await asyncio.gather(*(wait_for_job(client, job["job_id"]) for job in batch["jobs"]))
        assert {job["state"] for job in jobs} == {"completed"}
        assert sum(not job["cache_hit"] for job in jobs) == 51, "one synthesis per distinct request"
        workers = Counter(job["worker_id"] for job in jobs if not job["cache_hit"])
        assert set(workers) == {"w0", "w1"}, workers

        again = await client.post("/v1/batches", json=body, headers={"Idempotency-Key": "batch-1"})
        assert again.status_code == 202, again.text
        assert (again.json()["queued"], again.json()["cached"]) == (0, 60), "every result is live in the cache"


async def test_one_bad_request_refuses_the_whole_batch_and_nothing_is_recorded(apps, topics):
    app, voices = await start_pipeline(apps, workers=1, **BENCH)
    good = {"text": "A fine request.", "voice": voices[0]}
    requests = [good, good, good, {**good, "voice": "nobody"}, good, {**good, "text": " \t "}, good]
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:
        answer = await client.post("/v1/batches", json={"requests": requests})
        assert answer.status_code == 422, answer.text
        errors = answer.json()["errors"]
        assert [e["index"] for e in errors] == [3, 5]
        assert "voice 'nobody' is unknown" in errors[0]["detail"]
        assert "text is empty" in errors[1]["detail"]
        # Whatever the API publishes is acknowledged before it answers: the topic now holds all it ever will.
        assert await read_to_end(app.kafka, topics.jobs) == []

        too_many = await client.post("/v1/batches", json={"requests": [good] * 101})
        assert too_many.status_code == 413
        assert "1 to 100 requests" in too_many.json()["detail"]
        assert (await client.post("/v1/batches", json={"requests": []})).status_code == 413
