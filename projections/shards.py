"""Projector shards: which partitions of the log this projector owns, and the fence that keeps it to them.

Several projectors may split the partitions of the jobs and control topics
among themselves (``VOXLOG_PROJECTOR_GROUP``: a Kafka consumer group), or one
projector takes them all (the default, no group). Either way the positions
stay in PostgreSQL, in ``projection_offsets``, moved by each batch's own
statement (projections.batch_apply); Kafka's committed offsets are never
used.

**Owning a partition.** A projector given a partition *takes it over*: one
statement bumps the partition's ``generation`` and returns where to resume
(its stored offset). Every batch moves a partition's offset only where the
generation is still the one its projector took it over at, and refuses the whole
statement otherwise (:class:`projections.errors.Fenced`), so a projector
that lost a partition in a rebalance it slept through (a long GC, a stopped
process, a batch held up) can never write a batch for it afterwards: the new
owner's takeover fenced it off, and the new owner resumes from what the old one
last committed. Once fenced, the projector drops every partition whose
stored generation is no longer its own and goes on with the rest.

**Rebalancing.** aiokafka (0.14) speaks only the classic, *eager* group
protocol: no cooperative-sticky assignor, no incremental rebalance (KIP-429).
So the group uses the sticky assignor (partitions stay where they were when
the members change, as far as balance allows), but every rebalance still
revokes every partition of every member first and assigns them all again:
each member takes its whole share over again and re-reads its positions. What
differs from cooperative rebalancing is that the partitions that do not move
stop too, for the length of the rebalance (a member's next heartbeat plus a
join and sync round trip). A batch in flight across it lands if its
partitions stayed (the projector takes its share over again only after the
batch in hand), and is refused if one moved and its new owner took it over
first (read again by the owner from the stored offsets: at most a batch's
work wasted). Cooperative would
revoke only the partitions that move, in a second round; correctness is the
fence's either way, not the protocol's.

**What the shards share.** A job's events share its partition and the nodes
topic has one partition, so the rows a batch reads and writes are its
partitions' own, with one exception: ``result_cache``, by fingerprint, when
two jobs of one fingerprint sit in different partitions (its placement
expired between them, or PostgreSQL was down when the second was placed).
A batch writes such a row only at the version it read
(projections.shared_rows), and is applied again from a fresh read otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from aiokafka.structs import TopicPartition


@dataclass(frozen=True)
class Stand:
    """Where a partition's projection stands: the next offset to apply, and its owner's generation."""

    next_offset: int
    generation: int


class _Overtaken(Exception):
    """Rolls a takeover back: a rebalance came while it was on its way."""


async def take_over(
    conn: asyncpg.Connection,
    consumer: str,
    starts: Mapping[TopicPartition, int],
    unless: Callable[[], bool] = lambda: False,
) -> dict[TopicPartition, Stand]:
    """Take the partitions of ``starts`` for projector ``consumer``: bump each one's generation (fencing off
    whoever held it) and return where each resumes; a partition never projected starts at its ``starts``
    offset (the first the log still holds).

    Nothing is taken (and {} returned) if ``unless()`` holds once the statement is done: a rebalance came while
    it waited (for a lock, say). Rolled back, it fences off no member the rebalance gave the partitions to; the
    projector takes what is still its own over again. (A rebalance during the commit itself still fences the new
    owner off, which takes the partition back: :meth:`Shards.fenced_off`.)"""
    tps = list(starts)
    try:
        async with conn.transaction():
            rows = await conn.fetch(
                "INSERT INTO projection_offsets (consumer, topic, partition, next_offset, generation)"
                " SELECT $1, *, 1 FROM unnest($2::text[], $3::integer[], $4::bigint[])"
                " ON CONFLICT (consumer, topic, partition) DO UPDATE SET generation = projection_offsets.generation + 1"
                " RETURNING topic, partition, next_offset, generation",
                consumer,
                [tp.topic for tp in tps],
                [tp.partition for tp in tps],
                [starts[tp] for tp in tps],
            )
            if unless():
                raise _Overtaken
    except _Overtaken:
        return {}
    return _stands(rows)


async def stands(
    conn: asyncpg.Connection, consumer: str, tps: Collection[TopicPartition]
) -> dict[TopicPartition, Stand]:
    """Where each of ``tps`` stands now, for projector ``consumer`` (a partition without a row is left out)."""
    rows = await conn.fetch(
        "SELECT topic, partition, next_offset, generation FROM projection_offsets"
        " WHERE consumer = $1 AND (topic, partition) IN (SELECT * FROM unnest($2::text[], $3::integer[]))",
        consumer,
        [tp.topic for tp in tps],
        [tp.partition for tp in tps],
    )
    return _stands(rows)


def _stands(rows: list[asyncpg.Record]) -> dict[TopicPartition, Stand]:
    return {TopicPartition(r["topic"], r["partition"]): Stand(r["next_offset"], r["generation"]) for r in rows}


class Shards:
    """The partitions this projector owns (each with the generation it took it over at) and those it was
    given and has yet to take over. Changed by the group's rebalances (:class:`ShardListener`) between the projector's
    batches or during one; the projector takes over what is pending before it reads again."""

    def __init__(
        self, consumer: AIOKafkaConsumer, given: Collection[TopicPartition] = (), *, grouped: bool = False
    ) -> None:
        """``given``: the partitions of a projector alone; ``grouped``: its partitions come from a group."""
        self._consumer = consumer
        self._grouped = grouped
        self.owned: dict[TopicPartition, int] = {}
        self.pending: set[TopicPartition] = set(given)
        self.epoch = 0
        """Counts the rebalances seen: a takeover under way when one came is not trusted, and made again."""

    def assigned(self, tps: Collection[TopicPartition]) -> None:
        """The group gave this projector ``tps``: none is read until it is taken over. A placeholder position
        keeps the consumer from looking for one in Kafka (it has none: auto_offset_reset is none), and a
        pause from fetching at it; the takeover seeks to the stored offset and resumes."""
        for tp in tps:
            self._consumer.seek(tp, 0)
            self._consumer.pause(tp)
        self.pending |= set(tps)
        self.epoch += 1

    def revoked(self, tps: Collection[TopicPartition]) -> None:
        """The group took ``tps`` back: a batch of them in flight lands only if it commits before the next
        owner's takeover, which then resumes after it; after that, it is fenced off."""
        for tp in tps:
            self.owned.pop(tp, None)
            self.pending.discard(tp)
        self.epoch += 1

    def taken(self, tp: TopicPartition, generation: int) -> None:
        self.pending.discard(tp)
        self.owned[tp] = generation
        self._consumer.resume(tp)

    def fenced_off(self, tp: TopicPartition) -> bool:
        """A takeover newer than this projector's fenced it off ``tp``. Alone, the newer projector has it:
        dropped (False). In a group, the group's assignment says who has it, and if the group still gives it
        to this projector, the takeover was a stale one: made by a member for what it was given before a
        rebalance and ended after it (its member knows of the rebalance and keeps nothing of it). Dropped, the
        partition would be read by no one until the next rebalance, so it is taken over again (True); a member
        that lost it in a rebalance it has not heard of yet does so at most until its next heartbeat."""
        self.drop(tp)
        if self._grouped and tp in self._consumer.assignment():
            self.pending.add(tp)  # paused by drop() until taken over
            return True
        return False

    def drop(self, tp: TopicPartition) -> None:
        """A newer owner took ``tp`` over: never read it again, until the group gives it back."""
        self.owned.pop(tp, None)
        if tp in self._consumer.assignment():
            self._consumer.pause(tp)

    def generations(self, tps: Collection[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The generation each of ``tps`` (topic, partition) is owned at; 0 for one not owned (fenced off by
        any takeover)."""
        return {tp: self.owned.get(TopicPartition(*tp), 0) for tp in tps}


class ShardListener(ConsumerRebalanceListener):
    """Tells :class:`Shards` what each rebalance of the group revoked and assigned. Neither waits for the batch
    in flight: the fence makes it safe to go on, and the group need not wait for a batch held up."""

    def __init__(self, shards: Shards) -> None:
        self._shards = shards

    async def on_partitions_revoked(self, revoked: Collection[TopicPartition]) -> None:
        self._shards.revoked(revoked)

    async def on_partitions_assigned(self, assigned: Collection[TopicPartition]) -> None:
        self._shards.assigned(assigned)


def _sticky() -> type[StickyPartitionAssignor]:
    """aiokafka's sticky assignor keeps the member's last assignment in class attributes: a class of its own
    per consumer, so that two consumers of one process (the tests' replicas) never report each other's."""
    return type("ProjectorStickyAssignor", (StickyPartitionAssignor,), {})


def group_options(group: str) -> dict[str, Any]:
    """The aiokafka consumer options of a projector in ``group``: no offsets in Kafka, the sticky assignor."""
    return {
        "group_id": group,
        "enable_auto_commit": False,
        "auto_offset_reset": "none",
        "partition_assignment_strategy": (_sticky(),),
        # Every partition waits while the group rebalances, until each member heard of it at its next
        # heartbeat: every second, not aiokafka's three.
        "heartbeat_interval_ms": 1000,
    }
