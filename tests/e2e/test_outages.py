"""Outages of what voxlog depends on: every process keeps running, answers what it can, and resumes.

The module's tests run the pipeline against a broker and a PostgreSQL cluster of their
own (tests.support.stack.PrivateStack), so that they can kill and restart them; each test
has its own topics and schema on them, and finds both running (started again when the
test before left one down).
The benchmark engine's 20 ms synthesis keeps the jobs short: the subject here is
the orchestration, not the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from contracts import utc_now
from infra.processes import pid_alive, wait_gone
from projections.migrations import migrate_database
from tests.integration.conftest import Topics, fresh_topic_settings
from tests.support.apps import AppStack, new_app_stack, wait_for_job, wait_http
from tests.support.stack import PrivateStack
from voxlog.client import AsyncClient, RetryPolicy
from voxlog.topics import ensure_topics, topic_specs

PUBLISH_TIMEOUT_MS = 3000
FAST_ENGINE = {"VOXLOG_ENGINE": "bench-sleep", "VOXLOG_DEFAULT_ENGINE": "bench-sleep", "VOXLOG_BENCH_SYNTH_MS": "20"}


@pytest_asyncio.fixture(scope="module")
async def outage_stack() -> AsyncIterator[PrivateStack]:
    """One broker and PostgreSQL cluster for the module (each costs an initdb and a JVM's start: about half a
    minute of the suite's time here, per test, when every test had its own)."""
    stack = PrivateStack()
    try:
        await stack.up()
        yield stack
    finally:
        stack.down()


async def running(stack: PrivateStack) -> PrivateStack:
    """``stack`` with its broker and PostgreSQL both up: a test before may have left one down."""
    down = {status.name for status in await stack.stack.status() if not status.up}
    if any(name.startswith("kafka") for name in down):
        await stack.start_broker()
    if "postgres" in down:
        await stack.start_postgres()
    return stack


async def fresh_topics_and_schema(stack: PrivateStack, partitions: int) -> tuple[Topics, str]:
    settings = fresh_topic_settings(jobs_partitions=partitions)
    await ensure_topics(stack.kafka, topic_specs(settings))
    return Topics(stack.kafka, settings), f"t_{uuid.uuid4().hex[:12]}"


@contextlib.asynccontextmanager
async def private_pipeline(
    outage_stack: PrivateStack, tmp_path: Path, **env: str
) -> AsyncIterator[tuple[PrivateStack, AppStack]]:
    """A projector, a worker and the API on the module's own broker and PostgreSQL cluster."""
    stack = await running(outage_stack)
    topics, schema = await fresh_topics_and_schema(stack, 6)
    await migrate_database(stack.database_url, schema)
    app = new_app_stack(
        stack,
        topics,
        schema,
        tmp_path / "apps",
        VOXLOG_PUBLISH_TIMEOUT_MS=str(PUBLISH_TIMEOUT_MS),
        **FAST_ENGINE,
        **env,
    )
    try:
        app.start("projector", ["projector"])
        app.start("worker-0", ["worker", "--device", "cpu"], {"VOXLOG_WORKER_ID": "w0"})
        app.start("api", ["api"])
        await app.wait_ready()
        yield stack, app
    finally:
        app.stop_all()


@pytest_asyncio.fixture
async def private(outage_stack, tmp_path) -> AsyncIterator[tuple[PrivateStack, AppStack]]:
    async with private_pipeline(outage_stack, tmp_path) as pipeline:
        yield pipeline


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
        # A job's history and its state as of a time are read from the log, but only once the projection, which
        # is authoritative for who owns a job, says it is the caller's (issue 40, item 2): 503 meanwhile.
        history = await client.get(f"/v1/jobs/{first.json()['job_id']}/events")
        assert history.status_code == 503, history.text
        assert int(history.headers["retry-after"]) > 0
        now = await client.get(f"/v1/jobs/{first.json()['job_id']}", params={"as_of": utc_now().isoformat()})
        assert now.status_code == 503, now.text
        assert all(alive(app).values()), alive(app)

        await stack.start_postgres()
        await until_ready(client)
        jobs = await asyncio.gather(*(wait_for_job(client, r.json()["job_id"], 180) for r in during))
    assert {job["state"] for job in jobs} == {"completed"}
    assert all(alive(app).values()), alive(app)


@pytest.mark.parametrize("dependency", ["kafka", "postgres"])
async def test_processes_started_while_a_dependency_is_down_wait_for_it(outage_stack, tmp_path, dependency):
    """A process started during an outage waits (and says so) instead of exiting."""
    stack = await running(outage_stack)
    topics, schema = await fresh_topics_and_schema(stack, 2)
    app: AppStack | None = None
    try:
        if dependency == "kafka":
            stack.kill_broker()
        else:
            stack.stop_postgres()
        app = new_app_stack(stack, topics, schema, tmp_path / "apps", **FAST_ENGINE)
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


def log_lines(app: AppStack, name: str) -> list[str]:
    return app.processes.log_file(name).read_text(errors="replace").splitlines()


def events(lines: list[str]) -> list[dict]:
    """The JSON lines among ``lines`` (a process's own output, as opposed to a traceback)."""
    parsed = []
    for line in lines:
        with contextlib.suppress(ValueError):
            parsed.append(json.loads(line))
    return parsed


async def until_logged(app: AppStack, name: str, since: int, found, what: str, within_s: float = 180.0) -> list[dict]:
    """Wait until ``found`` holds of the JSON lines ``name`` logged after line ``since``; they are returned."""
    deadline = time.monotonic() + within_s
    while not found(logged := events(log_lines(app, name)[since:])):
        assert time.monotonic() < deadline, f"{what} not logged within {within_s}s: {logged[-20:]}"
        assert all(alive(app).values()), alive(app)
        await asyncio.sleep(0.5)
    return logged


def backoff_cycles(logged: list[dict]) -> int:
    """How many tries the worker's heartbeats made since the broker went, by its own summaries."""
    return max(
        (int(e["tries_in_all"]) for e in logged if e.get("event") == "still waiting for Kafka (heartbeats)"), default=0
    )


async def test_regression_a_worker_whose_broker_is_gone_logs_next_to_nothing(outage_stack, tmp_path):
    """An orphaned worker, its broker gone, logged 61,000 lines (10 MB) in 15 minutes, retrying every 100 ms."""
    cycles, most_lines = 6, 60
    async with private_pipeline(outage_stack, tmp_path, VOXLOG_OUTAGE_SUMMARY_S="2") as (stack, app):
        voice = (await app.voices())[0]
        async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:
            assert (await wait_for_job(client, await accepted(client, voice, "Before.")))["state"] == "completed"
        before = {name: len(log_lines(app, name)) for name in app.specs}
        stack.kill_broker()
        # Not a time: the worker's own summaries count its tries, each after a backoff (or its log outgrows
        # the bound first, as it did at a line per retry).
        await until_logged(
            app,
            "worker-0",
            before["worker-0"],
            lambda e: backoff_cycles(e) >= cycles or len(e) > most_lines,
            f"{cycles} tries",
        )
        during = {name: log_lines(app, name)[before[name] :] for name in app.specs}
        sizes = {name: (len(lines), sum(len(line) + 1 for line in lines)) for name, lines in during.items()}
        assert all(count <= most_lines and size <= 20_000 for count, size in sizes.values()), sizes
        await stack.start_broker()
        async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:
            await until_ready(client)
            after = await wait_for_job(client, await accepted(client, voice, "After."), 180)
        logged = await until_logged(
            app,
            "worker-0",
            before["worker-0"],
            lambda e: any(x.get("event") == "Kafka (heartbeats) available again" for x in e),
            "the worker saying Kafka is back",
        )
    assert after["state"] == "completed"
    worker = [e.get("event") for e in events(during["worker-0"])]
    assert worker.count("waiting for Kafka (heartbeats)") == 1, "the outage said once"
    assert sum(e.get("event") == "Kafka (heartbeats) available again" for e in logged) == 1, "and its end once"


async def test_regression_sigterm_while_the_broker_is_down_exits_within_the_shutdown_timeout(outage_stack, tmp_path):
    """Sent SIGTERM while the broker was down, a worker had not exited 110 s later (it kept producing every 100 ms)."""
    bounded = {"VOXLOG_SHUTDOWN_TIMEOUT_S": "6", "VOXLOG_SHUTDOWN_GRACE_S": "2", "VOXLOG_OUTAGE_SUMMARY_S": "2"}
    async with private_pipeline(outage_stack, tmp_path, **bounded) as (stack, app):
        voice = (await app.voices())[0]
        async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:
            assert (await wait_for_job(client, await accepted(client, voice, "Before.")))["state"] == "completed"
        since = len(log_lines(app, "worker-0"))
        stack.kill_broker()
        # A heartbeat is in flight, never to be acknowledged: what an idempotent producer flushes forever.
        await until_logged(
            app, "worker-0", since, lambda e: any(x.get("event") == "waiting for Kafka (heartbeats)" for x in e), "it"
        )
        pids = {name: app.processes.pid(name) for name in app.specs}
        for pid in pids.values():
            assert pid is not None
            os.kill(pid, signal.SIGTERM)
        # A deadline for the test, not a figure: each process exits on the one SIGTERM (a second would kill it).
        exited = {name: wait_gone(pid, 90) for name, pid in pids.items() if pid is not None}
        worker = [e.get("event", "") for e in events(log_lines(app, "worker-0")[since:])]
    assert exited == dict.fromkeys(pids, True), exited
    assert any(event.startswith("shutdown") and "abandon" in event for event in worker), worker[-10:]


async def test_the_python_client_rides_out_a_killed_broker_and_its_retry_names_the_same_job(private):
    """voxlog.client's retry protocol (issue 39): a submission answered 503 while the broker is dead is sent again
    with the same Idempotency-Key until the broker is back; the job it names is the one the key names."""
    stack, app = private
    voice = (await app.voices())[0]
    recorder = _Recorder()
    patient = RetryPolicy(attempts=10_000, budget_s=300.0, base_s=0.2, max_s=2.0)
    async with AsyncClient(app.api, retry=patient, transport=recorder, timeout_s=PUBLISH_TIMEOUT_MS / 1000 + 20) as c:
        stack.kill_broker()
        submitting = asyncio.create_task(c.submit_job("Through the outage, by the client.", voice))
        await asyncio.wait_for(recorder.refused.wait(), 120)  # the API answered 503: the broker is gone
        assert not submitting.done()
        await stack.start_broker()
        job = await asyncio.wait_for(submitting, 240)
        done = await c.wait(job.job_id, timeout_s=180)
        assert done.state.value == "completed"
        posts = [(status, key) for method, path, status, key in recorder.seen if (method, path) == ("POST", "/v1/jobs")]
        assert {key for _, key in posts} == {posts[0][1]}, "every attempt carried the one key"
        assert posts[0][0] == 503
        assert posts[-1][0] == 202
        again = await c.submit_job("Through the outage, by the client.", voice, idempotency_key=posts[0][1])
        assert again.job_id == job.job_id


class _Recorder(httpx.AsyncBaseTransport):
    """The network, with each answer's method, path, status and Idempotency-Key written down; ``refused`` is set at
    the first 503 to a submission."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.seen: list[tuple[str, str, int, str | None]] = []
        self.refused = asyncio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        self.seen.append(
            (request.method, request.url.path, response.status_code, request.headers.get("idempotency-key"))
        )
        if request.method == "POST" and response.status_code == 503:
            self.refused.set()
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
