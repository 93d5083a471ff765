"""The partitions a worker owns: their ledgers, and how far each is handled and committed.

On assignment each partition's tail, from where the group will resume it to
its end, is scanned into a fresh ledger before any of its records is acted
on (see :mod:`consumers.recovery`). A record's offset counts as handled only
once the worker is done with it (for a job: its attempt's terminal event is
acknowledged). Commits are batched: at most one per ``commit_interval_s``
while jobs keep coming, and at once when the consumer is idle, on revocation
and at shutdown. At zero synthesis time a commit per job was a quarter of the
worker's broker requests; committing later never re-synthesizes anything,
since a new owner's tail scan sees the jobs completed since.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping

import structlog
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import CommitFailedError, IllegalStateError
from aiokafka.structs import OffsetAndMetadata, TopicPartition

from consumers.ledger import Ledger
from consumers.recovery import scan_tails

log = structlog.get_logger("voxlog.worker")


class Partitions:
    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        bootstrap_servers: str,
        new_ledger: Callable[[], Ledger],
        commit_interval_s: float,
    ) -> None:
        self._consumer = consumer
        self._bootstrap = bootstrap_servers
        self._new_ledger = new_ledger
        self._interval = commit_interval_s
        self._ledgers: dict[TopicPartition, Ledger] = {}
        self._starts: dict[TopicPartition, int] = {}
        self._handled: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._next_commit = 0.0  # monotonic time from which a handled job commits again at once
        self.settled = asyncio.Event()  # set once the current assignment's tails are scanned

    async def assign(self, assigned: set[TopicPartition]) -> int:
        """Scan the tails of ``assigned`` into fresh ledgers; returns how many records were read."""
        starts: dict[TopicPartition, int] = {}
        beginnings = await self._consumer.beginning_offsets(list(assigned)) if assigned else {}
        for tp in assigned:
            committed = await self._consumer.committed(tp)
            # Where the consumer itself resumes (committed, else earliest). No seek here: a seek
            # inside the callback races aiokafka's own position reset and can leave a partition
            # never fetched again.
            starts[tp] = committed if committed is not None else beginnings[tp]
        ledgers, read = await scan_tails(self._bootstrap, starts, self._new_ledger)
        self.settle(starts, ledgers)
        return read

    def settle(self, starts: Mapping[TopicPartition, int], ledgers: Mapping[TopicPartition, Ledger]) -> None:
        """Adopt what a tail scan found: from now on these partitions' records are acted on."""
        self._ledgers.update(ledgers)
        self._starts = dict(starts)
        self.settled.set()

    async def revoke(self, revoked: set[TopicPartition]) -> None:
        """Commit what was handled in ``revoked``, then forget them."""
        self.settled.clear()
        await self.commit(revoked)
        for tp in revoked:
            self._ledgers.pop(tp, None)
            self._handled.pop(tp, None)
            self._committed.pop(tp, None)
            self._starts.pop(tp, None)

    def ledger_for(self, tp: TopicPartition, offset: int) -> Ledger | None:
        """The ledger of ``tp`` if the record at ``offset`` is this assignment's to act on.

        A batch can straddle a rebalance: only partitions whose tail this assignment scanned
        are ours, from where it started. A record seen twice is harmless (the ledger knows
        what it led to).
        """
        if offset < self._starts.get(tp, 0):
            return None
        return self._ledgers.get(tp)

    def handled(self, tp: TopicPartition, offset: int) -> None:
        """The record at ``offset`` is done with: the partition may be committed past it."""
        self._handled[tp] = offset + 1

    @property
    def commit_due(self) -> bool:
        return time.monotonic() >= self._next_commit

    async def commit(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Commit what was handled since the last commit (in ``partitions``, default: all assigned)."""
        chosen = self._consumer.assignment() if partitions is None else partitions
        offsets = {
            tp: OffsetAndMetadata(self._handled[tp], "")
            for tp in chosen
            if tp in self._handled and self._committed.get(tp) != self._handled[tp]
        }
        if not offsets:
            return
        try:
            await self._consumer.commit(offsets)
        except (CommitFailedError, IllegalStateError) as exc:
            log.warning("commit refused during a rebalance; the next owner re-reads the tail", error=str(exc))
            return
        for tp, meta in offsets.items():
            self._committed[tp] = meta.offset
        self._next_commit = time.monotonic() + self._interval
