"""Samples for consumer lag (:mod:`foundation.lag_rules`), read from Kafka's own offsets.

A group's position is its committed offset (the admin API), the log's start and
end are the partitions' offsets, and the age of the oldest record not yet
consumed is the timestamp of the record at the position, fetched by a consumer
of no group (so reading it moves nobody's offsets).

The I/O under the rules: it reads samples and judges nothing (:mod:`foundation.lag_rules` does).
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType
from typing import Self

from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition

from foundation.errors import BrokerUnavailable
from foundation.kafka import wait_for_partitions
from foundation.kafka_access import KafkaAccess
from foundation.kafka_groups import describe_group
from foundation.lag_rules import PartitionPosition, Sample


class LagReader:
    """An admin client and a consumer of no group on ``topic``, kept open from one sample to the next."""

    def __init__(self, kafka: KafkaAccess, topic: str, *, fetch_within_s: float = 3.0) -> None:
        self.topic = topic
        self._kafka = kafka
        self._admin = kafka.admin(request_timeout_ms=10_000)
        self._consumer = kafka.consumer(
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=64 * 1024,
        )
        # Never assigned a partition: a consumer's metadata covers only the topics it reads once it reads
        # any, so the sizes of other topics (the dead-letter topic) are asked through this one.
        self._sizes = kafka.consumer(group_id=None, enable_auto_commit=False)
        self._fetch_within_s = fetch_within_s

    async def __aenter__(self) -> Self:
        try:
            await self._admin.start()
            await self._consumer.start()
            await self._sizes.start()
        except KafkaError as exc:
            await self.close()
            raise await self._kafka.unavailable("cannot read consumer lag", exc) from exc
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._sizes.stop()
        await self._consumer.stop()
        await self._admin.close()

    async def groups(self, prefix: str) -> list[str]:
        """The consumer groups whose names start with ``prefix``."""
        try:
            listed = await self._admin.list_consumer_groups()
        except KafkaError as exc:
            raise BrokerUnavailable(f"cannot list consumer groups: {exc}") from exc
        return sorted(str(row[0]) for row in listed if str(row[0]).startswith(prefix))

    async def group_sample(self, group: str) -> Sample:
        """The group's committed offsets on the topic, and its member count."""
        try:
            committed = await self._admin.list_consumer_group_offsets(group)
            state = await describe_group(self._admin, group)
        except KafkaError as exc:
            raise BrokerUnavailable(f"cannot read the offsets of group {group}: {exc}") from exc
        positions = {tp.partition: meta.offset for tp, meta in committed.items() if tp.topic == self.topic}
        return await self.sample(group, {p: o for p, o in positions.items() if o >= 0}, state.members)

    async def sample(self, name: str, positions: dict[int, int], members: int | None) -> Sample:
        """A sample of a consumer at ``positions`` (partition -> next offset to consume)."""
        try:
            partitions = await wait_for_partitions(self._consumer, self.topic, within_s=10)
            starts, ends = await asyncio.gather(
                self._consumer.beginning_offsets(partitions), self._consumer.end_offsets(partitions)
            )
            behind = {
                tp: max(positions.get(tp.partition, starts[tp]), starts[tp])
                for tp in partitions
                if max(positions.get(tp.partition, starts[tp]), starts[tp]) < ends[tp]
            }
            oldest = await self._timestamps(behind) if behind else {}
        except KafkaError as exc:
            raise BrokerUnavailable(f"cannot read the offsets of {self.topic}: {exc}") from exc
        rows = tuple(
            PartitionPosition(tp.partition, positions.get(tp.partition), starts[tp], ends[tp], oldest.get(tp.partition))
            for tp in partitions
        )
        return Sample(time.time(), name, self.topic, members, rows)

    async def records_in(self, topic: str) -> int:
        """Records a topic holds now (its partitions' end less start offsets): the dead-letter topic's size."""
        try:
            partitions = await wait_for_partitions(self._sizes, topic, within_s=2)
            starts, ends = await asyncio.gather(
                self._sizes.beginning_offsets(partitions), self._sizes.end_offsets(partitions)
            )
        except KafkaError as exc:
            raise BrokerUnavailable(f"cannot read the offsets of {topic}: {exc}") from exc
        return sum(ends[tp] - starts[tp] for tp in partitions)

    async def _timestamps(self, at: dict[TopicPartition, int]) -> dict[int, int]:
        """The timestamp of the record at each offset (a record deleted since: the next one there is)."""
        self._consumer.assign(list(at))
        for tp, offset in at.items():
            self._consumer.seek(tp, offset)
        found: dict[int, int] = {}
        deadline = time.monotonic() + self._fetch_within_s
        while len(found) < len(at) and time.monotonic() < deadline:
            batch = await self._consumer.getmany(timeout_ms=200)
            for tp, records in batch.items():
                if records and tp.partition not in found:
                    found[tp.partition] = records[0].timestamp
                    self._consumer.pause(tp)
        self._consumer.resume(*self._consumer.paused())
        return found
