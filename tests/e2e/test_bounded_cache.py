"""The bounded cache on real processes: the sweeper holds the blob store under its cap with CacheEvicted
events, expired audio answers 410, and results handed out while eviction runs keep their audio."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path

import httpx

from contracts import CacheEvicted, decode_event, type_name
from projections.migrations import drop_schema
from tests.support.apps import AppStack, until, wait_for_job
from tests.support.cli import voxlog
from tests.support.kafka import read_to_end

# A short retention and quick rounds, so that the cap bites within the test; a TTL long enough that only
# the cap evicts.
CACHE = {
    "VOXLOG_ENGINE": "bench-sleep",
    "VOXLOG_DEFAULT_ENGINE": "bench-sleep",
    "VOXLOG_BENCH_SYNTH_MS": "5",
    "VOXLOG_CACHE_TTL": "3600",
    "VOXLOG_JOB_RETENTION_S": "2",
    "VOXLOG_CACHE_SWEEP_INTERVAL_S": "0.5",
    "VOXLOG_SWEEP_INTERVAL_S": "0.5",
}


def store_bytes(app: AppStack) -> int:
    root = Path(app.env["VOXLOG_BLOB_DIR"])
    return sum(
        os.stat(os.path.join(d, n)).st_size for d, _, names in os.walk(root) for n in names if not n.startswith(".")
    )


async def start(apps) -> tuple[AppStack, str]:
    app = apps(**CACHE)
    app.start("projector", ["projector"])
    app.start("worker-0", ["worker"], {"VOXLOG_WORKER_ID": "w0"})
    app.start("api", ["api"])
    await app.wait_ready()
    return app, (await app.voices())[0]


async def start_sweeper(app: AppStack, cap: int) -> None:
    app.start("sweeper", ["sweeper"], {"VOXLOG_CACHE_MAX_BYTES": str(cap)})
    await app.wait_ready()


async def evictions(app: AppStack) -> list[CacheEvicted]:
    records = await read_to_end(app.kafka, app.env["VOXLOG_JOBS_TOPIC"])
    events = [decode_event(r.value) for r in records]
    return [e for e in events if e.type == type_name(CacheEvicted)]  # type: ignore[misc]


async def test_the_blob_store_stays_under_its_cap_and_expired_audio_is_a_410(apps, topics):
    app, voice = await start(apps)
    texts = [f"Distinct request number {i:02d}, each with a tone of its own." for i in range(16)]
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:

        async def run(text: str) -> dict:
            answer = await client.post("/v1/jobs", json={"text": text, "voice": voice})
            assert answer.status_code == 202, answer.text
            return await wait_for_job(client, answer.json()["job_id"])

        jobs = [await run(texts[0])]
        cap = 4 * store_bytes(app)  # room for four results of this length
        assert cap > 0
        await start_sweeper(app, cap)
        jobs += [await run(text) for text in texts[1:]]
        assert {job["state"] for job in jobs} == {"completed"}

        async def fits() -> bool:
            return store_bytes(app) <= cap

        # Once the retention of the older jobs has passed, the least recently used results go.
        await until("the store to fit under its cap", fits)
        evicted = await evictions(app)
        assert evicted, "the sweeper recorded its evictions on the log"
        assert {e.payload.reason for e in evicted} == {"capacity"}
        evicted_ids = {str(e.job_id) for e in evicted}
        order = sorted(i for i, job in enumerate(jobs) if job["job_id"] in evicted_ids)
        assert order == list(range(len(evicted_ids))), f"the least recently used went first, not {order}"
        assert len(evicted_ids) <= len(jobs) - 4, "the four that fit stay"
        oldest = jobs[0]["job_id"]

        expired = await client.get(f"/v1/jobs/{oldest}/audio")
        assert expired.status_code == 410, expired.text
        assert "expired" in expired.json()["detail"]
        assert "VOXLOG_JOB_RETENTION_S" in expired.json()["detail"]
        newest = await client.get(f"/v1/jobs/{jobs[-1]['job_id']}/audio")
        assert newest.status_code == 200

        # An evicted result is synthesized afresh, not answered from the cache.
        again = await client.post("/v1/jobs", json={"text": texts[0], "voice": voice})
        assert again.status_code == 202
        assert again.json()["job_id"] != oldest
        redone = await wait_for_job(client, again.json()["job_id"])
        assert (redone["state"], redone["cache_hit"]) == ("completed", False)
        assert (await client.get(f"/v1/jobs/{redone['job_id']}/audio")).status_code == 200

    stats = voxlog(app.env, "cache", "stats", "--json", timeout_s=120)
    assert stats.returncode == 0, stats.stderr
    left = json.loads(stats.stdout)["live_entries"]
    assert 0 < left < len(texts)

    unsure = voxlog(app.env, "cache", "purge", timeout_s=60)
    assert unsure.returncode == 2, "purge says which results: --older-than SECONDS or --all"
    purged = voxlog(app.env, "cache", "purge", "--all", timeout_s=120)
    assert purged.returncode == 0, purged.stderr + purged.stdout
    assert f"evicted {left} results" in purged.stdout

    async def emptied() -> bool:
        done = voxlog(app.env, "cache", "stats", "--json", timeout_s=120)
        return json.loads(done.stdout)["entries"] == 0

    await until("the projection to apply the purge", emptied)
    assert {e.payload.reason for e in await evictions(app)} == {"capacity", "purge"}

    # The evictions are facts of the log: the projection rebuilt from it equals the live one.
    rebuilt = f"r_{uuid.uuid4().hex[:12]}"  # a schema of its own: the database outlives the test
    try:
        checked = await asyncio.to_thread(voxlog, app.env, "replay", "--into", rebuilt, "--verify")
    finally:
        await drop_schema(app.env["VOXLOG_DATABASE_URL"], rebuilt)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "no difference" in checked.stdout


async def test_results_handed_out_while_eviction_runs_keep_their_audio(apps, topics):
    """Cache hits on a few texts race the sweeper evicting them (a cap of one byte, so that every round
    evicts every result unused for the retention): every job the API answers must serve its audio, never
    a 410 or a 500, whether its result was reused (touched before the deletion) or synthesized again."""
    app, voice = await start(apps)
    await start_sweeper(app, cap=1)
    hot = [f"A hot sentence that many clients ask for, number {i}." for i in range(3)]
    served, reused = 0, 0
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:
        for round_number in range(24):
            text = hot[round_number % len(hot)]
            answer = await client.post("/v1/jobs", json={"text": text, "voice": voice})
            assert answer.status_code in (200, 202), answer.text
            job = await wait_for_job(client, answer.json()["job_id"])
            assert job["state"] == "completed"
            reused += answer.status_code == 200 or job["cache_hit"]
            audio = await client.get(f"/v1/jobs/{job['job_id']}/audio")
            assert audio.status_code == 200, f"round {round_number}: {audio.status_code} {audio.text[:300]}"
            assert audio.content[:4] == b"RIFF"
            served += 1
            if round_number % 6 == 5:
                before = len(await evictions(app))

                async def evicted_more(before: int = before) -> bool:
                    return len(await evictions(app)) > before

                await until("the sweeper to evict a result unused for the retention", evicted_more)
    assert served == 24
    assert reused > 0, "some answers reused a result"
