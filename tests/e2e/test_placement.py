"""Placement on real processes: the API places new texts over the workers' partitions, every later event of
a job follows its JobQueued, and requests for the same audio still meet in one partition and coalesce."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import httpx
from aiokafka.partitioner import murmur2

from contracts import JobQueued, decode_event
from tests.support.apps import start_pipeline, wait_for_job
from tests.support.kafka import read_to_end

BENCH = {"VOXLOG_ENGINE": "bench-sleep", "VOXLOG_DEFAULT_ENGINE": "bench-sleep", "VOXLOG_BENCH_SYNTH_MS": "50"}


async def test_jobs_are_placed_off_their_keys_partition_and_duplicates_still_coalesce(apps, topics):
    app, voices = await start_pipeline(apps, workers=2, **BENCH)
    texts = [f"Placed text number {i}, said once." for i in range(24)]
    shared = "One text that six clients ask for at once."
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:

        async def submit(text: str) -> str:
            answer = await client.post("/v1/jobs", json={"text": text, "voice": voices[0]})
            assert answer.status_code in (200, 202), answer.text  # 200: a copy answered from the finished job
            return str(answer.json()["job_id"])

        ids = await asyncio.gather(*(submit(t) for t in [*texts, *[shared] * 6]))
        jobs = [await wait_for_job(client, job_id) for job_id in ids]
    records = await read_to_end(topics.kafka, topics.jobs)

    partitions_of_job: dict[str, set[int]] = defaultdict(set)
    partitions_of_fingerprint: dict[str, set[int]] = defaultdict(set)
    queued_in: dict[str, int] = {}
    for record in records:
        event = decode_event(record.value)
        partitions_of_job[str(event.job_id)].add(record.partition)
        partitions_of_fingerprint[event.fingerprint].add(record.partition)
        if isinstance(event, JobQueued):
            queued_in[str(event.job_id)] = record.partition
    by_key = {
        job_id: (murmur2(job["fingerprint"].encode()) & 0x7FFFFFFF) % 24 for job_id, job in zip(ids, jobs, strict=True)
    }

    assert all(job["state"] == "completed" for job in jobs)
    assert all(partitions_of_job[job_id] == {queued_in[job_id]} for job_id in ids), "a job's events in one partition"
    assert all(len(p) == 1 for p in partitions_of_fingerprint.values()), "duplicates met in one partition"
    assert sum(queued_in[job_id] != by_key[job_id] for job_id in ids[:24]) > 0, "placed, not hashed"
    copies = jobs[24:]
    assert len({job["job_id"] for job in copies if not job["cache_hit"]}) == 1, "one synthesis for the six copies"
    assert {job["source_job_id"] for job in copies if job["cache_hit"]} <= {job["job_id"] for job in copies}
    assert {job["worker_id"] for job in jobs[:24]} == {"w0", "w1"}
