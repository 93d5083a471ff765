"""Consumer lag against a running pipeline: caught up, a group nobody reads, a healthy backlog, a stopped worker."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import httpx

from tests.support.apps import start_pipeline, wait_for_job
from tests.support.cli import ROOT, lag_once

BENCH = {
    "VOXLOG_ENGINE": "bench-sleep",
    "VOXLOG_DEFAULT_ENGINE": "bench-sleep",
    "VOXLOG_BENCH_SYNTH_MS": "5",
    "VOXLOG_LAG_INTERVAL_S": "0.5",
}


SLOW = {**BENCH, "VOXLOG_BENCH_SYNTH_MS": "300"}  # 30 jobs take 9 s or more: longer than a stall window


def watch_two_samples(env: dict[str, str]) -> list[dict]:
    """`voxlog lag --json` without --once: a line per sample until Ctrl-C, which ends it cleanly."""
    watcher = subprocess.Popen(
        [sys.executable, "-m", "voxlog.cli", "lag", "--json", "--interval", "0.3"],
        env={**env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watcher.stdout is not None
        lines = [json.loads(watcher.stdout.readline()) for _ in range(2)]
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(timeout=30) == 0, watcher.stderr.read() if watcher.stderr else ""
        return lines
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()


async def until_lag_served(client: httpx.AsyncClient, group: str) -> dict:
    deadline = time.monotonic() + 60
    while True:
        served = {g["group"]: g for g in (await client.get("/v1/lag")).json()["groups"]}
        if group in served and served[group]["records"] == 0:
            return served[group]
        assert time.monotonic() < deadline, f"/v1/lag never showed {group} caught up: {served}"
        await asyncio.sleep(0.2)


async def test_lag_shows_the_synthesis_group_and_the_projector_caught_up_then_stopped_with_the_jobs_it_owes(apps):
    app, voices = await start_pipeline(apps, **BENCH)
    group = app.synth_group(await app.engine())
    projector = "projector:" + app.env.get("VOXLOG_PROJECTOR_NAME", "projector")
    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        for i in range(3):
            job = (await client.post("/v1/jobs", json={"text": f"Lag check {i}.", "voice": voices[0]})).json()
            await wait_for_job(client, job["job_id"])
        code, by_name = await asyncio.to_thread(lag_once, app.env)
        assert code == 0, by_name
        synth = by_name[group]
        assert (synth["status"], synth["members"], synth["records"]) == ("OK", 1, 0)
        assert by_name[projector]["records"] == 0
        live = await asyncio.to_thread(watch_two_samples, app.env)
        assert [{g["group"] for g in sample["groups"]} for sample in live] == [set(by_name)] * 2
        served = await until_lag_served(client, synth["group"])
        assert served["status"] == "OK", "the API's monitor agrees"
        exported = (await client.get("/metrics")).text
        assert f'voxlog_consumer_group_status{{group="{synth["group"]}",status="OK"}} 1.0' in exported

        app.stop("worker-0")  # leaves the group: nobody synthesizes
        owed = [
            (await client.post("/v1/jobs", json={"text": f"Owed {i}.", "voice": voices[0]})).json() for i in range(3)
        ]

        async def projected() -> bool:
            codes = [(await client.get(f"/v1/jobs/{j['job_id']}")).status_code for j in owed]
            return codes == [200] * len(owed)

        deadline = time.monotonic() + 60
        while not await projected():
            assert time.monotonic() < deadline, "the owed jobs were never projected"
            await asyncio.sleep(0.1)
        code, by_name = await asyncio.to_thread(lag_once, app.env)
    synth = by_name[group]
    assert code == 1, "a group that is not OK"
    assert (synth["status"], synth["members"]) == ("STOP", 0)
    assert synth["records"] >= 3, "the owed jobs' records, at least"
    assert synth["seconds"] > 0
    assert by_name[projector]["status"] == "OK"


async def first_completed(client: httpx.AsyncClient, job_ids: list[str], within_s: float = 60.0) -> str:
    """The first of ``job_ids`` seen completed (not a given one: the worker picks its own order, and the one
    the test named could be its last, the backlog gone with it, as happened in a CI run)."""
    deadline = time.monotonic() + within_s
    while True:
        for job_id in job_ids:
            answer = await client.get(f"/v1/jobs/{job_id}")
            if answer.status_code == 200 and answer.json()["state"] == "completed":
                return job_id
        assert time.monotonic() < deadline, f"no job of {len(job_ids)} completed within {within_s} s"
        await asyncio.sleep(0.1)


async def submit_backlog(client: httpx.AsyncClient, voice: str, jobs: int, tag: str) -> list[str]:
    """``jobs`` jobs in one batch: they are queued at once, spread over the worker's partitions."""
    requests = [{"text": f"{tag} job number {i}.", "voice": voice} for i in range(jobs)]
    response = await client.post("/v1/batches", json={"requests": requests})
    assert response.status_code == 202, response.text
    return [job["job_id"] for job in response.json()["jobs"]]


def served_groups(body: dict) -> dict[str, dict]:
    return {g["group"]: g for g in body["groups"]}


async def test_regression_a_healthy_worker_draining_a_backlog_is_ok_not_stall(apps):
    """One healthy worker draining 30 queued jobs showed STALL ("partitions 5, 8, 18 have lag and did not move")
    and the projector WARN for 3 records 13 ms behind: the alert rules page on STALL. Then, once the worker held
    several claims and read its backlog ahead (issue 27), WARN ("lag grew across the window"): it commits each
    partition only up to the first job it has not finished while its own events append to the partitions."""
    stall_after_s = 3.0
    app, voices = await start_pipeline(apps, **SLOW, VOXLOG_LAG_STALL_AFTER_S=str(stall_after_s))
    group = app.synth_group(await app.engine())
    projector = "projector:" + app.env["VOXLOG_PROJECTOR_NAME"]
    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        await until_lag_served(client, group)
        job_ids = await submit_backlog(client, voices[0], 30, "Backlog")
        seen: dict[str, set[tuple[str, str]]] = {group: set(), projector: set()}
        judged_with_lag = 0  # evaluations over a window long enough for a STALL while the group had lag
        drained = False
        deadline = time.monotonic() + 180
        while not drained:
            assert time.monotonic() < deadline, f"the backlog was never drained; statuses seen: {seen}"
            served = served_groups((await client.get("/v1/lag")).json())
            for name in seen:
                if name in served:
                    seen[name].add((served[name]["status"], served[name]["reason"]))
            synth = served.get(group, {"records": 1, "window_s": 0})
            judged_with_lag += synth["records"] > 0 and synth["window_s"] >= stall_after_s
            drained = judged_with_lag > 0 and synth["records"] == 0
            await asyncio.sleep(0.2)
        jobs = [await wait_for_job(client, job_id) for job_id in job_ids]
    assert {job["state"] for job in jobs} == {"completed"}
    assert judged_with_lag >= 2, "the backlog lasted long enough to be judged a STALL more than once"
    assert {status for status, _ in seen[group]} == {"OK"}, seen[group]
    assert ("OK", "no lag") in seen[group] or ("OK", "lag touched zero within the window") in seen[group]
    assert {status for status, _ in seen[projector]} == {"OK"}, seen[projector]


async def test_a_sigstopped_worker_with_jobs_owed_is_stall(apps):
    """The rule that keeps a backlog OK still tells a worker that stopped moving: STALL, while it is a member."""
    stopping = {**SLOW, "VOXLOG_LAG_STALL_AFTER_S": "1.5", "VOXLOG_LAG_INTERVAL_S": "0.3"}
    app, voices = await start_pipeline(apps, **stopping)
    group = app.synth_group(await app.engine())
    worker = app.processes.pid("worker-0")
    assert worker is not None
    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        await until_lag_served(client, group)
        job_ids = await submit_backlog(client, voices[0], 40, "Owed")
        await first_completed(client, job_ids)  # the worker is at work, and most of the backlog is still owed
        os.kill(worker, signal.SIGSTOP)
        try:
            # Its group session expires ten seconds after its last heartbeat: then the group is STOP.
            deadline = time.monotonic() + 60
            while (synth := served_groups((await client.get("/v1/lag")).json())[group])["status"] != "STALL":
                assert synth["status"] != "STOP", f"the group lost its member before its STALL was told: {synth}"
                assert time.monotonic() < deadline, f"never STALL: {synth}"
                await asyncio.sleep(0.1)
        finally:
            os.kill(worker, signal.SIGCONT)
    assert synth["members"] == 1
    assert synth["records"] > 0
    assert "did not move across the window" in synth["reason"]
