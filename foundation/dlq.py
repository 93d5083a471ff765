"""Dead letters: records a consumer could not decode or apply, kept with the reason."""

from __future__ import annotations

from aiokafka import ConsumerRecord

from contracts.topics import (
    DLQ_HEADER_REASON,
    DLQ_HEADER_SOURCE_OFFSET,
    DLQ_HEADER_SOURCE_PARTITION,
    DLQ_HEADER_SOURCE_TOPIC,
)
from foundation.kafka import KafkaEventPublisher, RecordPosition
from foundation.metrics import DEAD_LETTERS

DLQ_HEADER_CONSUMER = "dlq.consumer"


class DeadLetterSender:
    """Copies a record (key, value, headers) to the DLQ with where it came from, why, and who refused it."""

    def __init__(self, publisher: KafkaEventPublisher, dlq_topic: str, consumer: str) -> None:
        self._publisher = publisher
        self._topic = dlq_topic
        self._consumer = consumer

    async def __call__(self, record: ConsumerRecord, reason: str) -> RecordPosition:
        headers = [
            *(record.headers or ()),
            (DLQ_HEADER_REASON, reason[:2000].encode()),
            (DLQ_HEADER_SOURCE_TOPIC, record.topic.encode()),
            (DLQ_HEADER_SOURCE_PARTITION, str(record.partition).encode()),
            (DLQ_HEADER_SOURCE_OFFSET, str(record.offset).encode()),
            (DLQ_HEADER_CONSUMER, self._consumer.encode()),
        ]
        position = await self._publisher.send_raw(self._topic, record.key, record.value, headers)
        DEAD_LETTERS.labels(self._consumer.split(":")[0]).inc()
        return position
