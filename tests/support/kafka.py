"""Reading a topic back in tests: every record, with a deadline instead of sleeps."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from aiokafka import AIOKafkaConsumer, ConsumerRecord
from aiokafka.structs import TopicPartition

from foundation.kafka_access import KafkaAccess


async def read_topic(kafka: KafkaAccess, topic: str, expected: int, within_s: float = 30.0) -> list[ConsumerRecord]:
    """All records of ``topic`` from offset 0, once ``expected`` have arrived (or fail at the deadline)."""
    consumer = kafka.consumer(enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        partitions = await _partitions(consumer, topic, within_s)
        consumer.assign([TopicPartition(topic, p) for p in partitions])
        await consumer.seek_to_beginning()
        records: list[ConsumerRecord] = []
        deadline = time.monotonic() + within_s
        while len(records) < expected and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for part in batch.values():
                records.extend(part)
        if len(records) < expected:
            raise AssertionError(f"read {len(records)} of {expected} records from {topic} within {within_s}s")
        return records
    finally:
        await consumer.stop()


async def _partitions(consumer: AIOKafkaConsumer, topic: str, within_s: float) -> set[int]:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        found = consumer.partitions_for_topic(topic)
        if found:
            return set(found)
        await consumer._client.force_metadata_update()
        await asyncio.sleep(0.2)
    raise AssertionError(f"topic {topic} has no partitions after {within_s}s")


async def read_to_end(kafka: KafkaAccess, topic: str) -> list[ConsumerRecord]:
    """Every record of ``topic`` up to its end offsets at the time of the call."""
    consumer = kafka.consumer(enable_auto_commit=False)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in await _partitions(consumer, topic, 30.0)]
        consumer.assign(partitions)
        ends = await consumer.end_offsets(partitions)
        total = sum(ends.values())
    finally:
        await consumer.stop()
    return await read_topic(kafka, topic, expected=total) if total else []


@contextlib.asynccontextmanager
async def hanging_up_listener() -> AsyncIterator[int]:
    """A listener that closes each connection at its first request, unanswered (what a PLAINTEXT client meets
    at a TLS listener); yields its port."""

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(64)
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]
