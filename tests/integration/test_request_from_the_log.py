"""A job's request read back from its partition (consumers.recovery.find_request), not from the projection."""

from __future__ import annotations

import uuid

from aiokafka.structs import TopicPartition

from consumers.recovery import find_request
from foundation.kafka import KafkaEventPublisher
from tests.support.events import one_of_each


async def test_regression_a_request_before_the_scanned_tail_is_read_from_the_log(topics):
    """After a rebalance the worker read the request only from Postgres, and after 30 s of projector lag it
    failed a valid job as request_unavailable: the log holds the request."""
    text = "Queued long before the tail."  # one text: one fingerprint, one partition
    wanted = one_of_each(text, uuid.uuid4())
    later = [event for _ in range(300) for event in one_of_each(text, uuid.uuid4())[:2]]
    async with KafkaEventPublisher(topics.kafka, topics.jobs) as publisher:
        queued = await publisher.publish(wanted[0])
        last = [await publisher.publish(event) for event in [*wanted[1:3], *later]][-1]
    tp = TopicPartition(topics.jobs, queued.partition)
    assert last.partition == queued.partition
    assert last.offset > 500, "far back: the search takes several doubling chunks"

    found = await find_request(topics.kafka, tp, last.offset + 1, wanted[0].job_id)
    assert found == wanted[0].payload.request
    assert await find_request(topics.kafka, tp, last.offset + 1, uuid.uuid4()) is None
    assert await find_request(topics.kafka, tp, queued.offset, wanted[0].job_id) is None, "only before `before`"
