"""`voxlog replay`: the projection rebuilt from the log equals the live one, as of now or as of any time."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import httpx

from contracts import utc_now
from projections.migrations import drop_schema
from tests.support.apps import start_pipeline, wait_for_job
from tests.support.cli import voxlog

BENCH = {"VOXLOG_ENGINE": "bench-sleep", "VOXLOG_DEFAULT_ENGINE": "bench-sleep", "VOXLOG_BENCH_SYNTH_MS": "5"}


async def submit(client: httpx.AsyncClient, texts: list[str]) -> list[dict]:
    responses = [await client.post("/v1/jobs", json={"text": t, "voice": "bench_tone"}) for t in texts]
    return [await wait_for_job(client, r.json()["job_id"]) for r in responses]


async def test_replay_rebuilds_the_live_projection_as_of_now_and_as_of_a_time(apps, stack, schema):
    app, _ = await start_pipeline(apps, **BENCH)
    rebuilt = [f"r_{uuid.uuid4().hex[:12]}" for _ in range(4)]
    try:
        async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
            early = await submit(client, [f"Early job {i}." for i in range(5)])
            moment = utc_now()
            late = await submit(client, [f"Late job {i % 3}." for i in range(9)])  # duplicates: some coalesce
        assert {job["state"] for job in early + late} == {"completed"}

        checked = await asyncio.to_thread(voxlog, app.env, "replay", "--into", rebuilt[0], "--verify")
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "no difference" in checked.stdout
        assert "job_events.recorded_at (when the projector wrote the row)" in checked.stdout, "ignored columns named"

        as_of = await asyncio.to_thread(voxlog, app.env, "replay", "--into", rebuilt[1], "--until", moment.isoformat())
        assert as_of.returncode == 0, as_of.stdout + as_of.stderr
        conn = await asyncpg.connect(stack.database_url)
        try:
            then = {r["job_id"]: r["state"] for r in await conn.fetch(f"SELECT job_id, state FROM {rebuilt[1]}.jobs")}
            assert then == {uuid.UUID(job["job_id"]): "completed" for job in early}, "what the system believed then"

            await conn.execute(
                f"UPDATE {schema}.jobs SET state = 'failed' WHERE job_id = $1", uuid.UUID(late[0]["job_id"])
            )
        finally:
            await conn.close()
        drifted = await asyncio.to_thread(voxlog, app.env, "replay", "--into", rebuilt[2], "--verify")
        assert drifted.returncode == 1
        assert f"jobs {late[0]['job_id']}: state: 'failed' live, 'completed' rebuilt" in drifted.stdout
        assert "1 difference(s)" in drifted.stdout

        refused = await asyncio.to_thread(voxlog, app.env, "replay", "--into", rebuilt[1])
        assert refused.returncode == 2
        assert f"schema {rebuilt[1]} already holds a projection" in refused.stderr
    finally:
        for name in rebuilt:
            await drop_schema(stack.database_url, name)
