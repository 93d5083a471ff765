"""Backpressure on real processes: a flood gets 429 while cached requests get 200 and no accepted job is
lost; cache-only mode, switched by an operator and by the sweeper, follows the log."""

from __future__ import annotations

import asyncio
import json

import httpx

from contracts import ServiceModeSet, decode_node_event, type_name
from tests.support.apps import AppStack, until, wait_for_job
from tests.support.cli import voxlog
from tests.support.kafka import read_to_end

# About 0.05 + 0.004 * 50 = 0.25 s of synthesis per request of 50 characters: a fleet of one worker
# does about 200 characters a second.
SLOW = {
    "VOXLOG_ENGINE": "bench-sleep",
    "VOXLOG_DEFAULT_ENGINE": "bench-sleep",
    "VOXLOG_BENCH_SYNTH_MS": "50",
    "VOXLOG_BENCH_MS_PER_CHAR": "4",
    "VOXLOG_HEARTBEAT_S": "0.5",
}


def status(app: AppStack) -> dict:
    done = voxlog(app.env, "admin", "cache-only", "status", "--json", timeout_s=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout))


async def start(apps, *, sweeper: bool = False, **env: str) -> tuple[AppStack, str, str]:
    """The pipeline, warmed: one cached text, and a worker whose measured speed the projection shows."""
    app = apps(**SLOW, **env)
    app.start("projector", ["projector"])
    app.start("worker-0", ["worker"], {"VOXLOG_WORKER_ID": "w0"})
    if sweeper:
        app.start("sweeper", ["sweeper"])
    app.start("api", ["api"])
    await app.wait_ready()
    voice = (await app.voices())[0]
    cached = "This sentence is in the cache before the flood begins."
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:
        answer = await client.post("/v1/jobs", json={"text": cached, "voice": voice})
        assert (await wait_for_job(client, answer.json()["job_id"]))["state"] == "completed"

    async def speed_known() -> bool:
        return (await asyncio.to_thread(status, app))["backlog"]["chars_per_s"] is not None

    await until("the worker's measured speed to reach the projection", speed_known)
    return app, voice, cached


def flood_texts(n: int, tag: str) -> list[str]:
    return [f"Flood request {tag} number {i:03d}, fifty characters." for i in range(n)]


async def test_a_flood_gets_429_while_cached_requests_get_200_and_no_accepted_job_is_lost(apps, topics):
    app, voice, cached = await start(apps, VOXLOG_MAX_BACKLOG_S="3")
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:

        async def submit(text: str) -> httpx.Response:
            return await client.post("/v1/jobs", json={"text": text, "voice": voice})

        texts = flood_texts(40, "a")
        answers = await asyncio.gather(
            *(submit(t) for t in texts[:20]), submit(cached), *(submit(t) for t in texts[20:])
        )
        cached_answer = answers.pop(20)
        assert cached_answer.status_code == 200, cached_answer.text
        assert cached_answer.json()["state"] == "completed"

        codes = [a.status_code for a in answers]
        assert set(codes) == {202, 429}, codes
        refused = [a for a in answers if a.status_code == 429]
        assert all(int(a.headers["retry-after"]) >= 1 for a in refused)
        assert "over VOXLOG_MAX_BACKLOG_S (3 s)" in refused[0].json()["detail"]
        assert "cached are still answered" in refused[0].json()["detail"]

        accepted = [a.json()["job_id"] for a in answers if a.status_code == 202]
        jobs = await asyncio.gather(*(wait_for_job(client, job_id, 180) for job_id in accepted))
        assert [job["state"] for job in jobs] == ["completed"] * len(accepted), "no accepted job is lost"

        # Once the backlog drained, a refused request is taken.
        retried = texts[codes.index(429)]
        again = await submit(retried)
        assert again.status_code == 202, again.text
        assert (await wait_for_job(client, again.json()["job_id"]))["state"] == "completed"


async def test_a_duplicate_heavy_flood_is_refused_only_when_its_distinct_work_is_over_the_limit(apps, topics):
    """10 texts submitted 30 times each are 2.5 s of distinct work (75 s counted per request) under a limit of
    8 s: all taken. 60 new texts are 15 s more: the limit refuses some of them."""
    app, voice, _ = await start(apps, VOXLOG_MAX_BACKLOG_S="8")
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:

        async def submit(text: str) -> httpx.Response:
            return await client.post("/v1/jobs", json={"text": text, "voice": voice})

        duplicates = await asyncio.gather(*(submit(t) for t in flood_texts(10, "dup") * 30))
        codes = [a.status_code for a in duplicates]
        assert 429 not in codes, f"{codes.count(429)} of 300 duplicates refused though their distinct work fits"
        distinct = await asyncio.gather(*(submit(t) for t in flood_texts(60, "new")))
        assert 429 in [a.status_code for a in distinct], "distinct work over the limit is refused"
        accepted = [a.json()["job_id"] for a in (*duplicates, *distinct) if a.status_code in (200, 202)]
        jobs = await asyncio.gather(*(wait_for_job(client, job_id, 240) for job_id in accepted))
        assert {job["state"] for job in jobs} == {"completed"}, "no accepted job is lost"
        # A cached answer names the job whose audio it is: count the syntheses, not the answers.
        synthesized = {job["job_id"] for job in jobs[: len(duplicates)] if not job["cache_hit"]}
        assert len(synthesized) == 10, "300 duplicates, 10 syntheses"


async def test_cache_only_mode_follows_the_operator_and_the_backlog(apps, topics):
    app, voice, cached = await start(apps, sweeper=True, VOXLOG_CACHE_ONLY_BACKLOG_S="3", VOXLOG_SWEEP_INTERVAL_S="0.5")
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:

        async def submit(text: str) -> httpx.Response:
            return await client.post("/v1/jobs", json={"text": text, "voice": voice})

        switched = await asyncio.to_thread(
            voxlog, app.env, "admin", "cache-only", "on", "--reason", "maintenance", timeout_s=60
        )
        assert switched.returncode == 0, switched.stdout + switched.stderr
        probe = iter(flood_texts(200, "probe"))

        async def refused_as_cache_only(source: str) -> bool:
            answer = await submit(next(probe))
            return answer.status_code == 503 and f"cache-only mode ({source}" in answer.json()["detail"]

        await until("the API to follow the operator's switch", lambda: refused_as_cache_only("operator: maintenance"))
        assert (await submit(cached)).status_code == 200, "a cached request is still answered"
        assert (await asyncio.to_thread(status, app))["switches"]["operator"]["enabled"] is True

        off = await asyncio.to_thread(voxlog, app.env, "admin", "cache-only", "off", timeout_s=60)
        assert off.returncode == 0, off.stdout + off.stderr

        async def taken() -> bool:
            return (await submit(next(probe))).status_code == 202

        await until("the API to take new syntheses again", taken)

        # A flood the API takes (no 429 limit here) puts the backlog over the sweeper's threshold.
        flood = await asyncio.gather(*(submit(t) for t in flood_texts(40, "b")))
        assert {a.status_code for a in flood} == {202}
        await until("the sweeper to switch cache-only mode on", lambda: refused_as_cache_only("backlog"))
        assert (await submit(cached)).status_code == 200
        jobs = await asyncio.gather(*(wait_for_job(client, a.json()["job_id"], 240) for a in flood))
        assert {job["state"] for job in jobs} == {"completed"}
        await until("the sweeper to switch cache-only mode off as the backlog drained", taken, within_s=120)

    records = await read_to_end(app.kafka, app.env["VOXLOG_CONTROL_TOPIC"])
    switches = [decode_node_event(r.value) for r in records if r.value and b'"ServiceModeSet"' in r.value]
    assert all(e.type == type_name(ServiceModeSet) for e in switches)
    seen = [(e.payload.source, e.payload.enabled) for e in switches if isinstance(e, ServiceModeSet)]
    assert {("operator", True), ("operator", False), ("backlog", True), ("backlog", False)} <= set(seen)
