"""The recovery scan: on assignment, read each partition from its committed offset to its end.

Whatever a previous owner did after its last commit is in the log, not yet
in the committed offset: jobs it completed must not be synthesized again and
jobs it claimed must be claimed again with a higher attempt. Reading that
tail into the ledger before acting is what makes a takeover safe.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Mapping

from aiokafka.structs import TopicPartition

from consumers.ledger import Ledger
from contracts import (
    HEADER_TRACEPARENT,
    HEADER_TYPE,
    CacheEvicted,
    DecodeError,
    JobQueued,
    SynthesisRequest,
    decode_event,
    header_value,
    type_name,
)
from contracts.job_state import STATUS_EVENT_TYPES
from foundation.kafka_access import KafkaAccess

# Only events that can change a job's status, or end a result's reuse, matter to the ledger
# (SegmentProduced does neither): the rest are filtered out by header, undecoded.
LEDGER_TYPES = STATUS_EVENT_TYPES | {type_name(CacheEvicted)}


async def scan_tails(
    kafka: KafkaAccess, starts: Mapping[TopicPartition, int], new_ledger: Callable[[], Ledger]
) -> tuple[dict[TopicPartition, Ledger], int]:
    """A ledger per partition from records ``[start, end)``; also returns how many records were read."""
    ledgers = {tp: new_ledger() for tp in starts}
    if not starts:
        return ledgers, 0
    reader = kafka.consumer(enable_auto_commit=False, group_id=None)
    await reader.start()
    try:
        reader.assign(list(starts))
        ends = await reader.end_offsets(list(starts))
        pending = {tp for tp in starts if starts[tp] < ends[tp]}
        for tp in pending:
            reader.seek(tp, starts[tp])
        read = 0
        while pending:
            batch = await reader.getmany(*pending, timeout_ms=1000)
            for tp, records in batch.items():
                for record in records:
                    if record.offset >= ends[tp]:
                        break
                    read += 1
                    if header_value(record.headers, HEADER_TYPE) in LEDGER_TYPES:
                        # An undecodable record is dead-lettered by the main loop when it gets there.
                        with contextlib.suppress(DecodeError):
                            ledgers[tp].observe(
                                decode_event(record.value), None, header_value(record.headers, HEADER_TRACEPARENT)
                            )
            # Offsets can skip (compaction, transaction markers): trust the consumer's position.
            pending = {tp for tp in pending if await reader.position(tp) < ends[tp]}
        return ledgers, read
    finally:
        await reader.stop()


async def find_request(
    kafka: KafkaAccess, tp: TopicPartition, before: int, job_id: uuid.UUID, first_chunk: int = 256
) -> SynthesisRequest | None:
    """The request of ``job_id`` from its ``JobQueued`` in ``tp``, searching back from offset ``before``.

    A job's events share its partition, and its ``JobQueued`` comes first: when the tail a worker
    scanned starts after it, the record is still in the log (retention is the audit trail's), a
    little way back. Chunks double, so a job queued long ago costs a few reads, not one per record.
    """
    reader = kafka.consumer(enable_auto_commit=False, group_id=None)
    await reader.start()
    try:
        reader.assign([tp])
        beginning = (await reader.beginning_offsets([tp]))[tp]
        end, size = before, first_chunk
        while end > beginning:
            start = max(beginning, end - size)
            reader.seek(tp, start)
            while await reader.position(tp) < end:
                for record in (await reader.getmany(tp, timeout_ms=1000)).get(tp, []):
                    if record.offset >= end:
                        break
                    if header_value(record.headers, HEADER_TYPE) != type_name(JobQueued):
                        continue
                    with contextlib.suppress(DecodeError):
                        event = decode_event(record.value)
                        if isinstance(event, JobQueued) and event.job_id == job_id:
                            return event.payload.request
            end, size = start, size * 2
        return None
    finally:
        await reader.stop()
