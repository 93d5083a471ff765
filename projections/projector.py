"""The projector: applies every event of the log to the Postgres read models.

It assigns itself every partition of the jobs and nodes topics (no consumer
group: its position lives in Postgres). On start it seeks each partition to
the ``projection_offsets`` row written by its last committed batch, so a
crash replays at most one uncommitted batch, which idempotent application
absorbs. Each batch of records is applied in one transaction together with
the new offsets. A record that cannot be decoded, or whose application
violates a constraint, is copied to the DLQ with the reason and skipped (and
only then does a batch pay for a savepoint per record).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

import asyncpg
import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRecord
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition

from contracts import DecodeError, JobEvent, NodeAnnounced, decode_event, decode_node_event
from projections.apply import Position, apply_job_event, apply_node_event
from voxlog.lifecycle import wait_for_stop

log = structlog.get_logger("voxlog.projector")

DeadLetter = Callable[[ConsumerRecord, str], Awaitable[object]]
Event = JobEvent | NodeAnnounced
# What the tables refuse for one record's sake (a constraint, a value Postgres cannot store);
# anything else (a lost connection, say) fails the batch and it is retried from the stored offsets.
UNAPPLIABLE = (asyncpg.IntegrityConstraintViolationError, asyncpg.DataError)


@dataclass(frozen=True)
class ProjectorConfig:
    name: str
    jobs_topic: str
    nodes_topic: str
    cache_ttl: timedelta
    max_batch: int = 500
    retry_delay_s: float = 1.0


class Projector:
    def __init__(
        self,
        config: ProjectorConfig,
        pool: asyncpg.Pool,
        consumer: AIOKafkaConsumer,
        partitions: list[TopicPartition],
        dead_letter: DeadLetter,
    ) -> None:
        self.config = config
        self._pool = pool
        self._consumer = consumer
        self._partitions = partitions
        self._dead_letter = dead_letter

    async def run(self, stop: asyncio.Event) -> None:
        """Apply batches until ``stop`` is set; a failed batch is retried from the stored offsets."""
        await self._seek_to_stored_offsets()
        while not stop.is_set():
            batch = await self._consumer.getmany(*self._partitions, timeout_ms=500, max_records=self.config.max_batch)
            if not batch:
                continue
            try:
                await self.apply_batch(batch)
            except (asyncpg.PostgresError, OSError, KafkaError) as exc:
                log.error("batch failed; retrying from the stored offsets", error=str(exc))
                await wait_for_stop(stop, self.config.retry_delay_s)
                await self._seek_to_stored_offsets()

    async def _seek_to_stored_offsets(self) -> None:
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT topic, partition, next_offset FROM projection_offsets WHERE consumer = $1", self.config.name
            )
        stored = {TopicPartition(r["topic"], r["partition"]): r["next_offset"] for r in rows}
        # Explicit offsets for every partition: nothing is left to the consumer's reset policy.
        beginnings = await self._consumer.beginning_offsets(self._partitions)
        for tp in self._partitions:
            self._consumer.seek(tp, stored.get(tp, beginnings[tp]))

    async def apply_batch(self, batch: dict[TopicPartition, list[ConsumerRecord]]) -> None:
        """Apply ``batch`` and advance the offsets in one transaction.

        The batch is tried whole first, one statement after another; only when the tables
        refuse a record is it applied again with a savepoint per record, so that the refused
        record goes to the DLQ and the rest still land. A savepoint per record always would
        cost two round trips per event, on every batch, for the rare bad one.
        """
        decoded: list[tuple[ConsumerRecord, Event]] = []
        for records in batch.values():
            for record in records:
                try:
                    decoded.append((record, self._decode(record)))
                except DecodeError as exc:
                    await self._reject(record, str(exc))
        try:
            async with self._pool.acquire() as conn, conn.transaction():
                for record, event in decoded:
                    await self._apply(conn, record, event)
                await self._advance(conn, batch)
        except UNAPPLIABLE:
            async with self._pool.acquire() as conn, conn.transaction():
                for record, event in decoded:
                    try:
                        async with conn.transaction():  # a savepoint: one bad event must not sink the batch
                            await self._apply(conn, record, event)
                    except UNAPPLIABLE as exc:
                        await self._reject(record, f"cannot apply: {exc}")
                await self._advance(conn, batch)

    def _decode(self, record: ConsumerRecord) -> Event:
        if record.topic == self.config.nodes_topic:
            return decode_node_event(record.value)
        return decode_event(record.value)

    async def _apply(self, conn: asyncpg.Connection, record: ConsumerRecord, event: Event) -> None:
        if isinstance(event, NodeAnnounced):
            await apply_node_event(conn, event)
        else:
            await apply_job_event(
                conn, event, Position(record.topic, record.partition, record.offset), self.config.cache_ttl
            )

    async def _advance(self, conn: asyncpg.Connection, batch: dict[TopicPartition, list[ConsumerRecord]]) -> None:
        """Every partition of the batch in one statement: its next offset is the one after its last record."""
        tps = [tp for tp, records in batch.items() if records]
        await conn.execute(
            "INSERT INTO projection_offsets (consumer, topic, partition, next_offset, updated_at)"
            " SELECT $1, t.topic, t.partition, t.next_offset, now()"
            " FROM unnest($2::text[], $3::int[], $4::bigint[]) AS t(topic, partition, next_offset)"
            " ON CONFLICT (consumer, topic, partition)"
            " DO UPDATE SET next_offset = EXCLUDED.next_offset, updated_at = now()",
            self.config.name,
            [tp.topic for tp in tps],
            [tp.partition for tp in tps],
            [batch[tp][-1].offset + 1 for tp in tps],
        )

    async def _reject(self, record: ConsumerRecord, reason: str) -> None:
        log.warning(
            "dead-lettered a record",
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            reason=reason,
        )
        await self._dead_letter(record, reason)
