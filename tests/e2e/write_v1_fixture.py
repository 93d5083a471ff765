"""Writes tests/fixtures/v1_log and its expected tables from a real run (not collected: run it by name).

    pytest -p no:cacheprovider tests/e2e/write_v1_fixture.py

It ran once, while every event was at schema_version 1: the pipeline (bench-sleep engine) takes a plain
job, a request submitted three times at once (one synthesis, two coalesced), a job whose every attempt
fails (released for a retry, then failed), and a job whose worker is killed mid-synthesis, after which
the dead attempt's late segment and completion arrive (fenced) and its claim is delivered twice. The log
is exported with ``voxlog archive``'s code, then folded and written by today's replay to give the tables.
Run again only to make a new fixture for a new version, never to make the old one pass.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import uuid
from datetime import timedelta

import asyncpg
import httpx

from contracts import decode_event, utc_now
from foundation.kafka import KafkaEventPublisher
from infra.processes import wait_gone
from projections.archive_export import archive_before
from projections.migrations import drop_schema, migrate_database
from projections.rebuild import write
from tests.support.apps import start_pipeline, wait_for_job
from tests.support.events import late_work_of_a_dead_attempt
from tests.support.fixture_log import EXPECTED, FIXTURE, dump_tables, fold_archive
from tests.support.kafka import read_to_end

ENV = {
    "VOXLOG_ENGINE": "bench-sleep",
    "VOXLOG_DEFAULT_ENGINE": "bench-sleep",
    "VOXLOG_BENCH_SYNTH_MS": "300",
    "VOXLOG_BENCH_FAULT": "fail:unspeakable",
    "VOXLOG_RETRY_BASE_DELAY_S": "0.1",
    "VOXLOG_MAX_ATTEMPTS": "2",
}


async def test_write_the_v1_fixture_log(apps, topics, stack):
    app, voices = await start_pipeline(apps, **ENV)
    voice = voices[0]
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:
        plain = await client.post(
            "/v1/jobs", json={"text": "A plain job. Two sentences.", "voice": voice}, headers={"Idempotency-Key": "k-1"}
        )
        shared = await asyncio.gather(
            *(client.post("/v1/jobs", json={"text": "Said three times at once.", "voice": voice}) for _ in range(3))
        )
        doomed = await client.post("/v1/jobs", json={"text": "An unspeakable request.", "voice": voice})
        for response in (plain, *shared, doomed):
            await wait_for_job(client, response.json()["job_id"], 120)

        killed = (await client.post("/v1/jobs", json={"text": "One. Two. Three. Four. Five.", "voice": voice})).json()
        while True:
            job = (await client.get(f"/v1/jobs/{killed['job_id']}")).json()
            if job.get("state") == "claimed" and job.get("segments"):
                break
            await asyncio.sleep(0.05)
        pid = app.processes.pid("worker-0")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        assert wait_gone(pid, 30)
        app.start("worker-1", ["worker", "--device", "cpu"], {"VOXLOG_WORKER_ID": "w1"})
        await wait_for_job(client, killed["job_id"], 180)

    events = [decode_event(r.value) for r in await read_to_end(topics.kafka, topics.jobs)]
    late = late_work_of_a_dead_attempt(events, uuid.UUID(killed["job_id"]), index=4)
    async with KafkaEventPublisher(topics.kafka, topics.jobs) as publisher:
        for event in late:
            await publisher.publish(event)

    shutil.rmtree(FIXTURE, ignore_errors=True)
    await archive_before(topics.kafka, topics.jobs, FIXTURE, utc_now() + timedelta(seconds=1))
    schema = "fixture_v1"
    await drop_schema(stack.database_url, schema)
    await migrate_database(stack.database_url, schema)
    conn = await asyncpg.connect(stack.database_url)
    try:
        await write(conn, schema, fold_archive(FIXTURE), "replay")
        EXPECTED.write_text(json.dumps(await dump_tables(conn, schema), indent=1, sort_keys=True) + "\n")
    finally:
        await conn.close()
        await drop_schema(stack.database_url, schema)
