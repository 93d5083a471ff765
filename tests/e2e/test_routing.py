"""Routing by engine and model version: a job is synthesized only by a worker that has its model.

A mixed deployment (the real kokoro-onnx model beside the benchmark engine) and
a rolling upgrade (a second model version of the benchmark engine) share one
jobs topic; every claim in the log must name the engine and model version its
job was fingerprinted for.
"""

from __future__ import annotations

import asyncio
import time

import httpx

from contracts import JobClaimed, JobQueued, decode_event
from tests.support.apps import wait_for_job
from tests.support.engines import REAL_MODEL
from tests.support.kafka import read_to_end


async def announced(client: httpx.AsyncClient) -> dict[str, str]:
    """engine -> the model version the API routes new jobs of that engine to."""
    response = await client.get("/v1/voices")
    return {e["engine"]: e["model_version"] for e in response.json()["engines"]} if response.status_code == 200 else {}


async def until_routed(client: httpx.AsyncClient, bench_version: str, within_s: float = 120.0) -> dict[str, str]:
    """Once the API routes kokoro-onnx jobs to the real model and bench-sleep jobs to ``bench_version``."""
    deadline = time.monotonic() + within_s
    while (seen := await announced(client)).get("bench-sleep") != bench_version or "kokoro-onnx" not in seen:
        assert time.monotonic() < deadline, f"the API routes to {seen}"
        await asyncio.sleep(0.3)
    return seen


async def submit_all(client: httpx.AsyncClient, engine: str, voice: str, texts: list[str]) -> list[dict]:
    responses = [await client.post("/v1/jobs", json={"text": text, "voice": voice, "engine": engine}) for text in texts]
    assert {r.status_code for r in responses} == {202}, [r.text for r in responses]
    return await asyncio.gather(*(wait_for_job(client, r.json()["job_id"], 240) for r in responses))


async def test_a_mixed_deployment_and_a_rolling_upgrade_route_every_job_to_its_own_model(apps, topics):
    app = apps(VOXLOG_THREADS="1", **REAL_MODEL)
    app.start("projector", ["projector"])
    app.start("api", ["api"])
    app.start("worker-onnx", ["worker"], {"VOXLOG_WORKER_ID": "onnx"})
    app.start("worker-sleep10", ["worker"], {"VOXLOG_WORKER_ID": "sleep10", **bench(10)})
    await app.wait_ready()
    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        await until_routed(client, "sleep-10ms")
        voices = {e["engine"]: e["voices"][0] for e in (await client.get("/v1/voices")).json()["engines"]}
        mixed = await asyncio.gather(
            submit_all(client, "kokoro-onnx", voices["kokoro-onnx"], [f"Spoken by the model, {i}." for i in range(3)]),
            submit_all(client, "bench-sleep", voices["bench-sleep"], [f"Slept through, {i}." for i in range(6)]),
        )
        # A rolling upgrade: a new version of the bench engine joins; new jobs go to it.
        app.start("worker-sleep20", ["worker"], {"VOXLOG_WORKER_ID": "sleep20", **bench(20)})
        await until_routed(client, "sleep-20ms")
        upgraded = await submit_all(
            client, "bench-sleep", voices["bench-sleep"], [f"New version, {i}." for i in range(6)]
        )
    jobs = [*mixed[0], *mixed[1], *upgraded]
    assert {job["state"] for job in jobs} == {"completed"}

    events = [decode_event(r.value) for r in await read_to_end(topics.kafka, topics.jobs)]
    requests = {e.job_id: e.payload.request for e in events if isinstance(e, JobQueued)}
    claims = [e for e in events if isinstance(e, JobClaimed)]
    assert len(claims) == len(jobs), "each job synthesized once"
    for claim in claims:
        request = requests[claim.job_id]
        assert (claim.payload.engine, claim.payload.model_version) == (request.engine, request.model_version)
    by_worker = {claim.payload.worker_id for claim in claims if requests[claim.job_id].model_version == "sleep-20ms"}
    assert by_worker == {"sleep20"}, "after the upgrade, only the new version's worker took the new version's jobs"
    assert {c.payload.worker_id for c in claims if requests[c.job_id].engine == "kokoro-onnx"} == {"onnx"}


def bench(synth_ms: int) -> dict[str, str]:
    return {"VOXLOG_ENGINE": "bench-sleep", "VOXLOG_BENCH_SYNTH_MS": str(synth_ms)}
