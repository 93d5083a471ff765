"""``voxlog replay``: rebuild the projection from the log into a fresh schema, and compare it with the live one.

The log is read from its beginning up to a limit: its end, a time (what the
system believed at that time: each partition up to its first record appended
later), or an offset per partition. The events are folded in memory
(:class:`projections.reducer.Projection`) and copied in whole
(:func:`projections.rebuild.write`): one ``COPY`` per table, not a statement
per event. ``--verify`` rebuilds up to exactly where the live projector
stands, on a snapshot of its tables, and reports every row that differs.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import asyncpg
from aiokafka import AIOKafkaConsumer

from contracts import DecodeError, decode_event, decode_node_event
from foundation.errors import BrokerUnavailable
from foundation.kafka import RecordPosition, wait_for_partitions
from projections.errors import ProjectionError
from projections.migrations import migrate, quote_schema
from projections.rebuild import Difference, compare, copy_text, write
from projections.reducer import Applied, EventRow, Projection, columns

Progress = Callable[[int, int, float], None]
"""(records read, records to read, seconds so far)."""
EventSink = Callable[[list[EventRow]], Awaitable[None]]
"""Takes the ``job_events`` rows of each batch as they are folded (they never change after)."""


class ReplayError(ProjectionError):
    """The replay cannot be made as asked (a schema that is not fresh, a log that cannot be read)."""


@dataclass(frozen=True)
class Limit:
    """Where a replay stops: the log's end, a time, or offsets (exclusive) per partition of a topic."""

    until: datetime | None = None
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)


@dataclass(frozen=True)
class ReplayStats:
    records: int
    events: int
    jobs: int
    read_s: float
    write_s: float

    @property
    def events_per_s(self) -> float:
        return self.records / max(self.read_s + self.write_s, 1e-9)


async def fold_log(
    bootstrap: str,
    jobs_topic: str,
    nodes_topic: str,
    cache_ttl: timedelta,
    limit: Limit,
    progress: Progress,
    sink: EventSink | None = None,
) -> tuple[Projection, int]:
    """The projection the log makes, up to ``limit``, and how many records it read."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        group_id=None,
        # Whole partitions per fetch: the fetcher cannot ask for more while a batch is being folded.
        max_partition_fetch_bytes=32 * 1024 * 1024,
        fetch_max_bytes=256 * 1024 * 1024,
    )
    await consumer.start()
    try:
        try:
            jobs, nodes = await asyncio.gather(
                wait_for_partitions(consumer, jobs_topic, within_s=10),
                wait_for_partitions(consumer, nodes_topic, within_s=10),
            )
        except BrokerUnavailable as exc:
            raise ReplayError(str(exc)) from exc
        partitions = [*jobs, *nodes]
        consumer.assign(partitions)
        beginnings, ends = await asyncio.gather(
            consumer.beginning_offsets(partitions), consumer.end_offsets(partitions)
        )
        stops = {tp: min(ends[tp], limit.offsets.get((tp.topic, tp.partition), ends[tp])) for tp in partitions}
        pending = {tp for tp in partitions if beginnings[tp] < stops[tp]}
        for tp in pending:
            consumer.seek(tp, beginnings[tp])
        total = sum(stops[tp] - beginnings[tp] for tp in pending)
        projection = Projection(cache_ttl)
        cutoff_ms = limit.until.timestamp() * 1000 if limit.until is not None else None
        read, started = 0, time.monotonic()
        while pending:
            batch = await consumer.getmany(*pending, timeout_ms=1000, max_records=5000)
            new_events: list[EventRow] = []
            for tp, records in batch.items():
                for record in records:
                    if record.offset >= stops[tp] or (cutoff_ms is not None and record.timestamp > cutoff_ms):
                        pending.discard(tp)  # the rest of this partition came later
                        break
                    at = RecordPosition(tp.topic, tp.partition, record.offset)
                    event = _fold(projection, record.value, at, jobs_topic)
                    if event is not None:
                        new_events.append(event)
                    read += 1
            if sink is not None and new_events:
                await sink(new_events)
            pending = {tp for tp in pending if await consumer.position(tp) < stops[tp]}
            progress(read, total, time.monotonic() - started)
        return projection, read
    finally:
        await consumer.stop()


def _fold(projection: Projection, value: bytes | None, at: RecordPosition, jobs_topic: str) -> EventRow | None:
    """Fold one record; the ``job_events`` row it added, if any."""
    try:
        if at.topic != jobs_topic:
            projection.apply_node(decode_node_event(value), at)
            return None
        event = decode_event(value)
    except DecodeError:
        projection.skip(at)  # in the DLQ; the live projector moved past it too
        return None
    if projection.apply(event, at) is Applied.DUPLICATE:
        return None
    return projection.events[event.event_id]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector off while the log is folded and written, as it was after.

    The fold keeps every row it makes (hundreds of thousands of objects, none in a reference cycle),
    and each collection of the oldest generation walks all of them again: with the collector on,
    decoding an event cost four times as much, and writing a row of ``jobs`` three times.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


async def replay_into(
    conn: asyncpg.Connection,
    schema: str,
    bootstrap: str,
    topics: tuple[str, str],
    cache_ttl: timedelta,
    limit: Limit,
    progress: Progress,
    consumer: str = "replay",
) -> ReplayStats:
    """Rebuild the projection into ``schema``, which must not hold a projection yet."""
    exists = await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"{quote_schema(schema)}.jobs")
    if exists and await conn.fetchval(f"SELECT EXISTS (SELECT 1 FROM {quote_schema(schema)}.jobs)"):
        raise ReplayError(f"schema {schema} already holds a projection; replay into a new one")
    await migrate(conn, schema)
    started = time.monotonic()
    with collector_paused():
        return await _rebuild(conn, schema, bootstrap, topics, cache_ttl, limit, progress, consumer, started)


async def _rebuild(
    conn: asyncpg.Connection,
    schema: str,
    bootstrap: str,
    topics: tuple[str, str],
    cache_ttl: timedelta,
    limit: Limit,
    progress: Progress,
    consumer: str,
    started: float,
) -> ReplayStats:
    async with conn.transaction():
        # job_events rows never change once made: they stream to the server while the log is still being
        # folded (PostgreSQL parses them on another core), and the other tables follow at the end.
        chunks: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=16)

        async def stream() -> AsyncIterator[bytes]:
            while (chunk := await chunks.get()) is not None:
                yield chunk

        async def sink(rows: list[EventRow]) -> None:
            await chunks.put(copy_text(rows, EventRow))

        copying = asyncio.create_task(
            conn.copy_to_table("job_events", source=stream(), schema_name=schema, columns=columns(EventRow))
        )
        try:
            projection, records = await fold_log(bootstrap, topics[0], topics[1], cache_ttl, limit, progress, sink)
        finally:
            await chunks.put(None)
            await copying
        read_s = time.monotonic() - started
        await write(conn, schema, projection, consumer, events_written=True)
    write_s = time.monotonic() - started - read_s
    return ReplayStats(records, len(projection.events), len(projection.jobs), read_s, write_s)


async def verify_against_live(
    url: str,
    live: str,
    live_projector: str,
    into: str,
    bootstrap: str,
    topics: tuple[str, str],
    cache_ttl: timedelta,
    progress: Progress,
) -> tuple[ReplayStats, list[Difference]]:
    """Rebuild up to where the live projector stands, and compare with a snapshot of its tables."""
    snapshot = await asyncpg.connect(url, timeout=10)
    writer = await asyncpg.connect(url, timeout=10)
    try:
        async with snapshot.transaction(isolation="repeatable_read", readonly=True):
            rows = await snapshot.fetch(
                f"SELECT topic, partition, next_offset FROM {quote_schema(live)}.projection_offsets"
                " WHERE consumer = $1",
                live_projector,
            )
            offsets = {(r["topic"], r["partition"]): r["next_offset"] for r in rows}
            for topic in topics:  # a partition the live projector has not read yet: nothing of it
                offsets.update(
                    {(topic, p): 0 for p in await _partitions(bootstrap, topic) if (topic, p) not in offsets}
                )
            stats = await replay_into(writer, into, bootstrap, topics, cache_ttl, Limit(offsets=offsets), progress)
            differences = await compare(snapshot, live, into, (live_projector, "replay"), rebuilt_conn=writer)
        return stats, differences
    finally:
        await snapshot.close()
        await writer.close()


async def _partitions(bootstrap: str, topic: str) -> list[int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    await consumer.start()
    try:
        return [tp.partition for tp in await wait_for_partitions(consumer, topic, within_s=10)]
    finally:
        await consumer.stop()
