"""Projector.apply_batch against real Postgres: a batch lands whole, minus only what the tables refuse."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from datetime import timedelta

import asyncpg
import pytest
from aiokafka import ConsumerRecord
from aiokafka.structs import TopicPartition
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts import JobEvent, decode_event
from foundation.db import DATABASE_OUTAGES
from projections.projector import Projector, ProjectorConfig
from tests.support.events import one_of_each
from tests.support.job_logs import realistic_logs
from tests.support.records import RecordedDeadLetters, raw_record, record_of

JOBS = "jobs"
CONFIG = ProjectorConfig(
    name="test", jobs_topic=JOBS, nodes_topic="nodes", cache_ttl=timedelta(minutes=10), max_batch=500
)


def of(event: JobEvent, partition: int, offset: int) -> ConsumerRecord:
    return record_of(event, JOBS, partition, offset)


async def test_a_refused_record_goes_to_the_dlq_and_the_rest_of_its_batch_lands(pool, pg):
    good = one_of_each("A good job.")
    refused = one_of_each("Text with a NUL \x00 that jsonb cannot store.")[0]  # decodes, but Postgres refuses it
    dlq = RecordedDeadLetters()
    projector = Projector(CONFIG, pool, consumer=None, partitions=[], dead_letter=dlq)  # type: ignore[arg-type]
    batch = {
        TopicPartition(JOBS, 0): [of(good[0], 0, 10), of(refused, 0, 11), of(good[1], 0, 12)],
        TopicPartition(JOBS, 1): [raw_record(JOBS, 1, 7, b"{not json", [("type", b"JobQueued")])],
    }
    await projector.apply_batch(batch)

    job = await pg.fetchrow("SELECT state, attempt FROM jobs WHERE job_id = $1", good[0].job_id)
    assert (job["state"], job["attempt"]) == ("claimed", good[1].attempt)
    assert await pg.fetchval("SELECT count(*) FROM jobs WHERE job_id = $1", refused.job_id) == 0
    assert await pg.fetchval("SELECT count(*) FROM job_events") == 2
    reasons = {(r.partition, r.offset): reason for r, reason in dlq.records}
    assert len(dlq.records) == 2, "each bad record is dead-lettered once"
    assert reasons[(0, 11)].startswith("cannot apply")
    assert "JSON" in reasons[(1, 7)]
    offsets = dict(await pg.fetch("SELECT partition, next_offset FROM projection_offsets WHERE consumer = 'test'"))
    assert offsets == {0: 13, 1: 8}


async def test_a_clean_batch_lands_whole_and_twice_changes_nothing(pool, pg):
    events = one_of_each("Every event of one job.")
    dlq = RecordedDeadLetters()
    projector = Projector(CONFIG, pool, consumer=None, partitions=[], dead_letter=dlq)  # type: ignore[arg-type]
    # The claim twice in one batch, as a producer retry can leave it in the log: applied once.
    records = [of(e, 3, i) for i, e in enumerate([events[0], events[1], events[1], *events[2:]])]
    batch = {TopicPartition(JOBS, 3): records}
    await projector.apply_batch(batch)
    first = await pg.fetch("SELECT * FROM jobs ORDER BY job_id")
    await projector.apply_batch(batch)  # a crash before the offsets committed replays the batch

    assert dlq.records == []
    assert await pg.fetchval("SELECT count(*) FROM job_events") == len(events)
    assert await pg.fetch("SELECT * FROM jobs ORDER BY job_id") == first
    assert await pg.fetchval("SELECT kafka_offset FROM job_events WHERE event_id = $1", events[1].event_id) == 1
    assert await pg.fetchval("SELECT next_offset FROM projection_offsets WHERE partition = 3") == len(records)


class _BrokenConnection:
    """What a PostgreSQL restart left in the pool once: a connection whose protocol is stuck mid-operation."""

    terminated = False

    def __getattr__(self, operation: str) -> Callable[..., None]:  # BEGIN, a query: whatever is tried first
        def stuck(*args: object) -> None:
            raise asyncpg.InternalClientError("cannot switch to state 15; another operation (2) is in progress")

        return stuck

    def terminate(self) -> None:
        self.terminated = True


class _PoolWithOneBrokenConnection:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self.broken = _BrokenConnection()
        self._handed = False

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[object]:
        if not self._handed:
            self._handed = True
            yield self.broken
            return
        async with self._pool.acquire() as conn:
            yield conn


async def test_regression_a_connection_broken_by_a_postgres_restart_stopped_the_projector(pool, pg):
    """The fault campaign's PostgreSQL restart left a pooled connection whose BEGIN raised asyncpg's
    InternalClientError, which the projector did not count as an outage: it exited and nothing more was
    projected. Now the connection is closed, the error is an outage, and the batch lands on a fresh one."""
    events = one_of_each("Applied after the restart.")
    flaky = _PoolWithOneBrokenConnection(pool)
    projector = Projector(CONFIG, flaky, consumer=None, partitions=[], dead_letter=RecordedDeadLetters())  # type: ignore[arg-type]
    batch = {TopicPartition(JOBS, 0): [of(e, 0, i) for i, e in enumerate(events[:2])]}
    with pytest.raises(DATABASE_OUTAGES):  # what run() waits out and then applies again from the stored offsets
        await projector.apply_batch(batch)
    assert flaky.broken.terminated, "not handed out again"
    await projector.apply_batch(batch)
    assert await pg.fetchval("SELECT state FROM jobs WHERE job_id = $1", events[0].job_id) == "claimed"


async def _tables(pg: asyncpg.Connection) -> dict[str, list[dict[str, object]]]:
    """Every projected row; ``recorded_at`` left out (the time of the insert, not something the log says)."""
    return {
        table: [{k: v for k, v in r.items() if k != "recorded_at"} for r in await pg.fetch(f"SELECT * FROM {table}")]
        for table in ("jobs", "segments", "job_events", "result_cache")
    }


def _sorted(tables: dict[str, list[dict[str, object]]]) -> dict[str, list[str]]:
    return {table: sorted(map(repr, rows)) for table, rows in tables.items()}


@given(events=realistic_logs(), cuts=st.lists(st.integers(0, 200), max_size=4))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
async def test_set_based_batches_write_what_the_record_by_record_fallback_writes(pool, pg, monkeypatch, events, cuts):
    """Batches of random sizes end with the same rows as the fallback for a batch with a refused record
    (each record a batch of its own), and a clean batch never takes that fallback."""
    records = [of(e, 0, i) for i, e in enumerate(events)]
    await pg.execute("TRUNCATE jobs, segments, job_events, result_cache, projection_offsets")
    per_event = Projector(CONFIG, pool, consumer=None, partitions=[], dead_letter=RecordedDeadLetters())  # type: ignore[arg-type]
    decoded = [(record, decode_event(record.value)) for record in records]
    await per_event._one_by_one(decoded, {(JOBS, 0): len(records)})
    reference = _sorted(await _tables(pg))

    await pg.execute("TRUNCATE jobs, segments, job_events, result_cache, projection_offsets")
    with monkeypatch.context() as patched:
        patched.setattr(Projector, "_one_by_one", _refuse)
        projector = Projector(CONFIG, pool, consumer=None, partitions=[], dead_letter=RecordedDeadLetters())  # type: ignore[arg-type]
        bounds = sorted({0, len(records), *(c % (len(records) + 1) for c in cuts)})
        for start, end in itertools.pairwise(bounds):
            await projector.apply_batch({TopicPartition(JOBS, 0): records[start:end]})
    assert _sorted(await _tables(pg)) == reference


async def _refuse(*_: object) -> None:
    raise AssertionError("a clean batch was applied record by record")
