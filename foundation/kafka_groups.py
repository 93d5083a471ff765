"""Consumer groups as the broker sees them, through the admin API."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Final

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from aiokafka.errors import KafkaError

from foundation.errors import BrokerUnavailable
from foundation.kafka_access import KafkaAccess


def synth_group(base: str, engine: str, model_version: str) -> str:
    """The consumer group of the workers of one engine and model version.

    Routing: every group reads the whole jobs topic, and a worker acts only on jobs fingerprinted
    for its own engine and model version, so a job is synthesized by a worker that has that model,
    never by another (during a rolling upgrade, old jobs stay with the old version's workers).
    Duplicates still meet in their fingerprint's partition, within one group.
    """
    return f"{base}.{engine}.{model_version}"


@dataclass(frozen=True)
class GroupState:
    group: str
    state: str  # Stable, PreparingRebalance, CompletingRebalance, Empty, Dead
    members: int


async def describe_group(admin: AIOKafkaAdminClient, group: str) -> GroupState:
    # DescribeGroups v0 rows: (error_code, group_id, state, protocol_type, protocol, members)
    row = (await admin.describe_consumer_groups([group]))[0].groups[0]
    return GroupState(group, row[2], len(row[5]))


async def wait_group_stable(kafka: KafkaAccess, group: str, members: int, within_s: float) -> GroupState:
    """Until ``group`` is Stable with ``members`` members (so no rebalance is pending), or raise."""
    admin = kafka.admin()
    await admin.start()
    try:
        deadline = time.monotonic() + within_s
        seen: GroupState | KafkaError | None = None
        while time.monotonic() < deadline:
            try:
                seen = await describe_group(admin, group)
            except KafkaError as exc:  # no coordinator yet: the offsets topic is still being created
                seen = exc
            else:
                if seen.state == "Stable" and seen.members == members:
                    return seen
            await asyncio.sleep(0.2)
        raise BrokerUnavailable(f"group {group} was not stable with {members} members in {within_s:.0f}s; last: {seen}")
    finally:
        await admin.close()


async def member_partitions(admin: AIOKafkaAdminClient, group: str, topic: str) -> list[frozenset[int]]:
    """The partitions of ``topic`` each member of ``group`` owns; empty unless the group is Stable (during a
    rebalance the assignment is about to change)."""
    # DescribeGroups v0 members: (member_id, client_id, client_host, member_metadata, member_assignment)
    row = (await admin.describe_consumer_groups([group]))[0].groups[0]
    if row[2] != "Stable":
        return []
    shares = []
    for member in row[5]:
        assignment = ConsumerProtocolMemberAssignment.decode(member[4])
        shares.append(frozenset(p for name, partitions in assignment.assignment if name == topic for p in partitions))
    return [share for share in shares if share]


WAIT_FOR_READING_S: Final = 1.0
"""How long a submission waits, at most, for a reading it waits for (a reading takes milliseconds)."""
STALE_AFTER_S: Final = 10.0
"""A reading older than this is not placed by: the next submission waits for a new one (see shares)."""


class GroupShares:
    """Which partitions each worker of a group owns, as last read (at most every ``fresh_s``) through the
    admin API; an empty list while it cannot be read (no broker, no group yet, a rebalance)."""

    def __init__(
        self,
        kafka: KafkaAccess,
        topic: str,
        fresh_s: float = 2.0,
        stale_s: float = STALE_AFTER_S,
        wait_s: float = WAIT_FOR_READING_S,
    ) -> None:
        self._kafka = kafka
        self._topic = topic
        self._fresh_s = fresh_s
        self._stale_s = stale_s
        self._wait_s = wait_s
        self._admin: AIOKafkaAdminClient | None = None
        self._read: dict[str, tuple[float, list[frozenset[int]]]] = {}
        self._readers: dict[str, asyncio.Task[list[frozenset[int]]]] = {}

    async def shares(self, group: str) -> list[frozenset[int]]:
        """The shares as last read. A reading older than ``fresh_s`` is renewed in the background (under
        load a submission never waits for the broker); one older than ``stale_s``, or none, is waited for,
        up to ``wait_s``. Placed by an old reading, the first jobs after the API started or after a quiet
        spell went by a group as it was before the workers joined or rebalanced (bench (l): three long
        texts of four on one of two workers)."""
        at, shares = self._read.get(group, (float("-inf"), []))
        age = time.monotonic() - at
        reader = self._readers.get(group)
        if age >= self._fresh_s and (reader is None or reader.done()):
            reader = self._readers[group] = asyncio.create_task(self.read(group), name=f"shares of {group}")
        if age < self._stale_s or reader is None:
            return shares
        try:
            return await asyncio.wait_for(asyncio.shield(reader), self._wait_s)
        except TimeoutError:
            return shares  # the reading goes on; until it ends, placed by the last one (or by partition alone)

    async def read(self, group: str) -> list[frozenset[int]]:
        """Read ``group``'s shares now (empty when the broker cannot tell)."""
        try:
            if self._admin is None:
                admin = self._kafka.admin(request_timeout_ms=2000)
                await asyncio.wait_for(admin.start(), 5)
                self._admin = admin
            shares = await asyncio.wait_for(member_partitions(self._admin, group, self._topic), 5)
        except (KafkaError, OSError, TimeoutError, IndexError):
            shares = []  # placed by partition alone until the group can be read again
            await self._close_admin()
        self._read[group] = (time.monotonic(), shares)
        return shares

    async def _close_admin(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            await admin.close()

    async def stop(self) -> None:
        readers, self._readers = list(self._readers.values()), {}
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        await self._close_admin()
