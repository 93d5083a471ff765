"""Push instead of poll: a committed projector batch wakes the readers of its jobs, through real LISTEN/NOTIFY."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest_asyncio
from aiokafka.structs import TopicPartition

from foundation.job_changes import JobChanges, changes_channel
from projections.projector import Projector
from tests.integration.test_projector_batches import CONFIG, of
from tests.support.events import one_of_each
from tests.support.records import RecordedDeadLetters


@pytest_asyncio.fixture
async def changes(stack, schema) -> AsyncIterator[JobChanges]:
    feed = JobChanges(stack.database_url, schema, fallback_poll_s=0.05)
    stop = asyncio.Event()
    task = asyncio.create_task(feed.run(stop))
    try:
        await until(lambda: feed.listening, "listening")
        yield feed
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)


async def until(condition, what: str, within_s: float = 15.0) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, f"not {what} within {within_s}s"
        await asyncio.sleep(0.02)


async def test_a_committed_batch_wakes_the_readers_of_its_jobs_and_no_other(pool, schema, changes):
    config = replace(CONFIG, changes_channel=changes_channel(schema))
    projector = Projector(config, pool, consumer=None, partitions=[], dead_letter=RecordedDeadLetters())  # type: ignore[arg-type]
    events, other = one_of_each("Wakes its reader."), one_of_each("Nobody submits this one.")
    with changes.watch(events[0].job_id) as mine, changes.watch(other[0].job_id) as theirs:
        await projector.apply_batch({TopicPartition("jobs", 0): [of(events[0], 0, 0)]})
        await asyncio.wait_for(mine.changed.wait(), 10)
        # One notification names every job of the batch: had it named the other job, that one was set too.
        assert not theirs.changed.is_set()
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT state FROM jobs WHERE job_id = $1", events[0].job_id) == "queued"


async def test_a_batch_without_a_channel_notifies_nobody_and_a_lost_listener_comes_back(pool, pg, schema, changes):
    projector = Projector(CONFIG, pool, consumer=None, partitions=[], dead_letter=RecordedDeadLetters())  # type: ignore[arg-type]
    events, gate_id = one_of_each("Projected quietly."), uuid.uuid4()
    with changes.watch(events[0].job_id) as watch, changes.watch(gate_id) as gate:
        await projector.apply_batch({TopicPartition("jobs", 0): [of(events[0], 0, 0)]})
        # The gate: notifications arrive in commit order, so once this one is in, the batch's would be too.
        await pg.execute("SELECT pg_notify($1, $2)", changes.channel, str(gate_id))
        await asyncio.wait_for(gate.changed.wait(), 10)
        assert not watch.changed.is_set(), "a projector without a channel sent a notification"

        killed = await pg.fetchval(
            # This test's listener only: the channel names the schema, and other sessions listen on theirs.
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query LIKE '%LISTEN%' || $1 || '%'",
            changes.channel,
        )
        assert killed == 1
        await until(lambda: not changes.listening, "noticing the lost connection")
        await until(lambda: changes.listening, "listening again")
        watch.changed.clear()  # listening again wakes every reader once: what changed meanwhile is unknown
        await pg.execute("SELECT pg_notify($1, $2)", changes.channel, str(events[0].job_id))
        await asyncio.wait_for(watch.changed.wait(), 10)
