"""Consumer groups as the broker sees them, through the admin API."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from foundation.errors import BrokerUnavailable


@dataclass(frozen=True)
class GroupState:
    group: str
    state: str  # Stable, PreparingRebalance, CompletingRebalance, Empty, Dead
    members: int


async def describe_group(admin: AIOKafkaAdminClient, group: str) -> GroupState:
    # DescribeGroups v0 rows: (error_code, group_id, state, protocol_type, protocol, members)
    row = (await admin.describe_consumer_groups([group]))[0].groups[0]
    return GroupState(group, row[2], len(row[5]))


async def wait_group_stable(bootstrap_servers: str, group: str, members: int, within_s: float) -> GroupState:
    """Until ``group`` is Stable with ``members`` members (so no rebalance is pending), or raise."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
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
        raise BrokerUnavailable(f"group {group} did not settle with {members} members in {within_s:.0f}s; last: {seen}")
    finally:
        await admin.close()
