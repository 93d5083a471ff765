"""``voxlog archive``: copy the jobs topic's records older than a time into the archive (projections.archive).

Each partition is copied from where the archive ends (or the partition's first
offset) up to its first record appended at or after ``before``, the same cut
``voxlog replay --until`` takes. A run only adds files; the manifest is replaced
once they are all written.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition

from foundation.errors import BrokerUnavailable
from foundation.kafka import bulk_reader, wait_for_partitions
from foundation.kafka_access import KafkaAccess
from projections.archive import MANIFEST, ArchivedRecord, ArchiveError, ArchiveFile, Manifest, write_file

Buffers = dict[TopicPartition, list[ArchivedRecord]]


@dataclass(frozen=True)
class ArchiveRun:
    files: tuple[ArchiveFile, ...]
    ends: dict[int, int]  # partition -> the offset after its last archived record

    @property
    def records(self) -> int:
        return sum(f.records for f in self.files)


async def archive_before(
    kafka: KafkaAccess, topic: str, directory: Path, before: datetime, *, per_file: int = 200_000
) -> ArchiveRun:
    """Copy every partition's records appended before ``before`` that the archive lacks."""
    manifest = await asyncio.to_thread(_open, directory, topic)
    consumer = bulk_reader(kafka)
    await kafka.start(consumer, f"cannot read {topic}")
    try:
        written = await _copy(consumer, manifest, directory, before, per_file)
    except KafkaError as exc:
        raise BrokerUnavailable(f"cannot read {topic}: {exc}") from exc
    finally:
        await consumer.stop()
    updated = Manifest(topic, manifest.files + written)
    await asyncio.to_thread(updated.save, directory)
    ends = {p: end for p in updated.partitions() if (end := updated.end(p)) is not None}
    return ArchiveRun(written, ends)


def _open(directory: Path, topic: str) -> Manifest:
    directory.mkdir(parents=True, exist_ok=True)
    manifest = Manifest.load(directory) if (directory / MANIFEST).exists() else Manifest(topic)
    if manifest.topic != topic:
        raise ArchiveError(f"{directory} archives topic {manifest.topic}, not {topic}")
    return manifest


async def _copy(
    consumer: AIOKafkaConsumer, manifest: Manifest, directory: Path, before: datetime, per_file: int
) -> tuple[ArchiveFile, ...]:
    partitions = await wait_for_partitions(consumer, manifest.topic, within_s=10)
    consumer.assign(partitions)
    beginnings, ends = await asyncio.gather(consumer.beginning_offsets(partitions), consumer.end_offsets(partitions))
    pending: set[TopicPartition] = set()
    firsts: dict[TopicPartition, int] = {}
    for tp in partitions:
        start = manifest.end(tp.partition)
        if start is None and beginnings[tp] > 0:
            raise ArchiveError(
                f"{tp.topic} partition {tp.partition} begins at offset {beginnings[tp]}: its first records were"
                " deleted before any archive, so no archive of it can be replayed"
            )
        start = start or 0
        if beginnings[tp] > start:
            raise ArchiveError(
                f"{tp.topic} partition {tp.partition}: offsets {start}..{beginnings[tp] - 1} were deleted before they"
                " were archived (the topic's retention is shorter than the archive's interval)"
            )
        firsts[tp] = start
        if start < ends[tp]:
            consumer.seek(tp, start)
            pending.add(tp)
    cutoff_ms = before.timestamp() * 1000
    buffers: Buffers = {tp: [] for tp in partitions}
    written: list[ArchiveFile] = []
    while pending:
        batch = await consumer.getmany(*pending, timeout_ms=1000, max_records=20_000)
        for tp, records in batch.items():
            for record in records:
                if record.offset >= ends[tp] or record.timestamp >= cutoff_ms:
                    pending.discard(tp)
                    break
                headers = tuple((name, bytes(value)) for name, value in record.headers)
                buffers[tp].append(ArchivedRecord(record.offset, record.timestamp, record.key, record.value, headers))
            if len(buffers[tp]) >= per_file:
                written.append(_flush(directory, tp, firsts, buffers))
        pending = {tp for tp in pending if await consumer.position(tp) < ends[tp]}
    written += [_flush(directory, tp, firsts, buffers) for tp, rows in buffers.items() if rows]
    return tuple(written)


def _flush(
    directory: Path,
    tp: TopicPartition,
    firsts: dict[TopicPartition, int],
    buffers: dict[TopicPartition, list[ArchivedRecord]],
) -> ArchiveFile:
    entry = write_file(directory, tp.topic, tp.partition, firsts[tp], buffers[tp])
    firsts[tp], buffers[tp] = entry.end, []
    return entry
