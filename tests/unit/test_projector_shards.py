"""projections.shards' bookkeeping: what a rebalance gives and takes, and the generations a batch is read at."""

from __future__ import annotations

from aiokafka.structs import TopicPartition

from projections.shards import Shards, group_options

P0, P1, P2 = (TopicPartition("jobs", p) for p in range(3))


class _Consumer:
    """The few calls Shards makes of an aiokafka consumer, recorded."""

    def __init__(self) -> None:
        self.positions: dict[TopicPartition, int] = {}
        self.paused: set[TopicPartition] = set()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset

    def pause(self, tp: TopicPartition) -> None:
        self.paused.add(tp)

    def resume(self, tp: TopicPartition) -> None:
        self.paused.discard(tp)

    def assignment(self) -> set[TopicPartition]:
        return set(self.positions)


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


def test_each_projector_consumer_has_a_sticky_assignor_of_its_own():
    """aiokafka's sticky assignor keeps the last assignment in class attributes: two consumers of one process
    sharing the class would report each other's partitions."""
    (first,) = group_options("g")["partition_assignment_strategy"]
    (second,) = group_options("g")["partition_assignment_strategy"]
    assert first is not second
    assert first.name == second.name == "sticky"
    assert group_options("g")["auto_offset_reset"] == "none", "positions come from PostgreSQL, never Kafka"
