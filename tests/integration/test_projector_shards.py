"""Projector shards on real Kafka and PostgreSQL: projectors split the partitions in a consumer group, and one
that lost a partition in a rebalance can never write a batch for it afterwards (projections.shards)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

import asyncpg
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from contracts import JobEvent
from foundation.kafka import ReconnectingPublisher
from infra.stack import DevStack
from projections.errors import Fenced
from projections.projector import Projector, ProjectorConfig
from projections.shards import ShardListener, Shards, group_options, take_over
from tests.integration.conftest import Topics
from tests.support.events import one_of_each
from tests.support.records import RecordedDeadLetters, record_of

NAME = "sharded"
# A member hears of a rebalance at its next heartbeat: short ones keep the test's rebalances short.
TIMING = {"heartbeat_interval_ms": 200, "session_timeout_ms": 10_000}


async def until(condition: Callable[[], bool | Awaitable[bool]], what: str, within_s: float = 60.0) -> None:
    deadline = time.monotonic() + within_s
    while not await _value(condition()):
        assert time.monotonic() < deadline, f"not {what} within {within_s}s"
        await asyncio.sleep(0.05)


async def _value(result: bool | Awaitable[bool]) -> bool:
    return await result if inspect.isawaitable(result) else result


class Hold:
    """A gate that stalls the first batch its projector reads, between reading the batch's rows and writing
    it, until the test lets it go."""

    def __init__(self) -> None:
        self.entered, self.released, self.passed = asyncio.Event(), asyncio.Event(), False
        self.partitions: set[TopicPartition] = set()

    async def __call__(self, partitions: list[TopicPartition]) -> None:
        if self.passed:
            return
        self.passed = True
        self.partitions = set(partitions)
        self.entered.set()
        await self.released.wait()


@dataclass
class Replica:
    projector: Projector
    consumer: AIOKafkaConsumer
    pool: asyncpg.Pool
    task: asyncio.Task[None]


@contextlib.asynccontextmanager
async def replicas(stack: DevStack, topics: Topics, schema: str) -> AsyncIterator[Callable[..., object]]:
    """Starts projector replicas of one group (each with its own consumer and pool), stopped at the end."""
    group, stop, started = f"test.{uuid.uuid4().hex[:8]}.projector", asyncio.Event(), []
    config = ProjectorConfig(
        name=NAME,
        jobs_topic=topics.jobs,
        control_topic=topics.settings.control_topic,
        cache_ttl=timedelta(minutes=10),
        max_batch=500,
    )

    async def start(gate: Hold | None = None) -> Replica:
        consumer = topics.kafka.consumer(**{**group_options(group), **TIMING})
        await consumer.start()
        pool = await asyncpg.create_pool(
            stack.database_url, min_size=1, max_size=2, server_settings={"search_path": schema}
        )
        shards = Shards(consumer, grouped=True)
        consumer.subscribe([config.jobs_topic, config.control_topic], listener=ShardListener(shards))
        projector = Projector(config, pool, consumer, [], RecordedDeadLetters(), shards, gate)
        replica = Replica(projector, consumer, pool, asyncio.create_task(projector.run(stop)))
        started.append(replica)
        return replica

    try:
        yield start
    finally:
        stop.set()
        for replica in started:
            if gate := replica.projector._gate:
                assert isinstance(gate, Hold)
                gate.released.set()
            await asyncio.wait_for(replica.task, 30)
            await replica.consumer.stop()
            await replica.pool.close()


async def _rows(
    pg: asyncpg.Connection, jobs: list[uuid.UUID], tps: set[TopicPartition]
) -> tuple[list[asyncpg.Record], list[asyncpg.Record]]:
    """The rows of ``jobs``, and the offsets rows of ``tps``."""
    rows = await pg.fetch(
        "SELECT job_id, state, attempt, last_event_id, updated_at FROM jobs WHERE job_id = ANY($1::uuid[])"
        " ORDER BY job_id",
        jobs,
    )
    offsets = await pg.fetch(
        "SELECT topic, partition, next_offset, generation FROM projection_offsets WHERE consumer = $1"
        " AND (topic, partition) IN (SELECT * FROM unnest($2::text[], $3::integer[])) ORDER BY topic, partition",
        NAME,
        [tp.topic for tp in tps],
        [tp.partition for tp in tps],
    )
    return rows, offsets


async def _states(pg: asyncpg.Connection, jobs: list[uuid.UUID]) -> list[str]:
    return [r["state"] for r in await pg.fetch("SELECT state FROM jobs WHERE job_id = ANY($1::uuid[])", jobs)]


async def test_a_projector_stalled_across_a_rebalance_is_fenced_off_the_partitions_it_lost(stack, topics, schema, pg):
    """Replica A reads a batch of every partition and is held before writing it; replica B joins, takes over part
    of A's partitions and projects past A's batch; then A is let go: its batch is refused whole
    (rows and offsets as B left them), counted, and A no longer reads the partitions it lost."""
    publisher = ReconnectingPublisher(topics.kafka, topics.jobs, client_id="test", deadline_ms=10_000)
    try:
        partitions = await publisher.partition_count()
        jobs = [one_of_each(f"Job number {p}.") for p in range(partitions)]
        await publisher.publish_all([job[0] for job in jobs], list(range(partitions)))  # queued, one per partition
        async with replicas(stack, topics, schema) as start:
            hold = Hold()
            a = await start(hold)
            await asyncio.wait_for(hold.entered.wait(), 60)  # A holds a batch, read but not written
            b = await start()
            # B takes over its share (and A's batch's partitions among them) and projects their records.
            moved: set[TopicPartition] = set()

            def b_took_part_of_the_batch() -> bool:
                moved.update(tp for tp in b.projector.shards.owned if tp in hold.partitions and tp.topic == topics.jobs)
                return bool(moved) and not b.projector.shards.pending

            await until(b_took_part_of_the_batch, "B owning part of A's held batch")
            await publisher.publish_all([jobs[tp.partition][1] for tp in moved], [tp.partition for tp in moved])
            moved_jobs = [jobs[tp.partition][1].job_id for tp in moved]

            async def b_projected_the_claims() -> bool:
                return await _states(pg, moved_jobs) == ["claimed"] * len(moved)

            await until(b_projected_the_claims, "B projecting the moved jobs' claims")
            before = await _rows(pg, moved_jobs, moved)
            assert [r["next_offset"] for r in before[1]] == [2] * len(moved), "B stands past A's held batch"

            applied_by_a = a.projector.applied
            hold.released.set()
            await until(lambda: a.projector.fenced > 0 or a.projector.applied > applied_by_a, "A's held batch ending")

            assert await _rows(pg, moved_jobs, moved) == before, "A's stale batch changed neither rows nor offsets"
            assert a.projector.fenced == 1, "A counted its refused batch"
            assert not moved & set(a.projector.shards.owned), "A dropped the partitions B took"
            # Every partition has one owner, and the two together project every job.
            await until(lambda: not a.projector.shards.pending, "A taking over what it kept")
            assert not set(a.projector.shards.owned) & set(b.projector.shards.owned)
            every = [job[0].job_id for job in jobs]

            async def every_job_projected() -> bool:
                return len(await _states(pg, every)) == partitions

            await until(every_job_projected, "every job projected")
            assert await _rows(pg, moved_jobs, moved) == before
    finally:
        await publisher.stop()


def _jobs_owned(*projectors: Replica, topic: str) -> list[set[TopicPartition]]:
    return [{tp for tp in r.projector.shards.owned if tp.topic == topic} for r in projectors]


async def _split_settled(a: Replica, b: Replica, topic: str, partitions: int) -> bool:
    """Both replicas own their shares of ``topic``, every partition once, with nothing pending."""
    if a.projector.shards.pending or b.projector.shards.pending:
        return False
    mine, theirs = _jobs_owned(a, b, topic=topic)
    return bool(mine) and bool(theirs) and not mine & theirs and len(mine | theirs) == partitions


async def test_regression_a_partition_a_stale_takeover_fenced_off_is_taken_back_not_left_to_no_one(
    stack, topics, schema, pg
):
    """Bench (g) with two replicas took 300 s for a log one applies in 5: a takeover a replica began before a
    rebalance and ended after it bumped the generation of partitions the rebalance gave the other replica,
    which dropped them as taken by a newer projector, while the group still gave them to it: no one read
    them until the dropping replica, polling nothing, was put out of the group at max_poll_interval_ms (and
    never came back). Here the stale takeover is made by hand: the replica the group gives the partition to
    takes it back and projects what comes next in it."""
    publisher = ReconnectingPublisher(topics.kafka, topics.jobs, client_id="test", deadline_ms=10_000)
    try:
        partitions = await publisher.partition_count()
        jobs = [one_of_each(f"Stale takeover {p}.") for p in range(partitions)]
        await publisher.publish_all([job[0] for job in jobs], list(range(partitions)))
        async with replicas(stack, topics, schema) as start:
            a, b = await start(), await start()
            await until(lambda: _split_settled(a, b, topics.jobs, partitions), "the replicas splitting the partitions")
            tp = min(_jobs_owned(a, topic=topics.jobs)[0], key=lambda tp: tp.partition)
            await take_over(pg, NAME, {tp: 0})  # as the other replica's stale takeover does, after the rebalance
            claim = jobs[tp.partition][1]
            await publisher.publish_all([claim], [tp.partition])

            async def claim_projected() -> bool:
                return await _states(pg, [claim.job_id]) == ["claimed"]

            await until(claim_projected, "the claim in the fenced-off partition projected")
            assert a.projector.fenced == 1, "its batch was refused once"
            await until(lambda: _split_settled(a, b, topics.jobs, partitions), "the split as it was")
            assert tp in a.projector.shards.owned, "the replica the group gives it to holds it again"
    finally:
        await publisher.stop()


async def test_a_takeover_a_rebalance_overtook_is_rolled_back_and_fences_no_one(stack, topics, schema, pg):
    """Replica A's takeover of every partition waits for a lock on projection_offsets while B joins and the
    group gives B part of them: once the lock is let go, A's takeover is rolled back instead of fencing B off
    its share, and each partition is taken over once, by the replica the group gives it to."""
    publisher = ReconnectingPublisher(topics.kafka, topics.jobs, client_id="test", deadline_ms=10_000)
    holder = await asyncpg.connect(stack.database_url, server_settings={"search_path": schema})
    try:
        partitions = await publisher.partition_count()
        jobs = [one_of_each(f"Overtaken takeover {p}.")[0] for p in range(partitions)]
        await publisher.publish_all(jobs, list(range(partitions)))
        hold = holder.transaction()
        await hold.start()
        await holder.execute("LOCK TABLE projection_offsets IN ACCESS EXCLUSIVE MODE")

        async def takeovers_waiting(n: int) -> bool:
            waiting = await pg.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND query LIKE 'INSERT INTO projection_offsets%'"
            )
            return bool(waiting >= n)

        async with replicas(stack, topics, schema) as start:
            a = await start()
            await until(lambda: takeovers_waiting(1), "A's takeover waiting for the lock")
            epoch = a.projector.shards.epoch
            b = await start()
            await until(lambda: a.projector.shards.epoch > epoch, "A hearing of the rebalance B's joining makes")
            await until(lambda: takeovers_waiting(2), "B's takeover waiting for the lock")
            await hold.commit()
            await until(lambda: _split_settled(a, b, topics.jobs, partitions), "the replicas splitting the partitions")

            async def every_job_projected() -> bool:
                return len(await _states(pg, [job.job_id for job in jobs])) == partitions

            await until(every_job_projected, "every job projected")
            generations = await pg.fetch(
                "SELECT partition, generation FROM projection_offsets WHERE consumer = $1 AND topic = $2",
                NAME,
                topics.jobs,
            )
            assert {r["generation"] for r in generations} == {1}, "each partition taken over once"
            assert (a.projector.fenced, b.projector.fenced) == (0, 0), "no batch refused"
    finally:
        await holder.close()
        await publisher.stop()


async def test_a_batch_read_before_another_projector_took_over_its_partition_is_refused(pool, pg):
    """The fence itself, with no group: a partition taken over again since a batch of it was read refuses the
    batch, whole, and leaves the rows and the offsets as they were."""
    tp = TopicPartition("jobs", 3)
    config = ProjectorConfig(
        name=NAME, jobs_topic="jobs", control_topic="control", cache_ttl=timedelta(minutes=10), max_batch=500
    )
    old = Projector(config, pool, consumer=None, partitions=[], dead_letter=RecordedDeadLetters())  # type: ignore[arg-type]
    events = one_of_each("Taken over twice.")
    async with pool.acquire() as conn:
        stand = (await take_over(conn, NAME, {tp: 0}))[tp]
    old.shards.owned[tp] = stand.generation
    await old.apply_batch({tp: [record_of(events[0], "jobs", 3, 0)]})
    async with pool.acquire() as conn:
        newer = (await take_over(conn, NAME, {tp: 0}))[tp]  # another projector takes the partition
    assert (newer.next_offset, newer.generation) == (1, stand.generation + 1), "it resumes after the old batch"
    before = await _rows(pg, [events[0].job_id], {tp})

    with pytest.raises(Fenced):
        await old.apply_batch({tp: [record_of(events[1], "jobs", 3, 1)]})
    assert await _rows(pg, [events[0].job_id], {tp}) == before
    assert await pg.fetchval("SELECT state FROM jobs WHERE job_id = $1", events[0].job_id) == "queued"


def _completed(text: str, shift: timedelta = timedelta(0)) -> list[JobEvent]:
    """A job queued, claimed, rendered and completed (by its first attempt), ``shift`` later than T0."""
    life = one_of_each(text)
    queued, claimed, segment, completed = life[0], life[1], life[3], life[4]
    events = [queued, claimed, segment.model_copy(update={"attempt": 1}), completed.model_copy(update={"attempt": 1})]
    return [e.model_copy(update={"occurred_at": e.occurred_at + shift}) for e in events]


async def test_a_cache_row_another_shard_changed_since_a_batch_read_it_is_read_and_folded_again(pool, pg):
    """Two jobs of one fingerprint in two partitions (its placement expired between them), applied by two
    shards at once: the older completion, read before the newer one's cache entry landed and written after,
    does not replace it (the batch is refused and applied again from a fresh read)."""
    config = ProjectorConfig(
        name=NAME, jobs_topic="jobs", control_topic="control", cache_ttl=timedelta(minutes=10), max_batch=500
    )
    newer = _completed("One fingerprint, two partitions.")
    older = _completed("One fingerprint, two partitions.", shift=-timedelta(hours=1))
    assert newer[0].fingerprint == older[0].fingerprint
    hold = Hold()
    a = Projector(config, pool, None, [], RecordedDeadLetters(), gate=hold)  # type: ignore[arg-type]
    b = Projector(config, pool, None, [], RecordedDeadLetters())  # type: ignore[arg-type]
    held = asyncio.create_task(
        a.apply_batch({TopicPartition("jobs", 1): [record_of(e, "jobs", 1, i) for i, e in enumerate(older)]})
    )
    await asyncio.wait_for(hold.entered.wait(), 10)  # A read the fingerprint's cache row: none yet
    await b.apply_batch({TopicPartition("jobs", 0): [record_of(e, "jobs", 0, i) for i, e in enumerate(newer)]})
    hold.released.set()
    await asyncio.wait_for(held, 10)

    cached = await pg.fetchval("SELECT job_id FROM result_cache WHERE fingerprint = $1", newer[0].fingerprint)
    assert cached == newer[0].job_id, "the newer result stays the cached one, as in the log's order"
    assert a.read_again == 1, "A's batch was refused once, and applied again from a fresh read"
    states = await _states(pg, [newer[0].job_id, older[0].job_id])
    assert states == ["completed", "completed"]
