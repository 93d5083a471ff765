"""The synthesis worker: a member of the synth consumer group, one job at a time.

Per record (see DESIGN.md, worker loop): records other than the ledger's
types are skipped by header, undecoded; ``JobQueued`` and ``JobReleased`` are
acted on unless the ledger shows the job already moved on; a live cached
result completes the job without synthesis; otherwise the job runs on the
synthesis thread while aiokafka keeps heartbeating, with max.poll.interval
sized to the longest job, so a long job never looks like a dead member. A
revocation waits for the record in hand (up to a grace period, then the job
is released at its next segment boundary). The offset is committed only
after the job's terminal event of this attempt is acknowledged, at most once
per commit interval while jobs keep coming.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, ConsumerRecord
from aiokafka.errors import CommitFailedError, IllegalStateError
from aiokafka.structs import OffsetAndMetadata, TopicPartition

from consumers.job_runner import JobRunner
from consumers.ledger import JobView, Ledger
from consumers.ports import ResultLookup
from consumers.recovery import LEDGER_TYPES, scan_tails
from contracts import (
    HEADER_TYPE,
    DecodeError,
    JobEvent,
    JobQueued,
    JobReleased,
    SynthesisRequest,
    decode_event,
    header_value,
    utc_now,
)
from contracts.events import ReleaseReason
from voxlog.lifecycle import wait_for_stop

log = structlog.get_logger("voxlog.worker")
T = TypeVar("T")
ACTIONABLE = frozenset({"JobQueued", "JobReleased"})
DeadLetter = Callable[[ConsumerRecord, str], Awaitable[object]]


class _Deferred(Exception):
    """The worker is stopping before it acted on a record: leave the record uncommitted."""


@dataclass(frozen=True)
class WorkerConfig:
    worker_id: str
    bootstrap_servers: str
    jobs_topic: str
    cache_ttl: timedelta
    shutdown_grace_s: float = 20.0
    rebalance_grace_s: float = 10.0
    request_wait_s: float = 30.0
    commit_interval_s: float = 1.0


class SynthWorker(ConsumerRebalanceListener):
    def __init__(
        self,
        config: WorkerConfig,
        consumer: AIOKafkaConsumer,
        runner: JobRunner,
        lookup: ResultLookup,
        dead_letter: DeadLetter,
    ) -> None:
        self.config = config
        self._consumer = consumer
        self._runner = runner
        self._lookup = lookup
        self._dead_letter = dead_letter
        self._ledgers: dict[TopicPartition, Ledger] = {}
        self._processed: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._next_commit = 0.0  # monotonic time from which a handled job commits again at once
        self._abort: ReleaseReason | None = None
        self._stop = asyncio.Event()
        self._handling = asyncio.Lock()
        self._settled = asyncio.Event()  # set once an assignment's tails are scanned
        self._starts: dict[TopicPartition, int] = {}

    # -- group membership ------------------------------------------------------
    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        # The record in hand is finished first (up to the grace period); records already fetched
        # for revoked partitions are skipped by the loop once their ledger is gone.
        self._settled.clear()
        try:
            await asyncio.wait_for(self._handling.acquire(), self.config.rebalance_grace_s)
        except TimeoutError:
            self._abort = "rebalance"  # give the job back at its next segment boundary
            await self._handling.acquire()
        try:
            await self._commit(revoked)
            for tp in revoked:
                self._ledgers.pop(tp, None)
                self._processed.pop(tp, None)
                self._committed.pop(tp, None)
                self._starts.pop(tp, None)
        finally:
            self._handling.release()

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        starts: dict[TopicPartition, int] = {}
        beginnings = await self._consumer.beginning_offsets(list(assigned)) if assigned else {}
        for tp in assigned:
            committed = await self._consumer.committed(tp)
            # Where the consumer itself resumes (committed, else earliest). No seek here: a seek
            # inside the callback races aiokafka's own position reset and can leave a partition
            # never fetched again.
            starts[tp] = committed if committed is not None else beginnings[tp]
        ledgers, read = await scan_tails(self.config.bootstrap_servers, starts, lambda: Ledger(self.config.cache_ttl))
        self._ledgers.update(ledgers)
        self._starts = starts
        self._settled.set()
        log.info("partitions assigned", partitions=len(assigned), tail_records=read)

    # -- main loop ----------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        self._stop = stop
        self._consumer.subscribe([self.config.jobs_topic], listener=self)
        while not stop.is_set():
            batch = await self._consumer.getmany(timeout_ms=500, max_records=100)
            for tp, records in batch.items():
                for record in records:
                    # aiokafka hands out records of a new assignment while its assignment callback
                    # (the tail scan) still runs: wait for the scan, or the record would be lost.
                    if not await self._assignment_settled(stop):
                        break
                    async with self._handling:
                        # A batch can straddle a rebalance. Only partitions whose tail this assignment
                        # scanned are ours, from where it started; a record seen twice is harmless
                        # (the ledger knows what it led to).
                        if tp not in self._ledgers or record.offset < self._starts.get(tp, 0):
                            continue
                        acted = await self._handle(tp, record)
                    if acted and time.monotonic() >= self._next_commit:
                        # Outside the lock: a commit waits for a pending rebalance, and the
                        # rebalance's revocation callback waits for the lock.
                        await self._commit(self._consumer.assignment())
            if not batch or time.monotonic() >= self._next_commit:
                await self._commit(self._consumer.assignment())
        await self._commit(self._consumer.assignment())

    async def _assignment_settled(self, stop: asyncio.Event) -> bool:
        """Wait until no rebalance is half done; ``False`` when stopping instead."""
        if not self._settled.is_set():
            waiters = {asyncio.ensure_future(self._settled.wait()), asyncio.ensure_future(stop.wait())}
            _, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            for waiter in pending:
                waiter.cancel()
        return not stop.is_set()

    async def _commit(self, partitions: set[TopicPartition]) -> None:
        """Commit what moved since the last commit.

        Commits are coalesced to one per ``commit_interval_s`` while jobs keep coming (and made
        at once when the consumer is idle, on revocation and at shutdown): at zero synthesis
        time a commit per job was a quarter of the worker's broker requests. Committing later
        never re-synthesizes anything: a new owner's tail scan sees the jobs completed since.
        """
        offsets = {
            tp: OffsetAndMetadata(self._processed[tp], "")
            for tp in partitions
            if tp in self._processed and self._committed.get(tp) != self._processed[tp]
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
        self._next_commit = time.monotonic() + self.config.commit_interval_s

    async def _handle(self, tp: TopicPartition, record: ConsumerRecord) -> bool:
        """Handle one record; returns whether a job was acted on (its offset is due for a commit)."""
        event_type = header_value(record.headers, HEADER_TYPE)
        acted = False
        if event_type in LEDGER_TYPES:
            try:
                event = decode_event(record.value)
            except DecodeError as exc:
                if event_type in ACTIONABLE:
                    await self._dead_letter(record, str(exc))
            else:
                try:
                    acted = await self._on_event(tp, event)
                except _Deferred:
                    return False  # stopping before anything was emitted: the next owner takes this record
        # Only now, with the attempt's terminal event acknowledged, may the offset move past it.
        self._processed[tp] = record.offset + 1
        return acted

    async def _on_event(self, tp: TopicPartition, event: JobEvent) -> bool:
        """Fold ``event`` into the ledger and act on it; returns whether a job was acted on."""
        ledger = self._ledgers[tp]
        view = ledger.observe(event)
        if isinstance(event, JobQueued) and view.state in {"queued", "claimed"}:
            # "claimed" here means a previous owner died mid-job: claim it again, one attempt higher.
            await self._act(tp, ledger, view)
            return True
        if isinstance(event, JobReleased) and view.state == "released" and view.attempt == event.payload.failed_attempt:
            if view.not_before is not None:
                delay = (view.not_before - utc_now()).total_seconds()
                if delay > 0:
                    await self._keepalive(wait_for_stop(self._stop, delay))
            await self._act(tp, ledger, view)
            return True
        return False

    async def _act(self, tp: TopicPartition, ledger: Ledger, view: JobView) -> None:
        if self._stop.is_set():
            raise _Deferred
        now = utc_now()
        cached = ledger.live_result(view.fingerprint, now) or await self._lookup.live_result(view.fingerprint, now)
        if cached is not None and cached.job_id != view.job_id:
            await self._runner.complete_from_cache(view, cached, ledger.observe)
            return
        request = view.request or await self._request_of(view)
        if request is None and self._stop.is_set():
            raise _Deferred
        if request is None:
            message = "the job's JobQueued is neither in this partition's tail nor in the projection"
            await self._runner.fail_without_attempt(view, "request_unavailable", message, ledger.observe)
            return
        try:
            await self._keepalive(self._runner.run(view, request, view.attempt + 1, self._abort_reason, ledger.observe))
        finally:
            self._abort = None

    async def _request_of(self, view: JobView) -> SynthesisRequest | None:
        deadline = time.monotonic() + self.config.request_wait_s
        while time.monotonic() < deadline:
            request = await self._lookup.request_of(view.job_id)
            if request is not None:
                return request
            if await wait_for_stop(self._stop, 0.5):
                break
        return None

    def _abort_reason(self) -> ReleaseReason | None:
        return self._abort

    async def _keepalive(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` as a task; on shutdown, give it the grace period, then abort it at a segment boundary.

        Membership stays alive without polling: aiokafka heartbeats from its own task, and
        the consumer's max.poll.interval is sized to the longest job (VOXLOG_MAX_JOB_S).
        Polling here instead would wait out any rebalance while holding the record in hand,
        which the rebalance's revocation callback waits for.
        """
        task: asyncio.Task[T] = asyncio.create_task(work)
        shutdown_deadline: float | None = None
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=1.0)
                if done:
                    return task.result()
                if self._stop.is_set():
                    shutdown_deadline = shutdown_deadline or time.monotonic() + self.config.shutdown_grace_s
                    if time.monotonic() >= shutdown_deadline:
                        self._abort = "shutdown"
        finally:
            if not task.done():
                task.cancel()
