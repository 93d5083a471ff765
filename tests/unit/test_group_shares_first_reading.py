"""A group's first reading of its shares, or one after a quiet spell, is waited for, up to a bound
(foundation.kafka_groups.GroupShares)."""

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

    def __init__(self, wait_s: float, stale_s: float = 120.0, fresh_s: float = 60.0) -> None:
        super().__init__(KafkaAccess("127.0.0.1:9"), "jobs", fresh_s=fresh_s, stale_s=stale_s, wait_s=wait_s)
        self.gate = asyncio.Event()
        self.readings = 0

    async def read(self, group: str) -> list[frozenset[int]]:
        self.readings += 1
        await self.gate.wait()
        self._read[group] = (time.monotonic(), OWNED)
        return OWNED


async def test_the_first_submissions_wait_for_the_first_reading_and_share_it():
    shares = GatedShares(wait_s=60.0)
    waiting = [asyncio.create_task(shares.shares("g")) for _ in range(3)]
    await asyncio.sleep(0)
    assert not any(task.done() for task in waiting), "held until the reading ends"
    shares.gate.set()
    assert await asyncio.gather(*waiting) == [OWNED] * 3
    assert shares.readings == 1
    await shares.stop()


async def test_a_first_reading_past_its_bound_places_by_partition_and_goes_on_in_the_background():
    shares = GatedShares(wait_s=0.01)
    assert await shares.shares("g") == []
    shares.gate.set()
    await asyncio.gather(*shares._readers.values())  # the shielded reading was not cancelled with the wait
    assert await shares.shares("g") == OWNED
    assert shares.readings == 1
    await shares.stop()


async def test_a_reading_older_than_its_stale_bound_is_renewed_before_it_places_again():
    """A reading taken before the workers rebalanced is not what the first job after a quiet spell goes by."""
    shares = GatedShares(wait_s=60.0, stale_s=30.0, fresh_s=2.0)
    shares._read["g"] = (time.monotonic() - 45.0, [frozenset({0, 1, 2, 3})])  # one worker owned all, then
    waiting = asyncio.create_task(shares.shares("g"))
    await asyncio.sleep(0)
    assert not waiting.done(), "a stale reading is not placed by"
    shares.gate.set()
    assert await waiting == OWNED
    await shares.stop()


async def test_a_reading_between_fresh_and_stale_is_used_while_it_is_renewed_in_the_background():
    shares = GatedShares(wait_s=60.0, stale_s=120.0)
    old = [frozenset({0, 1, 2, 3})]
    shares._read["g"] = (time.monotonic() - 90.0, old)
    assert await shares.shares("g") == old, "under load a submission never waits for the broker"
    shares.gate.set()
    await asyncio.gather(*shares._readers.values())
    assert await shares.shares("g") == OWNED
    assert shares.readings == 1
    await shares.stop()
