"""How many copies of each record a Kafka cluster keeps, and how many a write waits for: one rule, by size.

The local nodes' properties (:mod:`infra.kafka_broker`) and the topics voxlog creates
(:mod:`voxlog.topics`) both follow it: three replicas once there are three brokers, two of them
in sync for a write with ``acks=all`` to be taken, and never an unclean leader election.
"""

from __future__ import annotations

from typing import Final

MAX_REPLICATION: Final = 3


def replication_factor(brokers: int) -> int:
    """Three copies where three brokers can hold them, else one on each broker there is."""
    return max(1, min(MAX_REPLICATION, brokers))


def min_insync_replicas(replication_factor: int) -> int:
    """The replicas a write with acks=all waits for: a majority from three on (3 -> 2, so one broker may be
    lost and the log still takes writes, each then on two brokers), else 1 (two replicas that both had to
    answer would make either broker's loss an outage for writes)."""
    return replication_factor // 2 + 1 if replication_factor >= MAX_REPLICATION else 1


def replication_properties(nodes: int) -> dict[str, str]:
    """A node's properties that the size of its cluster decides: the replication of the internal topics
    (consumer offsets, transactions, share-group state) and of topics created without one, their
    ``min.insync.replicas``, and no unclean leader election (a replica that missed acknowledged writes
    never becomes leader: the partition waits for one that has them)."""
    factor = replication_factor(nodes)
    min_isr = str(min_insync_replicas(factor))
    return {
        "default.replication.factor": str(factor),
        "min.insync.replicas": min_isr,
        "unclean.leader.election.enable": "false",
        "offsets.topic.replication.factor": str(factor),
        "transaction.state.log.replication.factor": str(factor),
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": str(factor),
        "share.coordinator.state.topic.min.isr": min_isr,
    }
