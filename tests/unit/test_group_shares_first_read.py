"""Placement's view of the workers (foundation.kafka_groups.GroupShares): the first reading is waited for."""

from __future__ import annotations

import asyncio

import pytest

from foundation.kafka_access import KafkaAccess
from foundation.kafka_groups import GroupShares

pytestmark = pytest.mark.unit
SHARES = [frozenset({0, 2}), frozenset({1, 3})]


class Counted(GroupShares):
    def __init__(self, answer_after: asyncio.Event | None = None) -> None:
        super().__init__(KafkaAccess("unused:9092"), "jobs")
        self.reads = 0
        self.answer_after = answer_after

    async def read(self, group: str) -> list[frozenset[int]]:
        self.reads += 1
        if self.answer_after is not None:
            await self.answer_after.wait()
        self._read[group] = (0.0, SHARES)
        return SHARES


async def test_regression_the_first_submissions_after_a_start_were_placed_without_knowing_the_workers():
    """The first reading of a group's shares was made in the background: the first submissions were placed by
    partition alone, in the first (least loaded) partitions, which the range assignor gives one worker, so
    bench (l)'s long texts all landed on one of two workers. The first reading is now waited for."""
    shares = Counted()
    assert await shares.shares("synth") == SHARES
    assert shares.reads == 1


async def test_a_first_reading_the_broker_does_not_answer_is_not_waited_for_long():
    gate = asyncio.Event()
    shares = Counted(answer_after=gate)
    assert await asyncio.wait_for(shares.shares("synth"), 5) == [], "placed by partition alone meanwhile"
    gate.set()
