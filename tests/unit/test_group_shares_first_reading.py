"""A group's first reading of its shares is waited for, up to a bound (foundation.kafka_groups.GroupShares)."""

from __future__ import annotations

import asyncio
import time

import pytest

from foundation.kafka_access import KafkaAccess
from foundation.kafka_groups import GroupShares

pytestmark = pytest.mark.unit

OWNED = [frozenset({0, 1}), frozenset({2, 3})]


class GatedShares(GroupShares):
    """Readings that end when the test opens the gate; counted."""

    def __init__(self, first_s: float) -> None:
        super().__init__(KafkaAccess("127.0.0.1:9"), "jobs", fresh_s=60.0, first_s=first_s)
        self.gate = asyncio.Event()
        self.readings = 0

    async def read(self, group: str) -> list[frozenset[int]]:
        self.readings += 1
        await self.gate.wait()
        self._read[group] = (time.monotonic(), OWNED)
        return OWNED


async def test_the_first_submissions_wait_for_the_first_reading_and_share_it():
    shares = GatedShares(first_s=60.0)
    waiting = [asyncio.create_task(shares.shares("g")) for _ in range(3)]
    await asyncio.sleep(0)
    assert not any(task.done() for task in waiting), "held until the reading ends"
    shares.gate.set()
    assert await asyncio.gather(*waiting) == [OWNED] * 3
    assert shares.readings == 1
    await shares.stop()


async def test_a_first_reading_past_its_bound_places_by_partition_and_goes_on_in_the_background():
    shares = GatedShares(first_s=0.01)
    assert await shares.shares("g") == []
    shares.gate.set()
    await asyncio.gather(*shares._readers.values())  # the shielded reading was not cancelled with the wait
    assert await shares.shares("g") == OWNED
    assert shares.readings == 1
    await shares.stop()
