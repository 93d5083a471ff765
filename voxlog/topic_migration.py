"""``voxlog topics``' migration: the old nodes topic's records, copied into the control topic.

The compacted topic that keeps what voxlog keeps by key (workers' announcements and heartbeats, API keys,
service modes, the lexicon, documents, webhook endpoints and deliveries) was called the nodes topic
(``voxlog.nodes.v1``, ``VOXLOG_NODES_TOPIC``); it is the control topic now (``voxlog.control.v1``,
``VOXLOG_CONTROL_TOPIC``). Once the topics exist, ``voxlog topics`` copies the old topic's records into the
control topic, each partition in order, every record with its key, value (a tombstone as one), headers and
timestamp, and stamps each copy with a ``voxlog-copied-from`` header naming the original
(``<topic>:<partition>:<offset>``).

A run first reads the control topic: its stamps say the last record copied of each partition, and the copy
goes on after it. Run again, it copies nothing; after a crash in the middle (the producer is idempotent, so
the copies are a prefix of the records, in order) it goes on where the copies end; and what an old version
still wrote to the old topic since (a rolling upgrade) is copied by the next run. A record is left out when
the control topic holds a later record of its key that is not a copy (the new version wrote it after): a
copy appended after it would undo it, once compacted.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Final

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord, TopicPartition

from contracts import header_value
from foundation.errors import BrokerUnavailable
from foundation.kafka import bulk_reader, wait_for_partitions
from foundation.kafka_access import KafkaAccess
from voxlog.errors import TopicMismatch

LEGACY_CONTROL_TOPIC: Final = "voxlog.nodes.v1"
"""The control topic's default name until it was renamed (the nodes topic): what ``voxlog topics`` copies."""
COPIED_FROM: Final = "voxlog-copied-from"
"""The header of each copy: ``<topic>:<partition>:<offset>`` of the record it copies."""
_BATCH: Final = 2000


@dataclass(frozen=True)
class TopicCopy:
    """What a run copied from ``source`` into ``target``."""

    source: str
    target: str
    copied: int
    superseded: int = 0  # records left out: the target has a later record of their key, not a copy

    def describe(self) -> str:
        left_out = f", {self.superseded} left out (a later record of their key is there)" if self.superseded else ""
        records = "record" if self.copied == 1 else "records"
        return f"{self.source} -> {self.target}: {self.copied} {records} copied{left_out}"


@dataclass
class _Copied:
    """What the target holds already: the last offset copied of each source partition, and the keys whose latest
    record is not a copy, with that record's timestamp."""

    offsets: dict[int, int]
    written: dict[bytes, int]


async def copy_legacy_topic(
    kafka: KafkaAccess, source: str, target: str, *, required: bool = False
) -> TopicCopy | None:
    """Copy what ``source`` holds and ``target`` lacks; ``None`` when there is nothing to copy from (``source``
    is ``target``, or does not exist: :class:`TopicMismatch` instead when ``required``)."""
    if source == target:
        return None
    consumer = bulk_reader(kafka)
    await kafka.start(consumer, f"cannot read {source}")
    try:
        if source not in await consumer.topics():
            if required:
                raise TopicMismatch(f"topic {source} does not exist: there is nothing to copy into {target}")
            return None
        # Both topics' partitions before any is assigned: the client then asks metadata of the assigned topic only.
        sources = await wait_for_partitions(consumer, source, within_s=10)
        copied = await _copied(consumer, await wait_for_partitions(consumer, target, within_s=10), source)
        producer = kafka.producer(client_id="voxlog-topics", enable_idempotence=True, acks="all", linger_ms=5)
        await kafka.start(producer, f"cannot write to {target}")
        try:
            return await _copy(consumer, producer, sources, target, copied)
        finally:
            await producer.stop()
    except (KafkaError, OSError) as exc:
        raise BrokerUnavailable(f"copying {source} into {target} failed: {exc}") from exc
    finally:
        await consumer.stop()


async def _copied(consumer: AIOKafkaConsumer, targets: list[TopicPartition], source: str) -> _Copied:
    copied = _Copied({}, {})
    async for _, records in _records(consumer, targets, {}):
        for record in records:
            stamp = header_value(record.headers, COPIED_FROM)
            if stamp is None:
                if record.key is not None:
                    copied.written[record.key] = record.timestamp
                continue
            if record.key is not None:
                copied.written.pop(record.key, None)
            match stamp.rsplit(":", 2):
                case [topic, partition, offset] if topic == source and partition.isdigit() and offset.isdigit():
                    copied.offsets[int(partition)] = max(int(offset), copied.offsets.get(int(partition), -1))
    return copied


async def _copy(
    consumer: AIOKafkaConsumer,
    producer: AIOKafkaProducer,
    sources: list[TopicPartition],
    target: str,
    copied: _Copied,
) -> TopicCopy:
    source = sources[0].topic
    count = superseded = 0
    starts = {partition: offset + 1 for partition, offset in copied.offsets.items()}
    async for partition, records in _records(consumer, sources, starts):
        sent = []
        for record in records:
            later = copied.written.get(record.key) if record.key is not None else None
            if later is not None and later >= record.timestamp:
                superseded += 1
                continue
            headers = [(name, value) for name, value in record.headers if name != COPIED_FROM]
            headers.append((COPIED_FROM, f"{source}:{partition}:{record.offset}".encode()))
            sent.append(
                await producer.send(
                    target, value=record.value, key=record.key, headers=headers, timestamp_ms=record.timestamp
                )
            )
        failed = [r for r in await asyncio.gather(*sent, return_exceptions=True) if isinstance(r, BaseException)]
        if failed:
            raise failed[0]
        count += len(sent)
    return TopicCopy(source, target, count, superseded)


async def _records(
    consumer: AIOKafkaConsumer, partitions: list[TopicPartition], starts: dict[int, int]
) -> AsyncIterator[tuple[int, list[ConsumerRecord[bytes, bytes]]]]:
    """The records of a topic's ``partitions``, one after another, each from its offset in ``starts`` (else its
    first) up to the end it had when its turn came, in batches."""
    for tp in partitions:
        consumer.assign([tp])
        first, end = (await consumer.beginning_offsets([tp]))[tp], (await consumer.end_offsets([tp]))[tp]
        start = max(first, starts.get(tp.partition, first))  # what compaction or retention removed is gone
        if start >= end:
            continue
        consumer.seek(tp, start)
        while await consumer.position(tp) < end:
            batch = (await consumer.getmany(tp, timeout_ms=1000, max_records=_BATCH)).get(tp, [])
            records = [record for record in batch if record.offset < end]
            if records:
                yield tp.partition, records
