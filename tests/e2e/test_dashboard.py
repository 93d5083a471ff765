"""/dashboard in a real browser (Debian's headless Chromium): its figures appear while jobs run, and the lag it
shows is the lag `voxlog lag --json` reports."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import httpx

from infra.processes import wait_gone
from tests.support.apps import AppStack, bearer, create_key, start_pipeline, until, wait_for_job
from tests.support.browser import Figures, chromium, figures
from tests.support.cli import lag_once

BENCH = {
    "VOXLOG_ENGINE": "bench-sleep",
    "VOXLOG_DEFAULT_ENGINE": "bench-sleep",
    "VOXLOG_BENCH_SYNTH_MS": "400",
    "VOXLOG_LAG_INTERVAL_S": "0.5",
}


async def submit(app: AppStack, client: httpx.AsyncClient, texts: list[str], voice: str) -> list[str]:
    return [(await client.post("/v1/jobs", json={"text": t, "voice": voice})).json()["job_id"] for t in texts]


async def test_the_dashboard_shows_live_figures_and_the_same_lag_as_voxlog_lag(apps, tmp_path):
    app, voices = await start_pipeline(apps, **BENCH)
    group = app.synth_group(await app.engine())
    page = f"{app.api}/dashboard"
    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        running = await submit(app, client, [f"Dashboard job {i}. A second sentence." for i in range(6)], voices[0])
        live = await figures(page)  # while the jobs run
        assert live.ready, "the page rendered a sample"
        assert group in live.groups
        assert live.workers == ["w0"], "the node and what it does"
        for job_id in running:
            await wait_for_job(client, job_id, 120)

        app.stop("worker-0")  # nobody synthesizes now: the jobs below stay owed, and the lag holds still
        owed = await submit(app, client, [f"Owed {i}." for i in range(4)], voices[0])

        async def projected_and_sampled() -> bool:
            codes = [(await client.get(f"/v1/jobs/{job_id}")).status_code for job_id in owed]
            served = {g["group"]: g for g in (await client.get("/v1/lag")).json()["groups"]}
            return codes == [200] * len(owed) and served.get(group, {}).get("status") == "STOP"

        try:
            await until("the owed jobs projected and the group seen stopped", projected_and_sampled)
        except AssertionError:
            print((await client.get("/v1/lag")).text)
            print(app.log("api")[-3000:])
            raise
    _, reported = await asyncio.to_thread(lag_once, app.env)
    shown = await figures(page)
    # VOXLOG_DASHBOARD_SCREENSHOT (an absolute path) keeps the picture, as docs/dashboard.png was made.
    screenshot = Path(os.environ.get("VOXLOG_DASHBOARD_SCREENSHOT", tmp_path / "dashboard.png"))
    await asyncio.to_thread(chromium, "--window-size=1280,1000", f"--screenshot={screenshot}", page)

    row = shown.groups[group]
    assert (row["data-status"], int(row["data-records"])) == ("STOP", reported[group]["records"])
    assert reported[group]["records"] >= len(owed)
    assert int(shown.texts["completed"]) >= len(running), "throughput from the projection"
    assert shown.texts["jobs-per-s"] != "-"
    picture = await asyncio.to_thread(screenshot.read_bytes)
    assert picture[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(picture) > 10_000, "a page, not a blank"


async def test_regression_under_a_backlog_of_1000_jobs_the_page_shows_the_api_s_answer_and_the_backlog(apps):
    """Under a 1,000-request load the page printed "cannot reach the API: TypeError: Cannot read properties of
    undefined (reading 'at')" while the API answered: the operator's key was over its rate, and the page read
    the 429's body ({"detail": ...}) as figures (body.lag.at). Here the load is a batch of 1,000 jobs, which
    leaves the key's bucket in debt (a token a job), on a worker that takes a job every 5 s: the page with
    that key says what the API answered, and with another operator key it shows the backlog."""
    held = {"VOXLOG_BENCH_SYNTH_MS": "5000", "VOXLOG_AUTH": "on", "VOXLOG_MAX_BACKLOG_S": "0"}
    app, voices = await start_pipeline(apps, **{**BENCH, **held})
    group = app.synth_group(await app.engine())
    loader = await create_key(app, "load", "submit,read,operator")
    watcher = await create_key(app, "ops", "operator")
    jobs = 1000
    async with httpx.AsyncClient(base_url=app.api, timeout=60, headers=bearer(loader)) as client:
        batch = {"requests": [{"text": f"Backlog job {i}.", "voice": voices[0]} for i in range(jobs)]}
        taken = await client.post("/v1/batches", json=batch)
        assert taken.status_code == 202, taken.text
        over = await client.get("/v1/dashboard")
        assert over.status_code == 429, "the batch left the key in debt: its reads are refused a while"

    refused = await figures(f"{app.api}/dashboard#key={loader}")
    error = refused.texts.get("error", "")
    assert "TypeError" not in error, error
    assert "cannot reach" not in error, error
    assert refused.answered == "429"
    assert "over its rate" in error, "the API's own words"

    seen: list[Figures] = []

    async def backlog_shown() -> bool:
        seen.append(shown := await figures(f"{app.api}/dashboard#key={watcher}"))
        lag = shown.groups.get(group)
        waiting = {(q["data-tenant"], q["data-priority"]): int(q["data-jobs"]) for q in shown.queues}
        # A job's record stays uncommitted until it is done, so what is not done yet is behind.
        behind = lag is not None and int(lag["data-records"]) + int(shown.texts.get("completed", "0")) >= jobs
        return shown.ready and behind and waiting.get(("load", "batch"), 0) > 0

    await until("the backlog shown", backlog_shown)
    shown = seen[-1]
    assert shown.workers == ["w0"]
    assert (shown.answered, shown.texts.get("error")) == ("", None), "nothing but figures"


async def test_regression_a_killed_worker_is_shown_gone_counted_no_longer_and_then_dropped(apps):
    """A worker killed 35 minutes earlier was listed as `idle`, 78% busy, last heartbeat 2,103 s ago, and the
    API exported no count of the workers that are live (the "no worker" alert used scrape targets)."""
    silence = {"VOXLOG_STALE_AFTER_S": "2", "VOXLOG_NODE_FORGET_AFTER_S": "8"}
    app, _ = await start_pipeline(apps, **{**BENCH, "VOXLOG_BENCH_SYNTH_MS": "5"}, **silence)
    engine = await app.engine()
    live = f'voxlog_workers{{engine="{engine["engine"]}",model_version="{engine["model_version"]}"}}'

    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:

        async def nodes() -> dict[str, dict]:
            activity = (await client.get("/v1/dashboard")).json()["activity"] or {"nodes": []}
            return {n["worker_id"]: n for n in activity["nodes"]}

        async def exported(count: float) -> bool:
            return f"{live} {count}" in (await client.get("/metrics")).text

        await until("the worker listed as live", lambda: _state_is(nodes, "live"))
        await until("the live worker counted", lambda: exported(1.0))
        worker = app.processes.pid("worker-0")
        assert worker is not None
        os.kill(worker, signal.SIGKILL)  # no goodbye: its last heartbeat is all the projection has
        assert wait_gone(worker, 30)
        await until("the killed worker shown as gone", lambda: _state_is(nodes, "gone"))
        await until("the killed worker counted no longer", lambda: exported(0.0))
        await until("the killed worker dropped from the list", lambda: _state_is(nodes, None))


async def _state_is(nodes, state: str | None) -> bool:
    return (await nodes()).get("w0", {}).get("state") == state
