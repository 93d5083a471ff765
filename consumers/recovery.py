"""The recovery scan: on assignment, read a partition from its committed offset to its end.

Whatever a previous owner did after its last commit is in the log, not yet
in the committed offset: jobs it completed must not be synthesized again and
jobs it claimed must be claimed again with a higher attempt. Reading that
tail into the ledger before acting is what makes a takeover safe.
"""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from consumers.ledger import Ledger
from contracts import HEADER_TYPE, DecodeError, decode_event, header_value

# SegmentProduced carries nothing the ledger needs: filter it out by header, undecoded.
LEDGER_TYPES = frozenset({"JobQueued", "JobClaimed", "JobCompleted", "JobReleased", "JobFailed"})


async def scan_tail(bootstrap_servers: str, tp: TopicPartition, start: int, ledger: Ledger) -> int:
    """Fold records ``[start, end)`` of ``tp`` into ``ledger``; returns how many were read."""
    reader = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False, group_id=None)
    await reader.start()
    try:
        reader.assign([tp])
        end = (await reader.end_offsets([tp]))[tp]
        if start >= end:
            return 0
        reader.seek(tp, start)
        read = 0
        position = start
        while position < end:
            batch = await reader.getmany(tp, timeout_ms=1000)
            for record in batch.get(tp, []):
                position = record.offset + 1
                if record.offset >= end:
                    break
                read += 1
                if header_value(record.headers, HEADER_TYPE) not in LEDGER_TYPES:
                    continue
                try:
                    ledger.observe(decode_event(record.value))
                except DecodeError:
                    continue  # the main loop dead-letters it when it gets there
            # Offsets can skip (compaction, transaction markers): trust the consumer's position.
            position = max(position, await reader.position(tp))
        return read
    finally:
        await reader.stop()
