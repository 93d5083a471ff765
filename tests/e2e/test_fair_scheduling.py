"""Fair, preemptive scheduling on real processes (issue 27): the only worker holds several claims, and the
engine's next segment goes to the job the policy puts first.

No timing is assumed: the engine's first segment is held at a gate (the bench engine's ``gate`` fault, a
named pipe this test opens) until the later request is claimed and waits for its turn; then the gate opens.
"""

from __future__ import annotations

import asyncio
import os
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from tests.support.apps import bearer, create_key, start_pipeline, wait_for_job

GATE_WORD = "Gatekeeper"
LONG_TEXT = f"{GATE_WORD} opens the long one. " + " ".join(
    f"Sentence number {i} of the long job goes on for a while so that it fills a segment of its own." for i in range(30)
)


def engine_env(gate: Path, held_claims: int) -> dict[str, str]:
    return {
        "VOXLOG_ENGINE": "bench-sleep",
        "VOXLOG_DEFAULT_ENGINE": "bench-sleep",
        "VOXLOG_BENCH_SYNTH_MS": "20",
        "VOXLOG_BENCH_FAULT": f"gate:{GATE_WORD}@{gate}",
        "VOXLOG_HELD_CLAIMS": str(held_claims),
        "VOXLOG_SEGMENT_CACHE": "false",
    }


async def open_gate(gate: Path) -> None:
    def write() -> None:
        with open(gate, "wb"):  # the engine's reader sees the end of the pipe when this closes
            pass

    await asyncio.wait_for(asyncio.to_thread(write), 60)


async def until_state(client: httpx.AsyncClient, job_id: str, states: set[str], within_s: float = 60) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + within_s
    while asyncio.get_running_loop().time() < deadline:
        job = (await client.get(f"/v1/jobs/{job_id}")).json()
        if job.get("state") in states:
            return dict(job)
        await asyncio.sleep(0.05)
    raise AssertionError(f"job {job_id} never reached {states}")


def completed_at(job: dict[str, Any]) -> datetime:
    assert job["state"] == "completed", job
    return datetime.fromisoformat(job["timings"]["completed_at"])


async def test_a_short_request_behind_a_long_job_on_the_only_worker_completes_first(apps, topics, tmp_path):
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    app, voices = await start_pipeline(apps, workers=1, **engine_env(gate, held_claims=4))
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:
        long = await client.post("/v1/jobs", json={"text": LONG_TEXT, "voice": voices[0]})
        assert long.status_code == 202, long.text
        long_id = long.json()["job_id"]
        await until_state(client, long_id, {"claimed"})  # its first segment is on the engine, held at the gate
        short = await client.post("/v1/jobs", json={"text": "A short request.", "voice": voices[0]})
        short_id = short.json()["job_id"]
        await until_state(client, short_id, {"claimed"})  # held beside it, waiting for the engine's turn
        await open_gate(gate)
        quick, slow = await wait_for_job(client, short_id), await wait_for_job(client, long_id, within_s=300)
        events = (await client.get(f"/v1/jobs/{long_id}/events")).json()
    assert completed_at(quick) < completed_at(slow), "the short request waited for the whole long job"
    # The long job's completion says what it waited behind while claimed, and by which rule.
    completion = next(e for e in events["events"] if e["type"] == "JobCompleted")
    waited = completion["payload"]["waited"]
    assert waited is not None, completion
    assert short_id in [j["job_id"] for j in waited["jobs"]]


async def test_tenant_b_is_taken_before_tenant_as_backlog(apps, topics, tmp_path):
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    app, voices = await start_pipeline(apps, workers=1, VOXLOG_AUTH="on", **engine_env(gate, held_claims=2))
    keys = {tenant: bearer(await create_key(app, tenant)) for tenant in ("tenant-a", "tenant-b")}
    async with (
        httpx.AsyncClient(base_url=app.api, timeout=60, headers=keys["tenant-a"]) as a,
        httpx.AsyncClient(base_url=app.api, timeout=60, headers=keys["tenant-b"]) as b,
    ):
        first = await a.post("/v1/jobs", json={"text": f"{GATE_WORD} holds the engine.", "voice": voices[0]})
        assert first.status_code == 202, first.text
        await until_state(a, first.json()["job_id"], {"claimed"})  # on the engine, held at the gate
        backlog = []
        for i in range(8):
            made = await a.post("/v1/jobs", json={"text": f"Tenant A's request {i}.", "voice": voices[0]})
            assert made.status_code == 202, made.text
            backlog.append(made.json()["job_id"])
        await until_state(a, backlog[0], {"claimed"})  # the worker's second claim; the rest of A's wait
        late = await b.post("/v1/jobs", json={"text": "Tenant B's one request.", "voice": voices[0]})
        assert late.status_code == 202, late.text
        await open_gate(gate)
        b_job = await wait_for_job(b, late.json()["job_id"])
        a_jobs = [await wait_for_job(a, job_id) for job_id in backlog]
    after_b = [job for job in a_jobs if completed_at(job) > completed_at(b_job)]
    # At most the one of A's jobs already held beside the gated one went first: B's was taken before the
    # rest of A's backlog, which the worker had read before it.
    assert len(after_b) >= len(backlog) - 1, f"only {len(after_b)} of A's {len(backlog)} waited behind B's"
