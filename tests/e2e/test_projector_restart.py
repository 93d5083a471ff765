"""A projector killed mid-stream resumes from its offsets and ends equal to a fresh projection."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid

import asyncpg
from aiokafka.admin import RecordsToDelete
from aiokafka.structs import TopicPartition

from foundation.kafka import KafkaEventPublisher
from infra.processes import wait_gone
from projections.migrations import drop_schema, migrate_database
from tests.support.events import node_announced, one_of_each

TABLES = {
    "jobs": "job_id",
    "segments": "job_id, segment_index",
    "job_events": "event_id",
    "result_cache": "fingerprint",
    "nodes": "worker_id",
}
VOLATILE = {"recorded_at"}  # when the projector wrote the row, not what the log says


async def snapshot(url: str, schema: str) -> dict[str, list[tuple]]:
    conn = await asyncpg.connect(url, server_settings={"search_path": schema})
    try:
        out = {}
        for table, order in TABLES.items():
            rows = await conn.fetch(f"SELECT * FROM {table} ORDER BY {order}")
            out[table] = [tuple(v for k, v in row.items() if k not in VOLATILE) for row in rows]
        return out
    finally:
        await conn.close()


async def applied(url: str, schema: str, name: str) -> int:
    conn = await asyncpg.connect(url, server_settings={"search_path": schema})
    try:
        return int(
            await conn.fetchval(
                "SELECT coalesce(sum(next_offset), 0) FROM projection_offsets WHERE consumer = $1", name
            )
        )
    finally:
        await conn.close()


async def wait_applied(url: str, schema: str, name: str, target: int, within_s: float = 120.0) -> None:
    deadline = time.monotonic() + within_s
    while (done := await applied(url, schema, name)) < target:
        assert time.monotonic() < deadline, f"projected {done} of {target} records"
        await asyncio.sleep(0.2)


async def wait_blocked(conn: asyncpg.Connection, schema: str, within_s: float = 60.0) -> None:
    """Until another session waits for a lock on this schema's ``jobs`` (the projector, stopped inside its
    batch). Read from pg_locks, not from the waiting session's query text: a statement blocked while it is
    prepared (its parse takes the lock) still shows the session's previous query, and as idle."""
    deadline = time.monotonic() + within_s
    while not await conn.fetchval(
        "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'relation' AND relation ="
        " (SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE c.relname = 'jobs' AND n.nspname = $1)",
        schema,
    ):
        assert time.monotonic() < deadline, "the projector never reached the locked table"
        await asyncio.sleep(0.05)


async def test_projector_killed_with_sigkill_ends_equal_to_a_fresh_projection(stack, topics, schema, apps):
    events = [event for i in range(250) for event in one_of_each(f"Replayed sentence {i}.", uuid.uuid4())]
    node = node_announced()
    half = len(events) // 2
    app = apps(VOXLOG_PROJECTOR_BATCH="40")
    name = f"projector-{schema}"
    async with KafkaEventPublisher(topics.kafka, topics.jobs) as publisher:
        await asyncio.gather(*(publisher.publish(e) for e in events[:half]))
        await publisher.publish(node, topic=topics.settings.control_topic)
        app.start("projector", ["projector"])
        await wait_applied(stack.database_url, schema, name, half + 1)
        # The gate: a lock that stops the next batch's write, so that the kill lands mid-stream.
        gate = await asyncpg.connect(stack.database_url, server_settings={"search_path": schema})
        try:
            async with gate.transaction():
                await gate.execute("LOCK TABLE jobs IN SHARE MODE")
                await asyncio.gather(*(publisher.publish(e) for e in events[half:]))
                await wait_blocked(gate, schema)
                pid = app.processes.pid("projector")
                assert pid is not None
                os.kill(pid, signal.SIGKILL)
                assert wait_gone(pid, 30)
        finally:
            await gate.close()
    total = len(events) + 1
    partial = await applied(stack.database_url, schema, name)
    # Killed while its batch's write waited for the lock. That write is one statement, which PostgreSQL
    # received before the kill and finishes once the lock is released: the batch in flight lands whole
    # (with its offsets) or not at all, never a part of it; the rest of the stream is left to the restart.
    assert half + 1 <= partial <= half + 1 + 40, "at most the batch in flight landed"
    assert partial < total, "killed mid-stream"

    app.start("projector", ["projector"])
    await wait_applied(stack.database_url, schema, name, total)
    app.stop("projector")

    fresh_schema = f"t_{uuid.uuid4().hex[:16]}"
    await migrate_database(stack.database_url, fresh_schema)
    try:
        fresh = apps(VOXLOG_DATABASE_SCHEMA=fresh_schema, VOXLOG_PROJECTOR_NAME="fresh")
        fresh.start("projector", ["projector"])
        await wait_applied(stack.database_url, fresh_schema, "fresh", total)
        fresh.stop("projector")
        resumed, replayed = await snapshot(stack.database_url, schema), await snapshot(stack.database_url, fresh_schema)
        assert len(resumed["job_events"]) == len(events)
        assert len(resumed["nodes"]) == 1
        assert resumed == replayed
    finally:
        await drop_schema(stack.database_url, fresh_schema)


async def test_regression_a_projector_whose_position_fell_below_the_log_start_stops_with_a_clear_error(
    stack, topics, schema, apps
):
    """A projector whose stored offset had fallen below the partition's start (retention) skipped silently
    to the end: the records in between were never projected, and nothing said so."""
    # Two jobs of one text: one fingerprint, one partition.
    first, later = one_of_each("One partition.", uuid.uuid4()), one_of_each("One partition.", uuid.uuid4())
    async with KafkaEventPublisher(topics.kafka, topics.jobs) as publisher:
        positions = [await publisher.publish(e) for e in first]
    app = apps()
    name = f"projector-{schema}"
    app.start("projector", ["projector"])
    await wait_applied(stack.database_url, schema, name, len(first))
    app.stop("projector")

    async with KafkaEventPublisher(topics.kafka, topics.jobs) as publisher:
        positions += [await publisher.publish(e) for e in later]
    assert {p.partition for p in positions} == {positions[0].partition}
    tp = TopicPartition(topics.jobs, positions[0].partition)
    admin = topics.kafka.admin()
    await admin.start()
    try:  # what retention does: the partition now starts after records the projector never read
        await admin.delete_records({tp: RecordsToDelete(before_offset=positions[-1].offset)})
    finally:
        await admin.close()

    app.start("projector", ["projector"])
    pid = app.processes.pid("projector")
    assert pid is not None
    assert wait_gone(pid, 120), "the projector stops instead of going on"
    log = app.log("projector")
    assert f"stopped at offset {len(first)} of {topics.jobs}[{tp.partition}]" in log
    assert "records it never applied are gone" in log
    assert await applied(stack.database_url, schema, name) == len(first), "nothing skipped, nothing recorded"
