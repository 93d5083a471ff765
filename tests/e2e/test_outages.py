"""Outages of what voxlog depends on: every process keeps running, answers what it can, and resumes.

Each test runs the pipeline against a broker and a PostgreSQL cluster of its own
(tests.support.stack.PrivateStack), so that it can kill and restart them.
The benchmark engine's 20 ms synthesis keeps the jobs short: the subject here is
the orchestration, not the model.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio

from contracts import utc_now
from foundation.settings import TopicSettings
from infra.processes import pid_alive
from projections.migrations import migrate_database
from tests.integration.conftest import Topics
from tests.support.apps import AppStack, new_app_stack, wait_for_job, wait_http
from tests.support.stack import PrivateStack
from voxlog.topics import ensure_topics, topic_specs

PUBLISH_TIMEOUT_MS = 3000
FAST_ENGINE = {"VOXLOG_ENGINE": "bench-sleep", "VOXLOG_DEFAULT_ENGINE": "bench-sleep", "VOXLOG_BENCH_SYNTH_MS": "20"}


@pytest_asyncio.fixture
async def private(tmp_path) -> AsyncIterator[tuple[PrivateStack, AppStack]]:
    stack = PrivateStack()
    app: AppStack | None = None
    try:
        await stack.up()
        topics = Topics(stack.kafka, TopicSettings(jobs_partitions=6))
        await ensure_topics(stack.kafka, topic_specs(topics.settings))
        await migrate_database(stack.database_url, "voxlog")
        app = new_app_stack(
            stack, topics, "voxlog", tmp_path / "apps", VOXLOG_PUBLISH_TIMEOUT_MS=str(PUBLISH_TIMEOUT_MS), **FAST_ENGINE
        )
        app.start("projector", ["projector"])
        app.start("worker-0", ["worker", "--device", "cpu"], {"VOXLOG_WORKER_ID": "w0"})
        app.start("api", ["api"])
        await app.wait_ready()
        yield stack, app
    finally:
        if app is not None:
            app.stop_all()
        stack.down()


def alive(app: AppStack) -> dict[str, bool]:
    return {name: (pid := app.processes.pid(name)) is not None and pid_alive(pid) for name in app.specs}


async def submit(client: httpx.AsyncClient, voice: str, text: str) -> httpx.Response:
    return await client.post("/v1/jobs", json={"text": text, "voice": voice})


async def accepted(client: httpx.AsyncClient, voice: str, text: str) -> str:
    response = await submit(client, voice, text)
    assert response.status_code == 202, response.text
    return str(response.json()["job_id"])


async def until_ready(client: httpx.AsyncClient, within_s: float = 120.0) -> None:
    deadline = time.monotonic() + within_s
    while (response := await client.get("/readyz")).status_code != 200:
        assert time.monotonic() < deadline, f"the API never became ready again: {response.text}"
        await asyncio.sleep(0.5)


async def test_regression_a_killed_broker_gets_503_within_the_publish_timeout_and_everything_resumes(private):
    """With the broker SIGKILLed, POST /v1/jobs waited 756 s and then answered 202."""
    stack, app = private
    voice = (await app.voices())[0]
    # A client that gives up well after the publish timeout: a hang fails the test instead of passing late.
    async with httpx.AsyncClient(base_url=app.api, timeout=PUBLISH_TIMEOUT_MS / 1000 + 20) as client:
        before = await wait_for_job(client, await accepted(client, voice, "Before the outage."))
        assert before["state"] == "completed"

        stack.kill_broker()
        refused = await submit(client, voice, "During the outage.")
        assert refused.status_code == 503, refused.text
        assert int(refused.headers["retry-after"]) > 0
        assert "Idempotency-Key" in refused.json()["detail"], "the answer says how to retry safely"
        status = await client.get(f"/v1/jobs/{before['job_id']}")
        assert status.status_code == 200, "status reads are served from Postgres while Kafka is down"
        history = await client.get(f"/v1/jobs/{before['job_id']}/events")
        assert history.status_code == 503, history.text
        assert history.json()["detail"].startswith("the log cannot be read")
        assert int(history.headers["retry-after"]) > 0
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["checks"]["postgres"] == "ok"
        assert ready.json()["checks"]["kafka"].startswith("error")
        assert all(alive(app).values()), alive(app)

        await stack.start_broker()
        await until_ready(client)
        history = await client.get(f"/v1/jobs/{before['job_id']}/events")
        assert history.status_code == 200, history.text
        assert history.json()["state"] == "completed"
        after = await asyncio.gather(*(submit(client, voice, f"After the outage, number {i}.") for i in range(10)))
        assert {r.status_code for r in after} == {202}
        jobs = await asyncio.gather(*(wait_for_job(client, r.json()["job_id"], 180) for r in after))
    assert {job["state"] for job in jobs} == {"completed"}
    assert all(alive(app).values()), alive(app)


async def test_postgres_stopped_and_started_under_load_loses_nothing_and_the_api_never_answers_500(private):
    stack, app = private
    voice = (await app.voices())[0]
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:
        first = await submit(client, voice, "Before Postgres stops.")
        assert first.status_code == 202
        await wait_for_job(client, first.json()["job_id"])

        stack.stop_postgres()
        status = await client.get(f"/v1/jobs/{first.json()['job_id']}")
        assert status.status_code == 503, status.text
        assert int(status.headers["retry-after"]) > 0
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["checks"]["postgres"].startswith("error")
        # The log still takes work: the read side being down does not stop the write side.
        during = [await submit(client, voice, f"While Postgres is down, number {i}.") for i in range(5)]
        assert [r.status_code for r in during] == [202] * 5, [r.text for r in during]
        assert (await client.get(f"/v1/jobs/{uuid.uuid4()}")).status_code == 503
        # The log answers what the tables cannot: a job's history, and its state as of a time.
        history = await client.get(f"/v1/jobs/{first.json()['job_id']}/events")
        assert history.status_code == 200, history.text
        assert [e["type"] for e in history.json()["events"]][-1] == "JobCompleted"
        now = await client.get(f"/v1/jobs/{first.json()['job_id']}", params={"as_of": utc_now().isoformat()})
        assert (now.status_code, now.json()["state"]) == (200, "completed")
        assert all(alive(app).values()), alive(app)

        await stack.start_postgres()
        await until_ready(client)
        jobs = await asyncio.gather(*(wait_for_job(client, r.json()["job_id"], 180) for r in during))
    assert {job["state"] for job in jobs} == {"completed"}
    assert all(alive(app).values()), alive(app)


@pytest.mark.parametrize("dependency", ["kafka", "postgres"])
async def test_processes_started_while_a_dependency_is_down_wait_for_it(tmp_path, dependency):
    """A process started during an outage waits (and says so) instead of exiting."""
    stack = PrivateStack()
    app: AppStack | None = None
    try:
        await stack.up()
        topics = Topics(stack.kafka, TopicSettings(jobs_partitions=2))
        await ensure_topics(stack.kafka, topic_specs(topics.settings))
        if dependency == "kafka":
            stack.kill_broker()
        else:
            stack.stop_postgres()
        app = new_app_stack(stack, topics, "voxlog", tmp_path / "apps", **FAST_ENGINE)
        app.start("projector", ["projector"])
        app.start("worker-0", ["worker", "--device", "cpu"], {"VOXLOG_WORKER_ID": "w0"})
        app.start("api", ["api"])
        # Everything that needs the missing dependency to start says that it waits for it (the worker
        # needs PostgreSQL for nothing but lookups it can do without, so it starts either way).
        waiting = ["projector", "worker-0"] if dependency == "kafka" else ["projector"]
        deadline = time.monotonic() + 60
        while not all("waiting for" in app.log(name) for name in waiting):
            assert time.monotonic() < deadline, {name: app.log(name) for name in waiting}
            assert all(alive(app).values()), alive(app)
            await asyncio.sleep(0.5)
        await wait_http(f"{app.api}/healthz")  # the API answers from the start, once it listens
        async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
            ready = (await client.get("/readyz")).json()
        assert ready["checks"][dependency].startswith("error"), ready
        if dependency == "kafka":
            await stack.start_broker()
        else:
            await stack.start_postgres()
        await app.wait_ready(180)
        voice = (await app.voices(180))[0]
        async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:
            job = await wait_for_job(client, await accepted(client, voice, "After the wait."), 180)
        assert job["state"] == "completed"
    finally:
        if app is not None:
            app.stop_all()
        stack.down()
