"""projections.shards' bookkeeping: what a rebalance gives and takes, and the generations a batch is read at."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from aiokafka.structs import TopicPartition

from projections.projector import Projector, ProjectorConfig
from projections.shards import Shards, group_options

P0, P1, P2 = (TopicPartition("jobs", p) for p in range(3))


class _Consumer:
    """The few calls Shards makes of an aiokafka consumer, recorded."""

    def __init__(self) -> None:
        self.positions: dict[TopicPartition, int] = {}
        self.paused: set[TopicPartition] = set()
        self.polls: list[tuple[TopicPartition, ...]] = []

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset

    def pause(self, tp: TopicPartition) -> None:
        self.paused.add(tp)

    def resume(self, tp: TopicPartition) -> None:
        self.paused.discard(tp)

    def assignment(self) -> set[TopicPartition]:
        return set(self.positions)

    async def getmany(self, *partitions: TopicPartition, **options: Any) -> dict[TopicPartition, list[object]]:
        self.polls.append(partitions)
        return {}


def test_a_partition_given_is_not_read_until_taken_over_and_one_revoked_is_owned_no_more():
    consumer = _Consumer()
    shards = Shards(consumer)  # type: ignore[arg-type]
    shards.assigned([P0, P1])
    assert shards.pending == {P0, P1}
    assert not shards.owned
    assert consumer.paused == {P0, P1}, "no fetch before the stored offset is known"
    shards.taken(P0, 7)
    assert shards.owned == {P0: 7}
    assert consumer.paused == {P1}
    shards.revoked([P0, P1])
    assert not shards.owned
    assert not shards.pending


def test_a_batch_is_written_at_the_generations_its_partitions_are_owned_at_and_0_for_one_not_owned():
    shards = Shards(_Consumer())  # type: ignore[arg-type]
    shards.assigned([P0])
    shards.taken(P0, 3)
    assert shards.generations([("jobs", 0), ("jobs", 2)]) == {("jobs", 0): 3, ("jobs", 2): 0}


def test_a_rebalance_during_a_takeover_is_seen_by_the_epoch():
    shards = Shards(_Consumer())  # type: ignore[arg-type]
    before = shards.epoch
    shards.revoked([P2])
    shards.assigned([P2])
    assert shards.epoch == before + 2


def test_a_dropped_partition_is_paused_and_owned_no_more():
    consumer = _Consumer()
    shards = Shards(consumer)  # type: ignore[arg-type]
    shards.assigned([P1])
    shards.taken(P1, 1)
    shards.drop(P1)
    assert not shards.owned
    assert P1 in consumer.paused


def test_in_a_group_a_partition_fenced_off_that_the_group_still_gives_is_taken_over_again():
    consumer = _Consumer()
    shards = Shards(consumer, grouped=True)  # type: ignore[arg-type]
    shards.assigned([P0, P1])
    shards.taken(P0, 1)
    shards.taken(P1, 1)
    shards.revoked([P1])  # the group moved P1 elsewhere; P0 stays this projector's
    del consumer.positions[P1]
    assert shards.fenced_off(P0) is True
    assert P0 in shards.pending, "taken over again before it is read"
    assert P0 in consumer.paused
    assert P0 not in shards.owned
    assert shards.fenced_off(P1) is False, "one the group gave another is dropped"


def test_alone_a_partition_fenced_off_is_dropped_even_though_assigned():
    """Without a group there is no one to say whose it is: the newer projector (a replacement started
    beside this one) keeps it, and this one never reads it again."""
    consumer = _Consumer()
    shards = Shards(consumer, [P0])  # type: ignore[arg-type]
    shards.taken(P0, 1)
    consumer.positions[P0] = 5  # assigned
    assert shards.fenced_off(P0) is False
    assert not shards.pending
    assert not shards.owned
    assert P0 in consumer.paused


def test_regression_a_projector_owning_no_partition_still_polls_so_it_stays_in_its_group():
    """It waited without polling: aiokafka put it out of its group at max_poll_interval_ms, and it never came
    back (bench (g)'s replica that had every partition fenced off)."""
    consumer = _Consumer()
    shards = Shards(consumer, grouped=True)  # type: ignore[arg-type]
    config = ProjectorConfig("p", "jobs", "nodes", timedelta(minutes=1), max_batch=10)
    projector = Projector(config, None, consumer, [], None, shards)  # type: ignore[arg-type]
    assert asyncio.run(projector._next_batch(asyncio.Event())) == {}
    assert consumer.polls == [()], "polled, for nothing"


def test_each_projector_consumer_has_a_sticky_assignor_of_its_own():
    """aiokafka's sticky assignor keeps the last assignment in class attributes: two consumers of one process
    sharing the class would report each other's partitions."""
    (first,) = group_options("g")["partition_assignment_strategy"]
    (second,) = group_options("g")["partition_assignment_strategy"]
    assert first is not second
    assert first.name == second.name == "sticky"
    assert group_options("g")["auto_offset_reset"] == "none", "positions come from PostgreSQL, never Kafka"
