"""The synthesis worker: a member of the synth consumer group, one job at a time.

Per record: records other than the status-changing types are skipped by
header, undecoded; ``JobQueued`` and ``JobReleased`` are acted on unless the
ledger shows the job already moved on; a live result of the same fingerprint
completes the job without synthesis (see :mod:`consumers.coalescing`);
otherwise the job runs on the synthesis thread while aiokafka keeps
heartbeating, with max.poll.interval sized to the longest job, so a long job
never looks like a dead member. A
revocation waits for the record in hand (up to a grace period, then the job
is released at its next segment boundary). Offsets and their batched commits
are :class:`consumers.partitions.Partitions`' business.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final, TypeVar

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, ConsumerRecord
from aiokafka.structs import TopicPartition

from consumers.coalescing import reusable_result
from consumers.job_runner import Attempt, JobRunner
from consumers.ledger import JobView, Ledger
from consumers.partitions import Partitions
from consumers.ports import DeadLetter, ResultLookup
from consumers.recovery import LEDGER_TYPES
from contracts import (
    HEADER_TYPE,
    DecodeError,
    JobEvent,
    JobQueued,
    JobReleased,
    JobState,
    SynthesisRequest,
    decode_event,
    header_value,
    type_name,
    utc_now,
)
from contracts.events import ReleaseReason
from foundation.lifecycle import wait_for_stop

log = structlog.get_logger("voxlog.worker")
T = TypeVar("T")
ACTIONABLE: Final = frozenset({type_name(JobQueued), type_name(JobReleased)})
REQUEST_WAIT_S: Final = 30.0  # how long a job whose JobQueued is not in the tail waits for the projection


class _Deferred(Exception):
    """The worker is stopping before it acted on a record: leave the record uncommitted."""


@dataclass(frozen=True)
class WorkerConfig:
    worker_id: str
    bootstrap_servers: str
    jobs_topic: str
    cache_ttl: timedelta
    shutdown_grace_s: float
    rebalance_grace_s: float
    commit_interval_s: float
    request_wait_s: float = REQUEST_WAIT_S


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
        self.partitions = Partitions(
            consumer, config.bootstrap_servers, lambda: Ledger(config.cache_ttl), config.commit_interval_s
        )
        self._abort: ReleaseReason | None = None  # why to give back the job of the record in hand
        self._stop = asyncio.Event()
        self._handling = asyncio.Lock()

    # -- group membership ------------------------------------------------------
    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        # The record in hand is finished first (up to the grace period); records already fetched
        # for revoked partitions are skipped by the loop once their ledger is gone.
        self.partitions.settled.clear()
        try:
            await asyncio.wait_for(self._handling.acquire(), self.config.rebalance_grace_s)
        except TimeoutError:
            self._abort = "rebalance"  # give the job back at its next segment boundary
            await self._handling.acquire()
        try:
            await self.partitions.revoke(revoked)
        finally:
            self._handling.release()

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        read = await self.partitions.assign(assigned)
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
                        ledger = self.partitions.ledger_for(tp, record.offset)
                        if ledger is None:
                            continue
                        try:
                            acted = await self._handle(tp, ledger, record)
                        finally:
                            self._abort = None  # an abort is meant for the record in hand only
                    if acted and self.partitions.commit_due:
                        # Outside the lock: a commit waits for a pending rebalance, and the
                        # rebalance's revocation callback waits for the lock.
                        await self.partitions.commit()
            if not batch or self.partitions.commit_due:
                await self.partitions.commit()
        await self.partitions.commit()

    async def _assignment_settled(self, stop: asyncio.Event) -> bool:
        """Wait until no rebalance is half done; ``False`` when stopping instead."""
        if not self.partitions.settled.is_set():
            waiters = {asyncio.ensure_future(self.partitions.settled.wait()), asyncio.ensure_future(stop.wait())}
            _, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            for waiter in pending:
                waiter.cancel()
        return not stop.is_set()

    async def _handle(self, tp: TopicPartition, ledger: Ledger, record: ConsumerRecord) -> bool:
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
                    acted = await self._on_event(ledger, event)
                except _Deferred:
                    return False  # stopping before anything was emitted: the next owner takes this record
        # Only now, with the attempt's terminal event acknowledged, may the offset move past it.
        self.partitions.handled(tp, record.offset)
        return acted

    async def _on_event(self, ledger: Ledger, event: JobEvent) -> bool:
        """Fold ``event`` into the ledger and act on it; returns whether a job was acted on."""
        view = ledger.observe(event)
        if isinstance(event, JobQueued) and view.state in {JobState.QUEUED, JobState.CLAIMED}:
            # "claimed" here means a previous owner died mid-job: claim it again, one attempt higher.
            await self._act(ledger, view)
            return True
        if (
            isinstance(event, JobReleased)
            and view.state is JobState.RELEASED
            and view.attempt == event.payload.failed_attempt
        ):
            if view.not_before is not None:
                delay = (view.not_before - utc_now()).total_seconds()
                if delay > 0:
                    await self._keepalive(wait_for_stop(self._stop, delay))
            await self._act(ledger, view)
            return True
        return False

    async def _act(self, ledger: Ledger, view: JobView) -> None:
        if self._stop.is_set():
            raise _Deferred
        cached = await reusable_result(view, ledger, self._lookup, utc_now())
        if cached is not None:
            await self._runner.complete_from_cache(view, cached, ledger.observe)
            return
        request = view.request or await self._request_of(view)
        if request is None and self._stop.is_set():
            raise _Deferred
        if request is None:
            message = "the job's JobQueued is neither in this partition's tail nor in the projection"
            await self._runner.fail_without_attempt(view, "request_unavailable", message, ledger.observe)
            return
        attempt = Attempt(view, request, view.attempt + 1, ledger.observe, self._abort_reason)
        await self._keepalive(self._runner.run(attempt))

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
