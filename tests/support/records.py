"""Kafka records built in memory, for handing events to a consumer's code without a broker."""

from __future__ import annotations

from aiokafka import ConsumerRecord

from contracts import AnyEvent, encode_event, event_headers, record_key


def raw_record(
    topic: str, partition: int, offset: int, value: bytes, headers: list[tuple[str, bytes]], key: bytes | None = None
) -> ConsumerRecord:
    return ConsumerRecord(
        topic=topic,
        partition=partition,
        offset=offset,
        timestamp=0,
        timestamp_type=0,
        key=key,
        value=value,
        checksum=None,
        serialized_key_size=len(key or b""),
        serialized_value_size=len(value),
        headers=headers,
    )


def record_of(event: AnyEvent, topic: str, partition: int, offset: int) -> ConsumerRecord:
    """``event`` as the record a producer would have written: value, key and headers."""
    return raw_record(topic, partition, offset, encode_event(event), event_headers(event), record_key(event))


class RecordedDeadLetters:
    """A dead-letter port that keeps what it is sent."""

    def __init__(self) -> None:
        self.records: list[tuple[ConsumerRecord, str]] = []

    async def __call__(self, record: ConsumerRecord, reason: str) -> object:
        self.records.append((record, reason))
        return None
