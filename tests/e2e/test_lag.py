"""`voxlog lag --once --json` against a running pipeline: caught up, then a group nobody reads."""

from __future__ import annotations

import asyncio
import json
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
