"""Which partitions each worker owns, read from the real broker (foundation.kafka_groups.GroupShares)."""

from __future__ import annotations

import uuid

import pytest

from foundation.kafka_groups import GroupShares, wait_group_stable

pytestmark = pytest.mark.integration


async def test_the_shares_of_a_stable_group_are_its_members_disjoint_partitions(topics):
    group = f"shares-{uuid.uuid4().hex[:8]}"
    members = [topics.kafka.consumer(topics.jobs, group_id=group, enable_auto_commit=False) for _ in range(2)]
    shares = GroupShares(topics.kafka, topics.jobs, fresh_s=60.0)
    try:
        for member in members:
            await member.start()
        await wait_group_stable(topics.kafka, group, 2, 60)
        first = await shares.shares(group)  # never read: the first submission waits for the reading
        read = await shares.read(group)
        cached = await shares.shares(group)
        nobody = await shares.read(f"{group}-none")
    finally:
        await shares.stop()
        for member in members:
            await member.stop()
    assert first == read
    assert cached == read
    assert len(read) == 2
    assert not read[0] & read[1]
    assert read[0] | read[1] == set(range(24))
    assert nobody == []


async def test_regression_the_first_jobs_after_the_api_started_were_placed_blind(topics):
    """bench (l) put three long texts of four on one of two workers: they were placed by the only reading of the
    group's shares, taken while the workers were joining (right after the API started there was none at all,
    and placement balanced the partitions whoever owned them). Now a missing or stale reading is waited for,
    up to a bound."""
    group = f"shares-{uuid.uuid4().hex[:8]}"
    member = topics.kafka.consumer(topics.jobs, group_id=group, enable_auto_commit=False)
    shares = GroupShares(topics.kafka, topics.jobs, fresh_s=60.0)
    try:
        await member.start()
        await wait_group_stable(topics.kafka, group, 1, 60)
        first = await shares.shares(group)
    finally:
        await shares.stop()
        await member.stop()
    assert first == [frozenset(range(24))]
