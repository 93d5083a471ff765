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

from contracts import AnyEvent, decode_event
from foundation.db import DATABASE_OUTAGES
from foundation.errors import BrokerUnavailable
from projections.projector import Projector, ProjectorConfig
from tests.support.events import heartbeat, mode_set, node_announced, one_of_each
from tests.support.job_logs import realistic_logs
from tests.support.records import RecordedDeadLetters, raw_record, record_of

JOBS, CONTROL = "jobs", "control"
CONFIG = ProjectorConfig(
    name="test", jobs_topic=JOBS, control_topic=CONTROL, cache_ttl=timedelta(minutes=10), max_batch=500
)


def of(event: AnyEvent, partition: int, offset: int, topic: str = JOBS) -> ConsumerRecord:
    return record_of(event, topic, partition, offset)


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


async def test_a_refused_node_record_goes_to_the_dlq_and_the_rest_of_its_batch_lands(pool, pg):
    """Node events take the same fallback as job events: each record a batch of its own."""
    job = one_of_each("A good job.")
    refused = mode_set(True, reason="NUL \x00 that text cannot store")
    dlq = RecordedDeadLetters()
    projector = Projector(CONFIG, pool, consumer=None, partitions=[], dead_letter=dlq)  # type: ignore[arg-type]
    batch = {
        TopicPartition(JOBS, 0): [of(job[0], 0, 0)],
        TopicPartition(CONTROL, 0): [of(heartbeat("w1"), 0, 4, CONTROL), of(refused, 0, 5, CONTROL)],
        TopicPartition(CONTROL, 1): [of(node_announced("w1"), 1, 2, CONTROL)],
    }
    await projector.apply_batch(batch)

    assert [(r.topic, r.partition, r.offset) for r, _ in dlq.records] == [(CONTROL, 0, 5)]
    assert await pg.fetchval("SELECT count(*) FROM service_modes") == 0
    assert await pg.fetchval("SELECT count(*) FROM node_heartbeats WHERE worker_id = 'w1'") == 1
    assert await pg.fetchval("SELECT count(*) FROM nodes WHERE worker_id = 'w1'") == 1
    assert await pg.fetchval("SELECT state FROM jobs WHERE job_id = $1", job[0].job_id) == "queued"
    offsets = await pg.fetch("SELECT topic, partition, next_offset FROM projection_offsets WHERE consumer = 'test'")
    assert sorted(map(tuple, offsets)) == sorted([(JOBS, 0, 1), (CONTROL, 0, 6), (CONTROL, 1, 3)])


class _UnreachableOnce(RecordedDeadLetters):
    """A dead-letter topic that cannot be reached the first time it is sent a record."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    async def __call__(self, record: ConsumerRecord, reason: str) -> object:
        if not self.failed:
            self.failed = True
            raise BrokerUnavailable("the DLQ is down")
        return await super().__call__(record, reason)


async def test_a_batch_applied_record_by_record_is_stored_as_far_as_its_records_landed(pool, pg):
    """Each record of the fallback lands with the offset past it: when dead-lettering the refused record
    fails (an outage the projector waits out), the stored offsets say where the landed records end, and the
    batch applied again from there lands the rest, once."""
    good = one_of_each("A good job.")
    refused = one_of_each("Text with a NUL \x00 that jsonb cannot store.")[0]
    records = [of(good[0], 0, 0), of(refused, 0, 1), of(good[1], 0, 2)]
    dlq = _UnreachableOnce()
    projector = Projector(CONFIG, pool, consumer=None, partitions=[], dead_letter=dlq)  # type: ignore[arg-type]
    with pytest.raises(BrokerUnavailable):
        await projector.apply_batch({TopicPartition(JOBS, 0): records})
    stored = await pg.fetchval("SELECT next_offset FROM projection_offsets WHERE consumer = 'test'")
    assert stored == 1, "past the record that landed, short of the one not yet dead-lettered"
    assert await pg.fetchval("SELECT count(*) FROM job_events") == 1

    await projector.apply_batch({TopicPartition(JOBS, 0): records[stored:]})  # what run() reads next
    assert [r.offset for r, _ in dlq.records] == [1]
    assert await pg.fetchval("SELECT count(*) FROM job_events") == 2
    assert await pg.fetchval("SELECT state FROM jobs WHERE job_id = $1", good[0].job_id) == "claimed"
    assert await pg.fetchval("SELECT next_offset FROM projection_offsets WHERE consumer = 'test'") == 3


class _CountingConnection:
    def __init__(self, conn: asyncpg.Connection, calls: list[str]) -> None:
        self._conn, self._calls = conn, calls

    def __getattr__(self, operation: str) -> object:
        self._calls.append(operation)
        return getattr(self._conn, operation)


class _CountingPool:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self.calls: list[str] = []

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[object]:
        async with self._pool.acquire() as conn:
            yield _CountingConnection(conn, self.calls)


async def test_regression_a_batch_with_a_heartbeat_left_the_two_statement_path(pool, pg):
    """Every batch holding a node event (a heartbeat every few seconds per worker) was applied in a
    transaction of its own, with statements per node event and the offsets and the NOTIFY spelled again.
    Now it is one read and one write, like a batch of job events."""
    job = one_of_each("A job beside heartbeats.")
    counted = _CountingPool(pool)
    config = ProjectorConfig(**{**CONFIG.__dict__, "changes_channel": "voxlog_jobs:test"})
    projector = Projector(config, counted, consumer=None, partitions=[], dead_letter=RecordedDeadLetters())  # type: ignore[arg-type]
    batch = {
        TopicPartition(JOBS, 0): [of(e, 0, i) for i, e in enumerate(job[:2])],
        TopicPartition(CONTROL, 0): [of(heartbeat("w1", n), 0, n, CONTROL) for n in range(3)]
        + [of(node_announced("w1"), 0, 3, CONTROL)],
    }
    await projector.apply_batch(batch)

    assert counted.calls == ["fetchrow", "fetchval"]
    assert await pg.fetchval("SELECT state FROM jobs WHERE job_id = $1", job[0].job_id) == "claimed"
    latest = heartbeat("w1", 2).payload.sent_at
    assert await pg.fetchval("SELECT sent_at FROM node_heartbeats WHERE worker_id = 'w1'") == latest
    offsets = await pg.fetch("SELECT topic, next_offset FROM projection_offsets WHERE consumer = 'test'")
    assert sorted(map(tuple, offsets)) == sorted([(JOBS, 2), (CONTROL, 4)])


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
