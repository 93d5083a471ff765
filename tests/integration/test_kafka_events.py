"""Events through the real broker: round trip with headers, and partitioning by fingerprint."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest

from contracts import HEADER_SCHEMA_VERSION, HEADER_TRACEPARENT, HEADER_TYPE, decode_event, header_value
from contracts.codec import is_traceparent
from foundation.errors import BrokerUnavailable
from foundation.kafka import KafkaEventPublisher
from foundation.kafka_access import KafkaAccess
from tests.support.events import one_of_each
from tests.support.kafka import read_topic


async def test_every_event_type_round_trips_through_kafka_with_headers(topics):
    events = one_of_each()
    trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    async with KafkaEventPublisher(topics.kafka, topics.jobs) as publisher:
        positions = [await publisher.publish(event, traceparent=trace) for event in events]

    records = await read_topic(topics.kafka, topics.jobs, expected=len(events))
    assert len({p.partition for p in positions}) == 1, "one fingerprint, one partition"
    records.sort(key=lambda r: r.offset)
    assert [r.offset for r in records] == [p.offset for p in positions]
    for record, event in zip(records, events, strict=True):
        assert decode_event(record.value) == event
        assert record.key == event.fingerprint.encode()
        assert header_value(record.headers, HEADER_TYPE) == event.type
        assert header_value(record.headers, HEADER_SCHEMA_VERSION) == str(event.schema_version)
        assert header_value(record.headers, HEADER_TRACEPARENT) == trace


async def test_records_of_a_fingerprint_land_in_one_partition_in_order(topics):
    texts = [f"Sentence number {i}." for i in range(12)]
    jobs = [one_of_each(text) for text in texts for _ in range(3)]  # 3 jobs per fingerprint
    async with KafkaEventPublisher(topics.kafka, topics.jobs) as publisher:
        for job in jobs:
            await asyncio.gather(*(publisher.publish(event) for event in job[:2]))

    records = await read_topic(topics.kafka, topics.jobs, expected=len(jobs) * 2)
    partitions_by_fingerprint: dict[str, set[int]] = defaultdict(set)
    for record in records:
        event = decode_event(record.value)
        partitions_by_fingerprint[event.fingerprint].add(record.partition)
        assert is_traceparent(header_value(record.headers, HEADER_TRACEPARENT) or "")
    assert len(partitions_by_fingerprint) == len(texts)
    assert all(len(parts) == 1 for parts in partitions_by_fingerprint.values())
    # 12 fingerprints over 24 partitions: the keys really spread.
    assert len({p for parts in partitions_by_fingerprint.values() for p in parts}) > 1


async def test_an_unreachable_broker_raises_our_error():
    publisher = KafkaEventPublisher(KafkaAccess("127.0.0.1:1"), "nowhere", request_timeout_ms=2000)
    with pytest.raises(BrokerUnavailable, match="cannot connect"):
        await publisher.start()
