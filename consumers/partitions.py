"""The partitions a worker owns: their ledgers, and how far each is handled and committed.

On assignment each partition's tail, from where the group will resume it to
its end, is scanned into a fresh ledger before any of its records is acted
on (see :mod:`consumers.recovery`). The assignment callback only notes the
new partitions; the worker's loop does the scan, retrying while Kafka is
unreachable, so a broker error can neither fail the callback nor leave the
worker waiting for a scan nobody runs.

A record's offset counts as handled once the worker is done with it. A
record whose job is not done with yet (it waits for a retry or for its turn
as a batch job, or its completion for Kafka's acknowledgement) is *deferred*:
the partition is not committed past it until it is *resolved*, so a new
owner reads it again. Commits are batched: at most
one per ``commit_interval_s`` while jobs keep coming, and at once when the
consumer is idle, on revocation and at shutdown. At zero synthesis time a
commit per job was a quarter of the worker's broker requests; committing
later never re-synthesizes anything, since a new owner's tail scan sees the
jobs completed since.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping

import structlog
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from aiokafka.structs import OffsetAndMetadata, TopicPartition

from consumers.ledger import Ledger
from foundation.lifecycle import Stopped
from foundation.outages import until_available

log = structlog.get_logger("voxlog.worker")


TailScanner = Callable[[Mapping[TopicPartition, int]], Awaitable[tuple[dict[TopicPartition, Ledger], int]]]
"""Reads each partition from its start offset to its end into a fresh ledger (``consumers.recovery.scan_tails``)."""


class Partitions:
    def __init__(self, consumer: AIOKafkaConsumer, scan_tails: TailScanner, commit_interval_s: float) -> None:
        self._consumer = consumer
        self._scan_tails = scan_tails
        self._interval = commit_interval_s
        self._ledgers: dict[TopicPartition, Ledger] = {}
        self._starts: dict[TopicPartition, int] = {}
        self._pending: set[TopicPartition] = set()  # assigned, tails not scanned yet
        self._handled: dict[TopicPartition, int] = {}
        self._deferred: dict[TopicPartition, set[int]] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._next_commit = 0.0  # monotonic time from which a handled job commits again at once
        self.scanned = asyncio.Event()  # set once every assigned partition's tail is scanned
        self._assigned = asyncio.Event()  # a new assignment arrived

    # -- assignment -----------------------------------------------------------
    def assigned(self, assigned: set[TopicPartition]) -> None:
        """The group gave this worker ``assigned``: their tails are scanned before their records are acted on."""
        self._pending |= assigned
        if self._pending:
            self.scanned.clear()
        else:
            self.scanned.set()
        self._assigned.set()

    async def ensure_scanned(self, stop: asyncio.Event) -> bool:
        """Scan what is pending (waiting out a broker outage); ``False`` when stopping instead."""
        try:
            while not self.scanned.is_set():
                if self._pending:
                    await until_available(
                        "Kafka (the tails of new partitions)", self._scan, stop, (KafkaError, OSError)
                    )
                    continue
                self._assigned.clear()
                waiters = {asyncio.ensure_future(e.wait()) for e in (self._assigned, self.scanned, stop)}
                _, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                for waiter in pending:
                    waiter.cancel()
                if stop.is_set():
                    return False
        except Stopped:
            return False
        return not stop.is_set()

    async def _scan(self) -> None:
        scanning = set(self._pending)
        beginnings = await self._consumer.beginning_offsets(list(scanning))
        starts: dict[TopicPartition, int] = {}
        for tp in scanning:
            committed = await self._consumer.committed(tp)
            # Where the consumer itself resumes (committed, else earliest). No seek here: a seek
            # races aiokafka's own position reset and can leave a partition never fetched again.
            starts[tp] = committed if committed is not None else beginnings[tp]
        ledgers, read = await self._scan_tails(starts)
        kept = scanning & self._pending  # a revocation during the scan took the others away
        self.adopt({tp: starts[tp] for tp in kept}, {tp: ledgers[tp] for tp in kept})
        log.info("partitions assigned", partitions=len(kept), tail_records=read)

    def adopt(self, starts: Mapping[TopicPartition, int], ledgers: Mapping[TopicPartition, Ledger]) -> None:
        """Take what a tail scan found: from now on these partitions' records are acted on."""
        for tp, ledger in ledgers.items():
            ledger.place(tp.partition)
        self._ledgers.update(ledgers)
        self._starts.update(starts)
        for tp, start in starts.items():  # read from its commit (or its beginning): nothing to commit there
            self._committed.setdefault(tp, start)
        self._pending -= set(starts)
        if not self._pending:
            self.scanned.set()

    async def revoke(self, revoked: set[TopicPartition]) -> None:
        """Commit what was handled in ``revoked``, then forget them."""
        self.scanned.clear()
        self._pending -= revoked
        await self.commit(revoked)
        for tp in revoked:
            for table in (self._ledgers, self._handled, self._committed, self._starts, self._deferred):
                table.pop(tp, None)

    # -- records ----------------------------------------------------------------
    def ledger_for(self, tp: TopicPartition, offset: int) -> Ledger | None:
        """The ledger of ``tp`` if the record at ``offset`` is this assignment's to act on.

        A batch can straddle a rebalance: only partitions whose tail this assignment scanned
        are ours, from where it started. A record seen twice is harmless (the ledger knows
        what it led to).
        """
        if offset < self._starts.get(tp, 0):
            return None
        return self._ledgers.get(tp)

    def start_of(self, tp: TopicPartition) -> int:
        """Where this assignment's scan of ``tp`` began (what lies before it, the ledger never saw)."""
        return self._starts.get(tp, 0)

    def handled(self, tp: TopicPartition, offset: int) -> None:
        """The record at ``offset`` is done with: the partition may be committed past it."""
        self._handled[tp] = offset + 1

    def defer(self, tp: TopicPartition, offset: int) -> None:
        """The job of the record at ``offset`` is not done with yet: no commit passes it until :meth:`resolve`."""
        self._deferred.setdefault(tp, set()).add(offset)

    def resolve(self, tp: TopicPartition, offset: int) -> None:
        """The deferred record at ``offset`` is done with: commits may pass it."""
        self._deferred.get(tp, set()).discard(offset)

    def _position(self, tp: TopicPartition) -> int | None:
        deferred = self._deferred.get(tp)
        if deferred:
            return min(deferred)
        return self._handled.get(tp)

    # -- commits ------------------------------------------------------------------
    def describe_uncommitted(self) -> str | None:
        """What stopping now would leave uncommitted (``None``: nothing)."""
        behind = [tp for tp in self._ledgers if (p := self._position(tp)) is not None and self._committed.get(tp) != p]
        if not behind:
            return None
        return f"{len(behind)} partition(s) not committed past what was handled (their next owner reads it again)"

    @property
    def commit_due(self) -> bool:
        return time.monotonic() >= self._next_commit

    async def commit(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Commit what was handled since the last commit (in ``partitions``, default: all assigned).

        A commit Kafka refuses (a rebalance, an outage) is left for the next one: a later commit
        only means a longer tail for the next owner to read.
        """
        chosen = self._consumer.assignment() if partitions is None else partitions
        offsets = {}
        for tp in chosen:
            position = self._position(tp)
            if position is not None and self._committed.get(tp) != position:
                offsets[tp] = OffsetAndMetadata(position, "")
        if not offsets:
            return
        try:
            await self._consumer.commit(offsets)
        except KafkaError as exc:
            log.warning("commit refused; it is made again later", error=f"{type(exc).__name__}: {exc}")
            return
        for tp, meta in offsets.items():
            self._committed[tp] = meta.offset
        self._next_commit = time.monotonic() + self._interval
