"""Reading one job, or one fingerprint, back from the log: for audits and for a job's state as of a time.

Every event of a job lies in one partition (the one its ``JobQueued`` was
placed in), keyed by its fingerprint, so a job's history is one partition read
from the job's first offset, filtered by key before anything is decoded. The
projection only says where to look (``job_events`` holds each job's
fingerprint, partition and first offset). Without it (PostgreSQL down, or a job
the projector has not reached) the log alone is searched for records that name
the job: every partition from its start (``voxlog audit``), or, given when the
job was submitted (the API, which found the job in the projection), every
partition from the records appended a margin before then (Kafka's
offsets_for_times), never from the start of a partition that keeps everything.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord, TopicPartition

from contracts import HEADER_TRACEPARENT, DecodeError, decode_event, header_value
from foundation.db import DATABASE_OUTAGES
from foundation.errors import BrokerUnavailable
from foundation.kafka import RecordPosition, wait_for_partitions
from foundation.kafka_access import KafkaAccess
from projections.audit import JobHistory, LoggedEvent, as_json, history_of
from projections.reducer import Projection
from projections.rows import WebhookDeliveryRow, columns

Keep = Callable[["ConsumerRecord[bytes, bytes]"], bool]

SINCE_MARGIN = timedelta(minutes=5)
"""How long before a job's ``submitted_at`` a search of the log without the projection begins: its records are
stamped by the process that submitted it, after ``submitted_at``; the margin is for clocks that disagree."""


@dataclass(frozen=True)
class Whereabouts:
    """Where a job's events begin in the log, as the projection recorded it."""

    fingerprint: str
    partition: int
    first_offset: int


class JobLogReader:
    """Reads the jobs topic for one fingerprint or one job, each read with its own short-lived consumer.

    Raises :class:`BrokerUnavailable` when the log cannot be read within ``within_s``. ``records_read`` counts the
    records every read fetched from the broker (kept or not): what an audit costs the log.
    """

    def __init__(self, kafka: KafkaAccess, topic: str, *, within_s: float = 30.0, at_once: int = 4) -> None:
        self.topic = topic
        self.records_read = 0
        self._kafka = kafka
        self._within_s = within_s
        self._reads = asyncio.Semaphore(at_once)  # each read is a consumer and a partition scan

    async def of_fingerprint(self, fingerprint: str, starts: dict[int, int] | None = None) -> list[LoggedEvent]:
        """The fingerprint's events in log order: in ``starts``' partitions from their offsets when given, else
        in every partition (the API places a fingerprint's jobs in any partition, see ``producers.placement``)."""
        key = fingerprint.encode()
        return await self._scan(lambda r: r.key == key, starts)

    async def of_job(self, job_id: uuid.UUID, since: datetime | None = None) -> list[LoggedEvent]:
        """Every partition read for records that name ``job_id`` (when nothing says where it is): from the records
        appended ``SINCE_MARGIN`` before ``since`` when given (when the job was submitted), else from the start."""
        needle = str(job_id).encode()
        return await self._scan(lambda r: r.value is not None and needle in r.value, None, since)

    async def _scan(
        self, keep: Keep, starts: dict[int, int] | None, since: datetime | None = None
    ) -> list[LoggedEvent]:
        async with self._reads:
            return await self._scan_now(keep, starts, since)

    async def _scan_now(self, keep: Keep, starts: dict[int, int] | None, since: datetime | None) -> list[LoggedEvent]:
        consumer = self._kafka.consumer(enable_auto_commit=False, group_id=None)
        await self._kafka.start(consumer, f"cannot read {self.topic}")
        try:
            return await asyncio.wait_for(self._read(consumer, keep, starts, since), self._within_s)
        except TimeoutError as exc:
            raise BrokerUnavailable(f"reading {self.topic} took over {self._within_s:.0f}s") from exc
        except KafkaError as exc:
            raise BrokerUnavailable(f"cannot read {self.topic}: {exc}") from exc
        finally:
            await consumer.stop()

    async def _read(
        self, consumer: AIOKafkaConsumer, keep: Keep, starts: dict[int, int] | None, since: datetime | None
    ) -> list[LoggedEvent]:
        partitions = await wait_for_partitions(consumer, self.topic, within_s=self._within_s)
        if starts is not None:
            partitions = [TopicPartition(self.topic, p) for p in starts]
        consumer.assign(partitions)
        beginnings, ends = await asyncio.gather(
            consumer.beginning_offsets(partitions), consumer.end_offsets(partitions)
        )
        firsts = {tp: (starts or {}).get(tp.partition, 0) for tp in partitions}
        if since is not None:
            at_ms = int((since - SINCE_MARGIN).timestamp() * 1000)
            found = await consumer.offsets_for_times({tp: at_ms for tp in partitions})
            firsts = {tp: ends[tp] if found[tp] is None else found[tp].offset for tp in partitions}
        for tp in partitions:
            consumer.seek(tp, max(beginnings[tp], firsts[tp]))
        found_events: list[LoggedEvent] = []
        pending = {tp for tp in partitions if await consumer.position(tp) < ends[tp]}
        while pending:
            batch = await consumer.getmany(*pending, timeout_ms=1000)
            for tp, records in batch.items():
                self.records_read += len(records)
                for record in records:
                    if record.offset < ends[tp] and keep(record):
                        try:
                            event = decode_event(record.value)
                        except DecodeError:
                            continue  # in the DLQ, and attributable to no job
                        at = RecordPosition(tp.topic, tp.partition, record.offset)
                        appended = datetime.fromtimestamp(record.timestamp / 1000, UTC)
                        traceparent = header_value(record.headers, HEADER_TRACEPARENT)
                        found_events.append(LoggedEvent(at, appended, event, traceparent))
            pending = {tp for tp in pending if await consumer.position(tp) < ends[tp]}
        found_events.sort(key=lambda e: (e.position.partition, e.position.offset))
        return found_events


class LogAuditor:
    """Histories and past states read from the log; the projection (``pool``) only says where to look.

    ``since`` (the API's, from the job's projected ``submitted_at``) bounds a search of the log for a job the
    projection cannot place (``JobLogReader.of_job``)."""

    def __init__(self, reader: JobLogReader, pool: asyncpg.Pool | None, cache_ttl: timedelta) -> None:
        self._reader = reader
        self._pool = pool
        self._ttl = cache_ttl

    async def job(self, job_id: uuid.UUID, since: datetime | None = None) -> JobHistory:
        return history_of(job_id, await self._events_of(job_id, since))

    async def events(self, job_id: uuid.UUID, since: datetime | None = None) -> dict[str, Any] | None:
        """The job's history as JSON (``producers.ports.JobAudit``)."""
        history = await self.job(job_id, since)
        return as_json(history) if history.found else None

    async def fingerprint(self, fingerprint: str) -> list[JobHistory]:
        """Every job of ``fingerprint``, in the order they were queued."""
        events = await self._reader.of_fingerprint(fingerprint, await self._fingerprint_starts(fingerprint))
        job_ids = list(dict.fromkeys(e.event.job_id for e in events))
        return [history_of(job_id, events) for job_id in job_ids]

    async def job_as_of(
        self, job_id: uuid.UUID, moment: datetime, since: datetime | None = None
    ) -> dict[str, Any] | None:
        """The job as the projection showed it at ``moment`` (in the shape of a ``jobs`` row and its segments).

        Its fingerprint's records appended up to ``moment`` are folded (``voxlog replay --until`` takes the
        same cut), read from the job's first offset; a cache hit's audio belongs to another job of the same
        fingerprint (its source), whose records are read from the source's first offset.
        """
        starts = await self._as_of_starts(job_id)
        if starts is None:  # the projection cannot place the job: it is found in the log
            mine = [e for e in await self._reader.of_job(job_id, since) if e.event.job_id == job_id]
            if not mine:
                return None
            starts = mine[0].event.fingerprint, {mine[0].position.partition: mine[0].position.offset}
        fingerprint, offsets = starts
        events = await self._reader.of_fingerprint(fingerprint, offsets)
        projection = self._folded(events, moment)
        row = projection.jobs.get(job_id)
        if row is None:
            return None
        source = row.source_job_id
        if source is not None and source not in projection.jobs:  # the projection had not seen it reuse a result
            where = await self._whereabouts(source)
            if where is not None:
                events += await self._reader.of_fingerprint(where.fingerprint, {where.partition: where.first_offset})
                projection = self._folded(events, moment)
                row = projection.jobs[job_id]
        job = {name: getattr(row, name) for name in columns(type(row))}
        job["request"] = json.loads(row.request)
        segments = projection.segments_of(row.source_job_id or job_id)
        job["segments"] = sorted(
            ({name: getattr(s, name) for name in columns(type(s)) if name != "job_id"} for s in segments),
            key=lambda s: s["segment_index"],
        )
        return job

    async def deliveries(self, job_id: uuid.UUID) -> list[WebhookDeliveryRow] | None:
        """The job's webhook deliveries as the projection holds them (``webhook_deliveries``: each delivery's
        latest record), not read from the log; ``None`` when PostgreSQL cannot be read."""
        if self._pool is None:
            return None
        names = columns(WebhookDeliveryRow)
        query = f"SELECT {', '.join(names)} FROM webhook_deliveries WHERE job_id = $1 ORDER BY created_at, delivery_id"
        try:
            rows = await self._pool.fetch(query, job_id, timeout=5)
        except DATABASE_OUTAGES:
            return None
        return [WebhookDeliveryRow(*(row[name] for name in names)) for row in rows]

    def _folded(self, events: list[LoggedEvent], moment: datetime) -> Projection:
        """``events`` appended up to ``moment`` folded in log order (a record read twice counts once)."""
        projection = Projection(self._ttl)
        cut = {e.position: e for e in events if e.appended_at <= moment}
        for position, item in sorted(cut.items(), key=lambda pair: (pair[0].partition, pair[0].offset)):
            projection.apply(item.event, position)
        return projection

    async def _events_of(self, job_id: uuid.UUID, since: datetime | None) -> list[LoggedEvent]:
        where = await self._whereabouts(job_id)
        if where is None:
            return [e for e in await self._reader.of_job(job_id, since) if e.event.job_id == job_id]
        events = await self._reader.of_fingerprint(where.fingerprint, {where.partition: where.first_offset})
        return [e for e in events if e.event.job_id == job_id]

    async def _whereabouts(self, job_id: uuid.UUID) -> Whereabouts | None:
        row = await self._fetch(
            "SELECT fingerprint, kafka_partition, min(kafka_offset) AS first FROM job_events"
            " WHERE job_id = $1 AND topic = $2 GROUP BY fingerprint, kafka_partition",
            job_id,
        )
        return None if row is None else Whereabouts(row["fingerprint"], row["kafka_partition"], row["first"])

    async def _as_of_starts(self, job_id: uuid.UUID) -> tuple[str, dict[int, int]] | None:
        """The job's fingerprint, and where its events and those of the job whose result it reused (as far as the
        projection knows) begin, by partition; None when the projection does not place the job."""
        rows = await self._fetch_all(
            "SELECT kafka_partition, min(kafka_offset) AS first,"
            " min(fingerprint) FILTER (WHERE job_id = $1::uuid) AS fingerprint FROM job_events"
            " WHERE topic = $2 AND job_id IN (SELECT $1::uuid UNION ALL"
            " SELECT source_job_id FROM jobs WHERE job_id = $1::uuid AND source_job_id IS NOT NULL)"
            " GROUP BY kafka_partition",
            job_id,
        )
        fingerprint = next((r["fingerprint"] for r in rows if r["fingerprint"] is not None), None)
        return None if fingerprint is None else (fingerprint, {r["kafka_partition"]: r["first"] for r in rows})

    async def _fingerprint_starts(self, fingerprint: str) -> dict[int, int] | None:
        """Where the fingerprint's events begin in each partition the projection shows them in."""
        rows = await self._fetch_all(
            "SELECT kafka_partition, min(kafka_offset) AS first FROM job_events"
            " WHERE fingerprint = $1 AND topic = $2 GROUP BY kafka_partition",
            fingerprint,
        )
        return {r["kafka_partition"]: r["first"] for r in rows} if rows else None

    async def _fetch(self, query: str, value: object) -> asyncpg.Record | None:
        rows = await self._fetch_all(query, value)
        return rows[0] if rows else None

    async def _fetch_all(self, query: str, value: object) -> list[asyncpg.Record]:
        if self._pool is None:
            return []
        try:
            rows: list[asyncpg.Record] = await self._pool.fetch(query, value, self._reader.topic, timeout=5)
        except DATABASE_OUTAGES:
            return []  # the log alone answers: every partition is read
        return rows
