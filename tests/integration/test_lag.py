"""Lag samples from a real broker (foundation.kafka_lag): committed offsets, ends, the oldest record's age, members."""

from __future__ import annotations

import uuid

from aiokafka.structs import OffsetAndMetadata, TopicPartition

from foundation.kafka_groups import wait_group_stable
from foundation.kafka_lag import LagReader
from foundation.lag_rules import Status, evaluate


async def test_a_groups_lag_is_its_committed_offsets_against_the_ends_and_stop_once_it_has_no_members(topics):
    producer = topics.kafka.producer(acks="all")
    await producer.start()
    try:
        sent = [await producer.send_and_wait(topics.jobs, b"x", partition=p % 2) for p in range(10)]
    finally:
        await producer.stop()
    stamps = {(m.partition, m.offset): m.timestamp for m in sent}
    prefix = f"lagtest.{uuid.uuid4().hex[:8]}."  # groups outlive tests on a shared broker: this test's own names
    group = prefix + "synth"
    consumer = topics.kafka.consumer(topics.jobs, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        await wait_group_stable(topics.kafka, group, 1, 60)
        await consumer.commit(
            {
                TopicPartition(topics.jobs, 0): OffsetAndMetadata(2, ""),
                TopicPartition(topics.jobs, 1): OffsetAndMetadata(5, ""),
            }
        )
        async with LagReader(topics.kafka, topics.jobs) as reader:
            assert await reader.groups(prefix) == [group]
            live = await reader.group_sample(group)
    finally:
        await consumer.stop()  # leaves the group
    async with LagReader(topics.kafka, topics.jobs) as reader:
        left = await reader.group_sample(group)
        projector = await reader.sample("projector:p", {0: 5}, None)

    rows = {p.partition: p for p in live.partitions}
    assert (rows[0].records, rows[1].records, rows[2].records) == (3, 0, 0)
    assert rows[0].oldest_ms == stamps[(0, 2)], "the age is the oldest unconsumed record's"
    assert live.members == 1
    assert evaluate([live]).status is Status.OK
    assert (left.members, evaluate([left]).status) == (0, Status.STOP)
    assert {p.partition: p.records for p in projector.partitions if p.records} == {1: 5}, "no position: from the start"
