"""What a worker's heartbeat says waits on it, read on real processes: a queued job's place in GET /v1/jobs/{id},
each worker's queue by tenant and priority on the dashboard (its JSON and the page in a real browser) and in
``voxlog_worker_queue_jobs``.

The heartbeats are published on the control topic by the test, as a worker that holds a claim and has jobs
waiting on it sends them (``NodeHeartbeat`` version 2), every second while the test reads; the job is queued
on the jobs topic as the API records one. The projector and the API are the real processes, with API keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import datetime, timedelta
from typing import Any

import httpx

from contracts import NodeHeartbeat, NodeHeartbeatPayload, node_event, utc_now
from contracts.scheduling import HeldClaim, QueueCount, QueuedJob
from foundation.kafka import KafkaEventPublisher
from tests.support.apps import bearer, create_key, until
from tests.support.browser import figures
from tests.support.events import PRODUCER, one_of_each

WORKER = "w-sched"


def beat(mine: uuid.UUID, others: uuid.UUID) -> NodeHeartbeat:
    """The worker holds one claim (a third done) and lists another tenant's job, then ours, as waiting."""
    now = utc_now()
    held = HeldClaim(
        job_id=uuid.uuid4(), fingerprint="ab" * 32, attempt=1, segments_done=1, segments_total=3, text_chars=600,
        progress_at=now, running=True,
    )  # fmt: skip
    payload = NodeHeartbeatPayload(
        worker_id=WORKER, engine="bench-sleep", model_version="bench", device="cpu",
        started_at=now - timedelta(hours=1), sent_at=now, chars_per_s=100.0, claims=(held,),
        queue=(
            QueuedJob(job_id=others, tenant="globex", priority="interactive", text_chars=300),
            QueuedJob(job_id=mine, tenant="acme", priority="batch", text_chars=100),
        ),
        queue_counts=(
            QueueCount(tenant="globex", priority="interactive", jobs=1, text_chars=300),
            QueueCount(tenant="acme", priority="batch", jobs=1, text_chars=100),
        ),
    )  # fmt: skip
    return node_event(NodeHeartbeat, PRODUCER, payload, at=now)


async def test_a_queued_jobs_place_and_each_workers_queue_are_read_from_the_workers_heartbeat(apps, topics):
    app = apps(VOXLOG_AUTH="on")
    app.start("projector", ["projector"])
    app.start("api", ["api"])
    await app.wait_ready()
    operator_key = await create_key(app, "ops", "read,operator")
    operator = bearer(operator_key)
    acme, globex = bearer(await create_key(app, "acme", "read")), bearer(await create_key(app, "globex", "read"))
    queued = one_of_each("Waits on the scheduler.")[0]
    queued = queued.model_copy(update={"payload": queued.payload.model_copy(update={"tenant": "acme"})})
    others = uuid.uuid4()

    async with KafkaEventPublisher(topics.kafka, topics.jobs) as publisher:
        await publisher.publish(queued)

        async def heartbeats() -> None:  # every second, as a worker does
            while True:
                await publisher.publish(beat(queued.job_id, others), topic=topics.settings.control_topic)
                await asyncio.sleep(1.0)

        beating = asyncio.create_task(heartbeats())
        try:
            async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:

                async def placed() -> dict[str, Any] | None:
                    answer = await client.get(f"/v1/jobs/{queued.job_id}", headers=acme)
                    return answer.json() if answer.status_code == 200 and answer.json()["queue"] else None

                job = await until("the job's place shown", placed)
                mine = await client.get(f"/v1/jobs/{queued.job_id}", headers=acme)
                not_theirs = await client.get(f"/v1/jobs/{queued.job_id}", headers=globex)
                dashboard = (await client.get("/v1/dashboard", headers=operator)).json()

                async def exported() -> str | None:
                    text = (await client.get("/metrics", headers=operator)).text
                    return (
                        text
                        if f'voxlog_worker_queue_jobs{{priority="interactive",tenant="globex",worker="{WORKER}"}}'
                        in text
                        else None
                    )

                metrics = await until("the queue exported", exported, within_s=30)
            shown = await figures(f"{app.api}/dashboard#key={operator_key}")
        finally:
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating

    place = job["queue"]
    assert (job["state"], place["worker"], place["position"]) == ("queued", WORKER, 3), (
        "behind the claim the worker holds and the job it lists before it"
    )
    answered_at = datetime.fromisoformat(place["heartbeat_at"]) + timedelta(seconds=place["heartbeat_age_s"])
    ahead_s = (400 + 300) / 100.0  # two thirds of the claim's 600 characters, and the job before it, at 100/s
    assert abs(datetime.fromisoformat(place["estimated_start"]) - answered_at - timedelta(seconds=ahead_s)) < timedelta(
        milliseconds=2
    )
    assert str(others) not in mine.text, "another tenant's job is counted, never named"
    assert "globex" not in mine.text
    assert not_theirs.status_code == 404

    [node] = [n for n in dashboard["activity"]["nodes"] if n["worker_id"] == WORKER]
    assert node["claims"] == 1
    assert {(q["tenant"], q["priority"], q["jobs"]) for q in node["queue"]} == {
        ("globex", "interactive", 1),
        ("acme", "batch", 1),
    }
    assert f'voxlog_worker_queue_jobs{{priority="batch",tenant="acme",worker="{WORKER}"}} 1.0' in metrics
    rows = {(r["data-queue-worker"], r["data-tenant"], r["data-priority"], r["data-jobs"]) for r in shown.queues}
    assert rows == {(WORKER, "globex", "interactive", "1"), (WORKER, "acme", "batch", "1")}, "the page shows them"
