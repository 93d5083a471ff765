"""Reading the log for a replay: records folded into the in-memory projection, from the archive and then the topic.

Each jobs partition is read from the archive first, when one is given
(:mod:`projections.archive`), and then from the topic where the archive ends;
a gap between the two, or an archive file that does not match its checksum,
stops the replay with a :class:`ReplayError` rather than rebuild a projection
with records missing.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from aiokafka.structs import TopicPartition

from contracts import DecodeError, decode_event, decode_node_event
from foundation.errors import BrokerUnavailable
from foundation.kafka import RecordPosition, bulk_reader, wait_for_partitions
from foundation.kafka_access import KafkaAccess
from projections.archive import ArchiveError, Manifest, read_file
from projections.errors import ProjectionError
from projections.reducer import Outcome, Projection
from projections.rows import EventRow

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
    kafka: KafkaAccess,
    jobs_topic: str,
    control_topic: str,
    cache_ttl: timedelta,
    limit: Limit,
    progress: Progress,
    sink: EventSink | None = None,
    archive: Path | None = None,
) -> tuple[Projection, int]:
    """The projection the log makes, up to ``limit``, and how many records it read.

    With ``archive``, each jobs partition is read from the archive first and then from the topic where the
    archive ends (:mod:`projections.archive`).
    """
    consumer = bulk_reader(kafka)
    await kafka.start(consumer, "cannot read the log")
    try:
        try:
            jobs, nodes = await asyncio.gather(
                wait_for_partitions(consumer, jobs_topic, within_s=10),
                wait_for_partitions(consumer, control_topic, within_s=10),
            )
        except BrokerUnavailable as exc:
            raise ReplayError(str(exc)) from exc
        partitions = [*jobs, *nodes]
        consumer.assign(partitions)
        beginnings, ends = await asyncio.gather(
            consumer.beginning_offsets(partitions), consumer.end_offsets(partitions)
        )
        stops = {tp: min(ends[tp], limit.offsets.get((tp.topic, tp.partition), ends[tp])) for tp in partitions}
        starts = dict(beginnings)
        archived = _archived(archive, jobs_topic, jobs, beginnings) if archive is not None else {}
        starts.update({tp: end for tp, (end, _) in archived.items()})
        pending = {tp for tp in partitions if starts[tp] < stops[tp]}
        for tp in pending:
            consumer.seek(tp, starts[tp])
        total = sum(stops[tp] - starts[tp] for tp in pending) + sum(n for _, n in archived.values())
        projection = Projection(cache_ttl)
        fold = _Folder(projection, jobs_topic, limit, stops, sink)
        started = time.monotonic()
        if archive is not None:
            for tp in archived:
                if not await fold.archived(archive, tp):
                    pending.discard(tp)  # the limit lies inside the archive
                progress(fold.read, total, time.monotonic() - started)
        while pending:
            batch = await consumer.getmany(*pending, timeout_ms=1000, max_records=5000)
            for tp, records in batch.items():
                if not await fold.records(tp, [(r.offset, r.timestamp, r.value) for r in records]):
                    pending.discard(tp)  # the rest of this partition came later
            pending = {tp for tp in pending if await consumer.position(tp) < stops[tp]}
            progress(fold.read, total, time.monotonic() - started)
        return projection, fold.read
    finally:
        await consumer.stop()


def _archived(
    archive: Path, topic: str, jobs: list[TopicPartition], beginnings: dict[TopicPartition, int]
) -> dict[TopicPartition, tuple[int, int]]:
    """Per jobs partition with archived records: where the archive ends, and how many records it holds."""
    try:
        manifest = Manifest.load(archive)
        if manifest.topic != topic:
            raise ReplayError(f"the archive in {archive} holds topic {manifest.topic}, not {topic}")
        extra = manifest.partitions() - {tp.partition for tp in jobs}
        if extra:
            raise ReplayError(f"the archive holds partitions {sorted(extra)} that {topic} does not have")
        found: dict[TopicPartition, tuple[int, int]] = {}
        for tp in jobs:
            files = manifest.of_partition(tp.partition)
            first, end = (files[0].first, files[-1].end) if files else (beginnings[tp], beginnings[tp])
            if first > 0 or beginnings[tp] > end:
                gap = (0, first) if first > 0 else (end, beginnings[tp])
                raise ReplayError(
                    f"{topic} partition {tp.partition}: offsets {gap[0]}..{gap[1] - 1} are neither in the archive"
                    " nor in the topic; replay would be incomplete"
                )
            if files:
                found[tp] = (end, sum(f.records for f in files))
        return found
    except ArchiveError as exc:
        raise ReplayError(str(exc)) from exc


class _Folder:
    """Folds records into the projection up to the limit, and hands the new ``job_events`` rows to the sink."""

    def __init__(
        self,
        projection: Projection,
        jobs_topic: str,
        limit: Limit,
        stops: dict[TopicPartition, int],
        sink: EventSink | None,
    ) -> None:
        self._projection, self._jobs_topic, self._stops, self._sink = projection, jobs_topic, stops, sink
        self._cutoff_ms = limit.until.timestamp() * 1000 if limit.until is not None else None
        self.read = 0

    async def records(self, tp: TopicPartition, records: list[tuple[int, int, bytes | None]]) -> bool:
        """Fold ``(offset, timestamp, value)`` records of ``tp``; False once the limit is reached."""
        new_events: list[EventRow] = []
        more = True
        for offset, timestamp, value in records:
            if offset >= self._stops[tp] or (self._cutoff_ms is not None and timestamp > self._cutoff_ms):
                more = False
                break
            event = _fold(self._projection, value, RecordPosition(tp.topic, tp.partition, offset), self._jobs_topic)
            if event is not None:
                new_events.append(event)
            self.read += 1
        if self._sink is not None and new_events:
            await self._sink(new_events)
        return more

    async def archived(self, archive: Path, tp: TopicPartition) -> bool:
        """Fold the partition's archived records (each file checked first); False once the limit is reached."""
        try:
            for entry in Manifest.load(archive).of_partition(tp.partition):
                records = read_file(archive, entry)
                while chunk := list(itertools.islice(records, 5000)):
                    if not await self.records(tp, [(r.offset, r.timestamp, r.value) for r in chunk]):
                        return False
        except ArchiveError as exc:
            raise ReplayError(str(exc)) from exc
        return True


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
    if projection.apply(event, at) is Outcome.DUPLICATE:
        return None
    return projection.events[event.event_id]
