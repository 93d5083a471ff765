"""A worker killed mid-job: another member takes the partition and finishes the job one attempt higher.

No timing is assumed: the bench engine of the first worker hangs on the job's last segment, so the kill lands
after the first segments were produced and before the job could complete; the second worker's engine does not
hang."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import httpx

from contracts import JobClaimed, JobCompleted, decode_event
from infra.processes import wait_gone
from tests.support.apps import start_pipeline, wait_for_job
from tests.support.events import segments_recorded
from tests.support.kafka import read_to_end


async def wait_for_state(client: httpx.AsyncClient, job_id: str, state: str, within_s: float = 120.0) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        response = await client.get(f"/v1/jobs/{job_id}")
        if response.status_code == 200 and response.json()["state"] == state:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"job {job_id} never reached {state}")


async def wait_for_segments(client: httpx.AsyncClient, job_id: str, count: int, within_s: float = 120.0) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        response = await client.get(f"/v1/jobs/{job_id}")
        if response.status_code == 200 and len(response.json()["segments"]) >= count:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"job {job_id} never had {count} segments")


async def test_a_job_whose_worker_was_killed_completes_under_a_new_attempt(apps, topics, corpus):
    paragraph = (corpus / "paragraphs.txt").read_text(encoding="utf-8").splitlines()[4]
    last_words = paragraph.split()[-3:]  # in the paragraph's last segment only
    app, voices = await start_pipeline(apps, VOXLOG_BENCH_FAULT=f"hang:{' '.join(last_words)}")
    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        submitted = await client.post("/v1/jobs", json={"text": paragraph, "voice": voices[0]})
        job_id = submitted.json()["job_id"]
        await wait_for_state(client, job_id, "claimed")
        await wait_for_segments(client, job_id, 2)  # the two before the hang: mid-job
        pid = app.processes.pid("worker-0")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        assert wait_gone(pid, 30)
        app.start("worker-1", ["worker", "--device", "cpu"], {"VOXLOG_WORKER_ID": "w1", "VOXLOG_BENCH_FAULT": ""})
        job = await wait_for_job(client, job_id, 240)

    assert job["state"] == "completed"
    assert job["attempt"] == 2
    assert job["worker_id"] == "w1"
    assert {segment["index"] for segment in job["segments"]} == set(range(job["segment_count"]))
    events = [decode_event(r.value) for r in await read_to_end(topics.kafka, topics.jobs)]
    claims = [(e.attempt, e.payload.worker_id) for e in events if isinstance(e, JobClaimed)]
    assert claims == [(1, "w0"), (2, "w1")]
    completions = [e for e in events if isinstance(e, JobCompleted)]
    assert [e.attempt for e in completions] == [2], "the dead attempt never completed"
    segments = segments_recorded(events)  # the last of an attempt rides in its completion (JobCompleted 3)
    assert len([e for e in segments if e.attempt == 1]) == 2, "killed mid-job"
    final_segments = [e for e in segments if e.attempt == 2]
    assert len(final_segments) == job["segment_count"]
