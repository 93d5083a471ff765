"""`voxlog verify`: clean after real work, and it fails, saying what, when an invariant is broken."""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import unquote, urlparse

import asyncpg
import httpx

from tests.support.apps import start_pipeline, wait_for_job
from tests.support.cli import voxlog


async def test_verify_is_clean_after_real_work_and_names_each_broken_invariant(apps, stack, schema):
    app, voices = await start_pipeline(apps)
    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        responses = [
            await client.post("/v1/jobs", json={"text": f"Verified {i}.", "voice": voices[0]}) for i in range(3)
        ]
        jobs = [await wait_for_job(client, r.json()["job_id"]) for r in responses]
    assert {job["state"] for job in jobs} == {"completed"}

    clean = await asyncio.to_thread(voxlog, app.env, "verify", "--settled", "--wait", "60")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "3 jobs (3 completed)" in clean.stdout
    assert "FAIL" not in clean.stdout

    conn = await asyncpg.connect(stack.database_url, server_settings={"search_path": schema})
    try:
        uri = await conn.fetchval("SELECT audio_uri FROM segments WHERE job_id = $1", jobs[0]["job_id"])
        await conn.execute("UPDATE jobs SET state = 'failed' WHERE job_id = $1", jobs[1]["job_id"])
    finally:
        await conn.close()
    await asyncio.to_thread(Path(unquote(urlparse(uri).path)).unlink)

    broken = await asyncio.to_thread(voxlog, app.env, "verify", "--settled", "--wait", "60")
    assert broken.returncode == 1
    fold, audio = (line for line in broken.stdout.splitlines() if line.startswith("FAIL"))
    assert fold == (
        "FAIL  the projection is a fold of the log: 1 violation(s): "
        f"{jobs[1]['job_id']}: projection failed/1, log completed/1"
    )
    assert audio.startswith(
        "FAIL  completed jobs have all their audio, every blob with its sha256: 1 violation(s): "
        f"{jobs[0]['job_id']} segment 0: blob missing"
    )
