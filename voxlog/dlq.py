"""Dead letters: records a consumer could not decode or apply, kept with the reason."""

from __future__ import annotations

from aiokafka import ConsumerRecord

from contracts.topics import (
    DLQ_HEADER_REASON,
    DLQ_HEADER_SOURCE_OFFSET,
    DLQ_HEADER_SOURCE_PARTITION,
    DLQ_HEADER_SOURCE_TOPIC,
)
from voxlog.kafka import KafkaEventPublisher, RecordPosition

DLQ_HEADER_CONSUMER = "dlq.consumer"


async def dead_letter(
    publisher: KafkaEventPublisher, dlq_topic: str, record: ConsumerRecord, reason: str, consumer: str
) -> RecordPosition:
    """Copy ``record`` (key, value, headers) to the DLQ with where it came from and why."""
    headers = [
        *(record.headers or ()),
        (DLQ_HEADER_REASON, reason[:2000].encode()),
        (DLQ_HEADER_SOURCE_TOPIC, record.topic.encode()),
        (DLQ_HEADER_SOURCE_PARTITION, str(record.partition).encode()),
        (DLQ_HEADER_SOURCE_OFFSET, str(record.offset).encode()),
        (DLQ_HEADER_CONSUMER, consumer.encode()),
    ]
    return await publisher.send_raw(dlq_topic, record.key, record.value, headers)
