"""The projector: applies every event of the log to the Postgres read models.

It assigns itself every partition of the jobs and nodes topics (no consumer
group: its position lives in Postgres). On start it seeks each partition to
the ``projection_offsets`` row written by its last committed batch, so a
crash replays at most one uncommitted batch, which idempotent application
absorbs. Each batch of records is applied in one transaction together with
the new offsets. A record that cannot be decoded, or whose application
violates a constraint, is copied to the DLQ with the reason and skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

import asyncpg
import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRecord
from aiokafka.errors import KafkaError, OffsetOutOfRangeError
from aiokafka.structs import TopicPartition

from contracts import (
    DecodeError,
    DocumentSubmitted,
    JobEvent,
    NodeAnnounced,
    NodeEvent,
    NodeHeartbeat,
    ServiceModeSet,
    decode_event,
    decode_node_event,
)
from foundation.db import DATABASE_OUTAGES
from foundation.errors import BrokerUnavailable
from foundation.job_changes import NOTIFY_SQL, notify_payloads
from foundation.kafka import RecordPosition
from foundation.lifecycle import Stopped, wait_for_stop
from foundation.metrics import PROJECTOR_BATCH_RECORDS, PROJECTOR_BATCH_SECONDS
from foundation.outages import Outage, until_available
from projections.apply import Outcome, apply_job_event, apply_node_event
from projections.batch_apply import Offsets, apply_job_events
from projections.errors import ProjectionGap
from projections.linger import NEVER, Linger, LiveJobs
from projections.observed import observe

log = structlog.get_logger("voxlog.projector")

_OUTAGES: Final = (*DATABASE_OUTAGES, KafkaError, BrokerUnavailable)
_REFUSALS: Final = (asyncpg.IntegrityConstraintViolationError, asyncpg.DataError)
_NODE_EVENTS: Final = (NodeAnnounced, NodeHeartbeat, ServiceModeSet, DocumentSubmitted)
_Decoded = tuple[ConsumerRecord, JobEvent | NodeEvent]
_Apply = Callable[[asyncpg.Connection, list[_Decoded]], Awaitable[list[tuple[JobEvent, Outcome]]]]
DeadLetter = Callable[[ConsumerRecord, str], Awaitable[object]]
"""Port: keeps a record the projector cannot decode or apply, with the reason, and goes on."""


@dataclass(frozen=True)
class ProjectorConfig:
    name: str
    jobs_topic: str
    nodes_topic: str
    cache_ttl: timedelta
    max_batch: int
    linger: Linger = NEVER
    """How long to wait between batches while jobs queue up (projections.linger); by default never."""
    changes_channel: str | None = None
    """Where to NOTIFY the jobs each committed batch changed (foundation.job_changes); None: nowhere."""


@contextlib.asynccontextmanager
async def _replaced_if_broken(conn: asyncpg.Connection) -> AsyncIterator[None]:
    """A connection whose protocol broke (PostgreSQL went away mid-operation) is closed, not pooled again:
    handed out once more, it failed the next batch's BEGIN and stopped the projector."""
    try:
        yield
    except asyncpg.InternalClientError:
        conn.terminate()
        raise


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
        self._fetches = Outage("Kafka (the projector's fetches)")
        self._batches = Outage("PostgreSQL or the dead-letter topic (the projector's batches)")
        self.applied = 0
        self.live = LiveJobs()

    async def run(self, stop: asyncio.Event) -> None:
        """Apply batches until ``stop`` is set.

        A batch that fails (PostgreSQL down, the DLQ unreachable) is applied again from the stored
        offsets once the outage is over: the projector waits it out, it never exits for it.
        """
        try:
            await self._resume(stop)
            while not stop.is_set():
                try:
                    batch = await self._consumer.getmany(
                        *self._partitions, timeout_ms=500, max_records=self.config.max_batch
                    )
                except OffsetOutOfRangeError as exc:  # retention deleted records this projector had not read
                    raise ProjectionGap(f"the jobs log lost records this projector had not applied: {exc}") from exc
                except KafkaError as exc:
                    await wait_for_stop(stop, self._fetches.failed(exc))
                    continue
                self._fetches.recovered()
                if not batch:
                    continue
                try:
                    await self.apply_batch(batch)
                except _OUTAGES as exc:
                    # Applied again from the stored offsets, once they can be read: one outage, said once.
                    await wait_for_stop(stop, self._batches.failed(exc, then="applied again from the stored offsets"))
                    await self._resume(stop, self._batches)
                else:
                    self._batches.recovered()
                    if linger_s := self.live.linger_s(self.config.linger):
                        await wait_for_stop(stop, linger_s)  # the next batch gathers what comes meanwhile
        except Stopped:
            return

    async def _resume(self, stop: asyncio.Event, outage: Outage | None = None) -> None:
        await until_available(
            "PostgreSQL (the projector's offsets)", self._seek_to_stored_offsets, stop, _OUTAGES, outage
        )

    async def _seek_to_stored_offsets(self) -> None:
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(
                "SELECT topic, partition, next_offset FROM projection_offsets WHERE consumer = $1", self.config.name
            )
        stored = {TopicPartition(r["topic"], r["partition"]): r["next_offset"] for r in rows}
        # Explicit offsets for every partition: nothing is left to the consumer's reset policy.
        beginnings = await self._consumer.beginning_offsets(self._partitions)
        ends = await self._consumer.end_offsets(self._partitions)
        for tp in self._partitions:
            position = stored.get(tp, beginnings[tp])
            if tp.topic == self.config.jobs_topic and not beginnings[tp] <= position <= ends[tp]:
                raise ProjectionGap(
                    f"projector {self.config.name!r} stopped at offset {position} of {tp.topic}[{tp.partition}], "
                    f"but that partition now holds offsets {beginnings[tp]} to {ends[tp]}: records it never "
                    "applied are gone (retention, or the topic was recreated), so going on would silently skip "
                    "them. Rebuild the projection into a fresh schema, or point the projector at the right topic."
                )
            self._consumer.seek(tp, position)

    async def apply_batch(self, batch: dict[TopicPartition, list[ConsumerRecord]]) -> None:
        """Apply ``batch`` in one transaction with the offsets past it: set-based, or record by record
        (each in a savepoint) when the tables refuse something in it, so that only that record is dead-lettered.
        """
        started = time.monotonic()
        decoded: list[_Decoded] = []
        for records in batch.values():
            for record in records:
                try:
                    if record.topic == self.config.nodes_topic:
                        decoded.append((record, decode_node_event(record.value)))
                    else:
                        decoded.append((record, decode_event(record.value)))
                except DecodeError as exc:
                    await self._reject(record, str(exc))
        try:
            if any(isinstance(event, _NODE_EVENTS) for _, event in decoded):
                seen = await self._in_transaction(batch, self._set_based, decoded)
            else:
                seen = await self._two_statements(batch, decoded)
        except _REFUSALS as exc:
            log.info("the tables refused a record; applying its batch record by record", error=str(exc))
            seen = await self._in_transaction(batch, self._one_by_one, decoded)
        # Counted once the batch is committed: a batch applied again after a failure counts once.
        PROJECTOR_BATCH_SECONDS.observe(time.monotonic() - started)
        PROJECTOR_BATCH_RECORDS.observe(sum(len(records) for records in batch.values()))
        observe(seen)
        self.live.observe(seen)

    async def _two_statements(
        self, batch: dict[TopicPartition, list[ConsumerRecord]], decoded: list[_Decoded]
    ) -> list[tuple[JobEvent, Outcome]]:
        """A batch of job events only (the usual case): one read, then one write that lands with the offsets
        and the NOTIFY, or not at all; no transaction round trips (projections.batch_apply)."""
        jobs = [
            (event, RecordPosition(r.topic, r.partition, r.offset))
            for r, event in decoded
            if not isinstance(event, _NODE_EVENTS)  # none: checked by the caller
        ]
        offsets = Offsets(
            self.config.name, {(tp.topic, tp.partition): records[-1].offset + 1 for tp, records in batch.items()}
        )
        async with self._pool.acquire() as conn, _replaced_if_broken(conn):
            seen = await apply_job_events(
                conn,
                jobs,
                self.config.cache_ttl,
                offsets,
                self.config.changes_channel,
            )
        self.applied += len(decoded)
        return seen

    async def _in_transaction(
        self, batch: dict[TopicPartition, list[ConsumerRecord]], apply: _Apply, decoded: list[_Decoded]
    ) -> list[tuple[JobEvent, Outcome]]:
        async with self._pool.acquire() as conn, _replaced_if_broken(conn), conn.transaction():
            seen = await apply(conn, decoded)
            changed = [event.job_id for event, outcome in seen if outcome is Outcome.APPLIED]
            if changed and self.config.changes_channel is not None:  # delivered at the commit, not before
                await conn.execute(NOTIFY_SQL, self.config.changes_channel, notify_payloads(changed))
            tps = list(batch)
            await conn.execute(
                "INSERT INTO projection_offsets (consumer, topic, partition, next_offset, updated_at)"
                " SELECT $1, * , now() FROM unnest($2::text[], $3::int[], $4::bigint[])"
                " ON CONFLICT (consumer, topic, partition)"
                " DO UPDATE SET next_offset = EXCLUDED.next_offset, updated_at = now()",
                self.config.name,
                [tp.topic for tp in tps],
                [tp.partition for tp in tps],
                [batch[tp][-1].offset + 1 for tp in tps],
            )
        return seen

    async def _set_based(self, conn: asyncpg.Connection, decoded: list[_Decoded]) -> list[tuple[JobEvent, Outcome]]:
        jobs: list[tuple[JobEvent, RecordPosition]] = []
        for record, event in decoded:
            if isinstance(event, _NODE_EVENTS):
                await apply_node_event(conn, event)
            else:
                jobs.append((event, RecordPosition(record.topic, record.partition, record.offset)))
        seen = await apply_job_events(conn, jobs, self.config.cache_ttl)
        self.applied += len(decoded)
        return seen

    async def _one_by_one(self, conn: asyncpg.Connection, decoded: list[_Decoded]) -> list[tuple[JobEvent, Outcome]]:
        seen: list[tuple[JobEvent, Outcome]] = []
        for record, event in decoded:
            at = RecordPosition(record.topic, record.partition, record.offset)
            try:
                async with conn.transaction():  # a savepoint: one bad event must not sink the batch
                    if isinstance(event, _NODE_EVENTS):
                        await apply_node_event(conn, event)
                    else:
                        seen.append((event, await apply_job_event(conn, event, at, self.config.cache_ttl)))
                self.applied += 1
            except _REFUSALS as exc:
                await self._reject(record, f"cannot apply: {exc}")
        return seen

    async def _reject(self, record: ConsumerRecord, reason: str) -> None:
        log.warning(
            "dead-lettered a record",
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            reason=reason,
        )
        await self._dead_letter(record, reason)
