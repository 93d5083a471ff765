"""The projector: applies every event of the log to the Postgres read models.

It takes every partition of the jobs and control topics, or its share of them
when several projectors split them in a consumer group (projections.shards:
each takes its partitions over, which fences off their previous owner). Its
position lives in Postgres, not Kafka: it seeks each partition it takes over to
the ``projection_offsets`` row written by the last committed batch, so a
crash replays at most one uncommitted batch, which idempotent application
absorbs. Each batch of records, job and node events alike, is applied in one
read and one write together with the new offsets (projections.batch_apply),
folded by the one projection (projections.reducer). A record that cannot be
decoded, or that the tables refuse, is copied to the DLQ with the reason and
skipped. Each committed batch is a span in the trace of every job it made
visible (projections.batch_spans).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

import asyncpg
import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRecord
from aiokafka.errors import KafkaError, OffsetOutOfRangeError
from aiokafka.structs import TopicPartition

from contracts import DecodeError, JobEvent, NodeEvent, decode_event, decode_node_event
from foundation import tracing
from foundation.db import DATABASE_OUTAGES
from foundation.errors import BrokerUnavailable
from foundation.kafka import RecordPosition
from foundation.lifecycle import Stopped, wait_for_stop
from foundation.metrics import PROJECTOR_BATCH_RECORDS, PROJECTOR_BATCH_SECONDS, PROJECTOR_FENCED
from foundation.outages import Outage, until_available
from projections.batch_apply import Offsets, apply_events
from projections.batch_spans import record_batch_spans
from projections.errors import Fenced, ProjectionGap, SharedRowChanged
from projections.linger import NEVER, Linger, LiveJobs
from projections.observed import observe
from projections.reducer import Outcome
from projections.shards import Shards, Stand, stands, take_over

log = structlog.get_logger("voxlog.projector")

_OUTAGES: Final = (*DATABASE_OUTAGES, KafkaError, BrokerUnavailable)
_REFUSALS: Final = (asyncpg.IntegrityConstraintViolationError, asyncpg.DataError)
_Decoded = tuple[ConsumerRecord, JobEvent | NodeEvent]
DeadLetter = Callable[[ConsumerRecord, str], Awaitable[object]]
"""Port: keeps a record the projector cannot decode or apply, with the reason, and goes on."""
Gate = Callable[[list[TopicPartition]], Awaitable[None]]
"""Awaited between reading a batch's rows and writing it, with the batch's partitions: a test holds it to
stall a projector across a rebalance (the composition passes none)."""


@dataclass(frozen=True)
class ProjectorConfig:
    name: str
    jobs_topic: str
    control_topic: str
    cache_ttl: timedelta
    max_batch: int
    linger: Linger = NEVER
    """How long to wait between batches while jobs queue up (projections.linger); by default never."""
    changes_channel: str | None = None
    """Where to NOTIFY the jobs each committed batch changed (foundation.job_changes); None: nowhere."""


@contextlib.asynccontextmanager
async def _replaced_if_broken(conn: asyncpg.Connection) -> AsyncIterator[None]:
    """A connection whose protocol broke (PostgreSQL went away mid-operation) is closed, not pooled again:
    handed out once more, it failed the next batch's BEGIN and stopped the projector."""
    try:
        yield
    except asyncpg.InternalClientError:
        conn.terminate()
        raise


class Projector:
    def __init__(
        self,
        config: ProjectorConfig,
        pool: asyncpg.Pool,
        consumer: AIOKafkaConsumer,
        partitions: list[TopicPartition],
        dead_letter: DeadLetter,
        shards: Shards | None = None,
        gate: Gate | None = None,
    ) -> None:
        """Every partition of ``partitions``, or (with ``shards``, fed by a consumer group) its share."""
        self.config = config
        self._pool = pool
        self._consumer = consumer
        self.shards = shards or Shards(consumer, partitions)
        self._dead_letter = dead_letter
        self._gate = gate
        self.fenced = 0
        self.read_again = 0  # batches applied again since another shard changed a row they read
        self._fetches = Outage("Kafka (the projector's fetches)")
        self._batches = Outage("PostgreSQL or the dead-letter topic (the projector's batches)")
        self.applied = 0
        self.live = LiveJobs()

    async def run(self, stop: asyncio.Event) -> None:
        """Apply batches until ``stop`` is set.

        A batch that fails (PostgreSQL down, the DLQ unreachable) is applied again from the stored
        offsets once the outage is over: the projector waits it out, it never exits for it.
        """
        try:
            await self._resume(stop)
            while not stop.is_set():
                batch = await self._next_batch(stop)
                if not batch:
                    continue
                try:
                    await self.apply_batch(batch)
                except Fenced as exc:
                    self._was_fenced(exc)
                    await self._resume(stop)
                except _OUTAGES as exc:
                    # Applied again from the stored offsets, once they can be read: one outage, said once.
                    await wait_for_stop(stop, self._batches.failed(exc, then="applied again from the stored offsets"))
                    await self._resume(stop, self._batches)
                else:
                    self._batches.recovered()
                    if linger_s := self.live.linger_s(self.config.linger):
                        await wait_for_stop(stop, linger_s)  # the next batch gathers what comes meanwhile
        except Stopped:
            return

    async def _next_batch(self, stop: asyncio.Event) -> dict[TopicPartition, list[ConsumerRecord]]:
        """The next records of the partitions this projector owns, once those it was given are taken over."""
        if self.shards.pending:
            await self._resume(stop)
        owned = list(self.shards.owned)
        try:
            # Polled even with no partition owned (none given yet, a group's member past its share, every one
            # fenced off): what is not owned is paused, so nothing comes, but without a poll for
            # max_poll_interval_ms aiokafka leaves the group, and rejoins only at the next poll, and a member
            # that is not polled hears of no rebalance.
            batch = await self._consumer.getmany(*owned, timeout_ms=500, max_records=self.config.max_batch)
        except OffsetOutOfRangeError as exc:  # retention deleted records this projector had not read
            raise ProjectionGap(f"the jobs log lost records this projector had not applied: {exc}") from exc
        except KafkaError as exc:
            await wait_for_stop(stop, self._fetches.failed(exc))
            return {}
        self._fetches.recovered()
        # Only what is still this projector's: a rebalance may have taken a partition meanwhile.
        return {tp: records for tp, records in batch.items() if tp in self.shards.owned}

    def _was_fenced(self, exc: Fenced) -> None:
        self.fenced += 1
        PROJECTOR_FENCED.inc()
        log.warning(
            "a newer projector took over a partition of this batch: the batch was refused, and the partitions no"
            " longer this projector's are dropped",
            name=self.config.name,
            partitions=[f"{topic}[{partition}]" for topic, partition in exc.partitions],
        )

    async def _resume(self, stop: asyncio.Event, outage: Outage | None = None) -> None:
        await until_available(
            "PostgreSQL (the projector's offsets)", self._seek_to_stored_offsets, stop, _OUTAGES, outage
        )

    async def _seek_to_stored_offsets(self) -> None:
        """Seek every owned partition to its stored offset, dropping those a newer projector took over since,
        then take over the pending ones and seek them to theirs."""
        owned, pending, epoch = dict(self.shards.owned), list(self.shards.pending), self.shards.epoch
        async with self._pool.acquire() as conn:
            stored = await stands(conn, self.config.name, owned) if owned else {}
            if pending:
                beginnings = await self._consumer.beginning_offsets(pending)
                starts = {tp: beginnings[tp] for tp in pending}
                taken = await take_over(conn, self.config.name, starts, unless=lambda: self.shards.epoch != epoch)
            else:
                taken = {}
        for tp, generation in owned.items():
            stand = stored.get(tp)
            if stand is None or stand.generation != generation:
                taken_back = self.shards.fenced_off(tp)
                log.warning(
                    "took back a partition a stale takeover fenced off: the group still gives it to this projector"
                    if taken_back
                    else "dropped a partition a newer projector took over",
                    partition=f"{tp.topic}[{tp.partition}]",
                )
        kept = {tp: stored[tp] for tp in self.shards.owned if tp in owned}
        await self._seek({**kept, **taken})
        if self.shards.epoch != epoch:
            return  # a rebalance came while the takeover was on its way: what is still pending is taken over again
        for tp, stand in taken.items():
            self.shards.taken(tp, stand.generation)
        if taken:
            log.info("took over partitions", name=self.config.name, partitions=len(taken), owned=len(self.shards.owned))

    async def _seek(self, positions: dict[TopicPartition, Stand]) -> None:
        if not positions:
            return
        tps = list(positions)
        # Explicit offsets for every partition: nothing is left to the consumer's reset policy.
        beginnings = await self._consumer.beginning_offsets(tps)
        ends = await self._consumer.end_offsets(tps)
        for tp in tps:
            position = positions[tp].next_offset
            if tp.topic == self.config.jobs_topic and not beginnings[tp] <= position <= ends[tp]:
                raise ProjectionGap(
                    f"projector {self.config.name!r} stopped at offset {position} of {tp.topic}[{tp.partition}], "
                    f"but that partition now holds offsets {beginnings[tp]} to {ends[tp]}: records it never "
                    "applied are gone (retention, or the topic was recreated), so going on would silently skip "
                    "them. Rebuild the projection into a fresh schema, or point the projector at the right topic."
                )
            if tp in self._consumer.assignment():
                self._consumer.seek(tp, position)

    async def apply_batch(self, batch: dict[TopicPartition, list[ConsumerRecord]]) -> None:
        """Apply ``batch`` with the offsets past it, set-based in one write; when the tables refuse something
        in it, record by record (each a batch of its own), so that only that record is dead-lettered."""
        started, started_ns = time.monotonic(), tracing.now_ns()
        decoded: list[_Decoded] = []
        for records in batch.values():
            for record in records:
                try:
                    if record.topic == self.config.control_topic:
                        decoded.append((record, decode_node_event(record.value)))
                    else:
                        decoded.append((record, decode_event(record.value)))
                except DecodeError as exc:
                    await self._reject(record, str(exc))
        past_the_batch = {(tp.topic, tp.partition): records[-1].offset + 1 for tp, records in batch.items()}
        # The generations the batch was read under: a takeover since then (even this projector's own, after a
        # rebalance gave a partition back) refuses it.
        generations = self.shards.generations(past_the_batch)
        try:
            seen = await self._write(decoded, past_the_batch, generations, self._gate)
        except _REFUSALS as exc:
            log.info("the tables refused a record; applying its batch record by record", error=str(exc))
            seen = await self._one_by_one(decoded, past_the_batch, generations)
        # Counted once the batch is committed: a batch applied again after a failure counts once.
        PROJECTOR_BATCH_SECONDS.observe(time.monotonic() - started)
        PROJECTOR_BATCH_RECORDS.observe(sum(len(records) for records in batch.values()))
        observe(seen)
        self.live.observe(seen)
        record_batch_spans(self.config.name, decoded, started_ns)

    async def _write(
        self,
        decoded: list[_Decoded],
        past: dict[tuple[str, int], int],
        generations: dict[tuple[str, int], int],
        gate: Gate | None = None,
    ) -> list[tuple[JobEvent, Outcome]]:
        """Apply ``decoded`` and move the offsets to ``past`` in one read and one write, or not at all
        (projections.batch_apply); no transaction round trips. Refused whole (:class:`Fenced`) when a partition
        was taken over since it was read at ``generations``."""
        events = [(event, RecordPosition(r.topic, r.partition, r.offset)) for r, event in decoded]
        offsets = Offsets(self.config.name, past, {tp: generations[tp] for tp in past})
        before_write = (lambda: gate([TopicPartition(*tp) for tp in past])) if gate is not None else None
        while True:
            try:
                async with self._pool.acquire() as conn, _replaced_if_broken(conn):
                    seen = await apply_events(
                        conn, events, self.config.cache_ttl, offsets, self.config.changes_channel, before_write
                    )
                break
            except SharedRowChanged as exc:  # another shard changed a row of it: read again, fold again
                self.read_again += 1
                log.info("applying a batch again from a fresh read", name=self.config.name, reason=str(exc))
        self.applied += len(decoded)
        return seen

    async def _one_by_one(
        self,
        decoded: list[_Decoded],
        past_the_batch: dict[tuple[str, int], int],
        generations: dict[tuple[str, int], int] | None = None,
    ) -> list[tuple[JobEvent, Outcome]]:
        """Each record lands with the offset past it, or is dead-lettered and passed: a crash in between
        leaves the stored offsets where the applied records end, so none is applied twice or lost."""
        if generations is None:
            generations = self.shards.generations(past_the_batch)
        seen: list[tuple[JobEvent, Outcome]] = []
        for record, event in decoded:
            past = {(record.topic, record.partition): record.offset + 1}
            try:
                seen += await self._write([(record, event)], past, generations)
            except _REFUSALS as exc:
                await self._reject(record, f"cannot apply: {exc}")
                await self._write([], past, generations)
        await self._write([], past_the_batch, generations)  # past the records at the batch's end that did not decode
        return seen

    async def _reject(self, record: ConsumerRecord, reason: str) -> None:
        log.warning(
            "dead-lettered a record",
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            reason=reason,
        )
        await self._dead_letter(record, reason)
