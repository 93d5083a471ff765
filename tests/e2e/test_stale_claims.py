"""Stale claims rescued: a hung engine by the worker's own watchdog, a dead worker by the sweeper.

The benchmark engine's test-only fault mode stands in for a hung engine
(``VOXLOG_BENCH_FAULT=hang:TEXT``: a segment containing TEXT never returns).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import httpx

from contracts import JobClaimed, JobCompleted, JobReleased, SegmentProduced, decode_event
from infra.processes import wait_gone
from tests.support.apps import AppStack, wait_for_job
from tests.support.kafka import read_to_end

BENCH = {"VOXLOG_ENGINE": "bench-sleep", "VOXLOG_DEFAULT_ENGINE": "bench-sleep", "VOXLOG_RETRY_BASE_DELAY_S": "0.2"}


async def wait_until(what: str, check, within_s: float = 90.0) -> None:
    deadline = time.monotonic() + within_s
    while not await check():
        assert time.monotonic() < deadline, f"{what} did not happen within {within_s}s"
        await asyncio.sleep(0.2)


async def job_state(client: httpx.AsyncClient, job_id: str) -> dict:
    response = await client.get(f"/v1/jobs/{job_id}")
    return response.json() if response.status_code == 200 else {}


async def submit(app: AppStack, client: httpx.AsyncClient, text: str) -> str:
    voice = (await app.voices())[0]
    response = await client.post("/v1/jobs", json={"text": text, "voice": voice})
    assert response.status_code == 202, response.text
    return str(response.json()["job_id"])


async def test_a_hung_engine_is_given_back_by_the_watchdog_and_its_job_completes_on_another_worker(apps, topics):
    app = apps(**BENCH, VOXLOG_BENCH_SYNTH_MS="10", VOXLOG_SHUTDOWN_GRACE_S="1")
    app.start("projector", ["projector"])
    app.start("api", ["api"])
    hung = {"VOXLOG_WORKER_ID": "w0", "VOXLOG_BENCH_FAULT": "hang:wedge"}
    app.start("worker-0", ["worker"], {**hung, "VOXLOG_WATCHDOG_MIN_S": "2", "VOXLOG_WATCHDOG_FACTOR": "1"})
    await app.wait_ready()
    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        job_id = await submit(app, client, "A fine start. A wedge in the middle. A fine end.")
        pid = app.processes.pid("worker-0")
        assert pid is not None
        assert await asyncio.to_thread(wait_gone, pid, 90), "the worker with the hung engine leaves"
        assert "exiting so that a fresh process can take the device" in app.log("worker-0")

        app.start("worker-1", ["worker"], {"VOXLOG_WORKER_ID": "w1"})
        job = await wait_for_job(client, job_id, 120)
    assert (job["state"], job["attempt"], job["worker_id"]) == ("completed", 2, "w1")
    events = [decode_event(r.value) for r in await read_to_end(topics.kafka, topics.jobs)]
    mine = [e for e in events if str(e.job_id) == job_id and e.type != "JobQueued"]
    assert [(e.type, e.attempt) for e in mine if e.type != "SegmentProduced"] == [
        ("JobClaimed", 1),
        ("JobReleased", 1),
        ("JobClaimed", 2),
        ("JobCompleted", 2),
    ]
    release = next(e for e in mine if isinstance(e, JobReleased))
    assert release.payload.reason == "transient"
    assert release.payload.message.startswith("engine hung")
    assert release.payload.not_before is not None, "the retry waits a backoff"


async def test_the_sweeper_releases_a_dead_workers_claim_once_deletes_its_partial_audio_and_the_job_completes(
    apps, topics
):
    app = apps(**BENCH, VOXLOG_STALE_AFTER_S="3", VOXLOG_SWEEP_INTERVAL_S="0.5", VOXLOG_SWEEP_BLOB_GRACE_S="0")
    app.start("projector", ["projector"])
    app.start("api", ["api"])
    app.start("sweeper-0", ["sweeper"])
    app.start("sweeper-1", ["sweeper"])  # a standby: exactly one of the two acts
    app.start("worker-0", ["worker"], {"VOXLOG_WORKER_ID": "w0", "VOXLOG_BENCH_SYNTH_MS": "1500"})
    await app.wait_ready()
    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        job_id = await submit(app, client, "First sentence. Second sentence. Third sentence.")

        async def one_segment_in() -> bool:
            job = await job_state(client, job_id)
            return job.get("state") == "claimed" and len(job.get("segments", [])) >= 1

        await wait_until("a segment of attempt 1", one_segment_in)
        pid = app.processes.pid("worker-0")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # the only worker: no other member takes its partitions
        assert wait_gone(pid, 30)

        async def released() -> bool:
            job = await job_state(client, job_id)
            return job.get("state") == "released"

        await wait_until("the sweeper's release", released)
        job = await job_state(client, job_id)
        assert job["release"]["reason"] == "stale"
        assert job["segments"] == [], "a released attempt's partial audio is not served"

        events = [decode_event(r.value) for r in await read_to_end(topics.kafka, topics.jobs)]
        produced = [e for e in events if isinstance(e, SegmentProduced) and str(e.job_id) == job_id]
        blob = Path(unquote(urlparse(produced[0].payload.audio.uri).path))
        await wait_until("the partial audio deleted", lambda: asyncio.to_thread(lambda: not blob.exists()))

        # The same model (version): only a worker that has the job's model may synthesize it.
        app.start("worker-1", ["worker"], {"VOXLOG_WORKER_ID": "w1", "VOXLOG_BENCH_SYNTH_MS": "1500"})
        job = await wait_for_job(client, job_id, 120)
    assert (job["state"], job["attempt"], job["worker_id"]) == ("completed", 2, "w1")
    events = [decode_event(r.value) for r in await read_to_end(topics.kafka, topics.jobs)]
    releases = [e for e in events if isinstance(e, JobReleased) and str(e.job_id) == job_id]
    assert len(releases) == 1, "two sweepers ran; one acted"
    assert releases[0].producer.service == "sweeper"
    claims = [(e.attempt, e.payload.worker_id) for e in events if isinstance(e, JobClaimed)]
    assert claims == [(1, "w0"), (2, "w1")]
    assert [e.attempt for e in events if isinstance(e, JobCompleted)] == [2]
    leaders = [name for name in ("sweeper-0", "sweeper-1") if "this sweeper leads" in app.log(name)]
    assert len(leaders) == 1, leaders
