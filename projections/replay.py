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
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import asyncpg

from foundation.kafka import wait_for_partitions
from foundation.kafka_access import KafkaAccess
from projections.migrations import migrate, quote_schema
from projections.rebuild import Difference, compare, copy_text, write
from projections.replay_read import Limit, Progress, ReplayError, ReplayStats, fold_log
from projections.rows import EventRow, columns


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
    kafka: KafkaAccess,
    topics: tuple[str, str],
    cache_ttl: timedelta,
    limit: Limit,
    progress: Progress,
    consumer: str = "replay",
    archive: Path | None = None,
) -> ReplayStats:
    """Rebuild the projection into ``schema``, which must not hold a projection yet."""
    exists = await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"{quote_schema(schema)}.jobs")
    if exists and await conn.fetchval(f"SELECT EXISTS (SELECT 1 FROM {quote_schema(schema)}.jobs)"):
        raise ReplayError(f"schema {schema} already holds a projection; replay into a new one")
    await migrate(conn, schema)
    started = time.monotonic()
    with collector_paused():
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
                projection, records = await fold_log(
                    kafka, topics[0], topics[1], cache_ttl, limit, progress, sink, archive
                )
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
    kafka: KafkaAccess,
    topics: tuple[str, str],
    cache_ttl: timedelta,
    progress: Progress,
    archive: Path | None = None,
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
                offsets.update({(topic, p): 0 for p in await _partitions(kafka, topic) if (topic, p) not in offsets})
            stats = await replay_into(
                writer, into, kafka, topics, cache_ttl, Limit(offsets=offsets), progress, archive=archive
            )
            differences = await compare(snapshot, live, into, (live_projector, "replay"), rebuilt_conn=writer)
        return stats, differences
    finally:
        await snapshot.close()
        await writer.close()


async def _partitions(kafka: KafkaAccess, topic: str) -> list[int]:
    consumer = kafka.consumer(enable_auto_commit=False, group_id=None)
    await kafka.start(consumer, f"cannot read the partitions of {topic}")
    try:
        return [tp.partition for tp in await wait_for_partitions(consumer, topic, within_s=10)]
    finally:
        await consumer.stop()
