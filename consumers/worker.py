"""The synthesis worker: a member of the synth consumer group, one job at a time.

Per record: records other than the status-changing types are skipped by
header, undecoded; ``JobQueued`` and ``JobReleased`` are acted on unless the
ledger shows the job already moved on; a live result of the same fingerprint
completes the job without synthesis (see :mod:`consumers.coalescing`);
otherwise the job runs on the synthesis thread while aiokafka keeps
heartbeating. A released job waits for its retry in a due-time queue
(:mod:`consumers.retries`) while the records behind it are handled.

Polled records wait in a backlog. The worker polls again after at most
``POLL_BUDGET_S`` of handling, so the time between polls is one job plus
that budget, whatever a poll returned; max.poll.interval is sized to that. A
revocation waits for the record in hand (up to a grace period, then the job
is released at its next segment boundary). When Kafka cannot take an event,
the record stays at the head of the backlog and is handled again after a
backoff: whatever the attempt had published is in the ledger, and the next
try claims the job one attempt higher. Offsets and their batched commits are
:class:`consumers.partitions.Partitions`' business.

The runner (:mod:`consumers.job_runner`) returns what an attempt did
(:mod:`consumers.attempts`); only the worker defers, resolves and commits
records. A completion is not waited for: the next job goes on while Kafka
acknowledges it, the job's record deferred meanwhile. The worker waits for
the acknowledgements (:mod:`consumers.acknowledgements`) before any commit,
before it looks at a duplicate of a job still being acknowledged (it
coalesces only onto a completion in the log), at a revocation and when it is
idle; then it resolves the record, or, if the log refused the completion,
acts on the job again after the outage backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import deque
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, ConsumerRecord
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition

from consumers.attempts import Abort, AbortSignal, Attempt, AttemptResult
from consumers.cancellation import CancelLookup, CancelWatch
from consumers.coalescing import reusable_result
from consumers.errors import EngineHung, LookupUnavailable
from consumers.job_runner import JobRunner
from consumers.ledger import JobView, Ledger
from consumers.partitions import Partitions, TailScanner
from consumers.ports import DeadLetter, Outlook, ResultLookup
from consumers.priorities import BatchQueue, SetAside
from consumers.recovery import LEDGER_TYPES, find_request, scan_tails
from consumers.retries import DueRetry, RetryQueue
from consumers.watchdog import Hung, Watchdog
from consumers.worker_config import WorkerConfig
from contracts import (
    HEADER_TRACEPARENT,
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
from foundation import tracing
from foundation.errors import BrokerUnavailable
from foundation.lifecycle import wait_for_stop
from foundation.outages import Outage

log = structlog.get_logger("voxlog.worker")
T = TypeVar("T")
ACTIONABLE: Final = frozenset({type_name(JobQueued), type_name(JobReleased)})
POLL_BUDGET_S: Final = 5.0  # handling time after which the worker polls again before starting a job


class _Stopping(Exception):
    """The worker is stopping before it acted on a record: leave the record uncommitted."""


@dataclass(frozen=True)
class _Unacknowledged:
    """A completed attempt whose events the worker did not wait for (the next job goes on meanwhile).

    Until they are acknowledged, the job's record is deferred: no commit passes it. Recorded, the record
    is resolved; refused (or dropped), the job is acted on again after the outage backoff, and its ledger
    then says what is left to do (nothing, if the completion did land)."""

    tp: TopicPartition
    offset: int
    job_id: uuid.UUID
    recorded: asyncio.Future[bool]


class SynthWorker(ConsumerRebalanceListener):
    def __init__(
        self,
        config: WorkerConfig,
        consumer: AIOKafkaConsumer,
        runner: JobRunner,
        lookup: ResultLookup,
        dead_letter: DeadLetter,
        scan_tails: TailScanner | None = None,
        cancels: CancelLookup | None = None,
    ) -> None:
        self.config = config
        self._cancels = cancels
        self._consumer = consumer
        self._runner = runner
        self._lookup = lookup
        self._dead_letter = dead_letter
        self.partitions = Partitions(consumer, scan_tails or self._scan_tails, config.commit_interval_s)
        self.retries = RetryQueue()
        self.batches = BatchQueue(config.interactive_per_batch, config.batch_lookahead)
        self._backlog: deque[tuple[TopicPartition, ConsumerRecord]] = deque()
        self._abort = AbortSignal()  # why to give back the job of the record in hand
        self._unacknowledged: list[_Unacknowledged] = []  # completions not waited for, in the order run
        self._stop = asyncio.Event()
        self._handling = asyncio.Lock()
        self._fetched = False  # the last poll brought records (more may have been appended since)
        self._looked = False  # polled once more since, before the next batch job
        self._outage = Outage("Kafka (the worker's records and events)")

    async def _scan_tails(self, starts: Mapping[TopicPartition, int]) -> tuple[dict[TopicPartition, Ledger], int]:
        return await scan_tails(self.config.kafka, starts, lambda: Ledger(self.config.cache_ttl))

    # -- group membership ------------------------------------------------------
    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        # The record in hand is finished first (up to the grace period); records of revoked
        # partitions still in the backlog are skipped once their ledger is gone.
        self.partitions.scanned.clear()
        try:
            await asyncio.wait_for(self._handling.acquire(), self.config.rebalance_grace_s)
        except TimeoutError:  # give the job back at its next segment boundary
            self._abort.reason = Abort("rebalance", "its partition went to another worker")
            await self._handling.acquire()
        try:
            await self._acknowledged_quietly()  # what the revoked partitions' jobs recorded, before they go
            self.retries.drop(revoked)
            self.batches.drop(revoked)
            # Their records go too: if the partitions come back, they are read again from the commit.
            self._backlog = deque((tp, r) for tp, r in self._backlog if tp not in revoked)
            await self.partitions.revoke(revoked)
        finally:
            self._handling.release()

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.partitions.assigned(assigned)  # the loop scans their tails before acting on them

    # -- main loop ----------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        self._stop = stop
        self._consumer.subscribe([self.config.jobs_topic], listener=self)
        while not stop.is_set():
            if not await self._poll(stop):
                continue
            polled_at = time.monotonic()
            # At least one step per poll, then more until the handling budget is spent.
            while not stop.is_set() and await self._step() and time.monotonic() - polled_at < POLL_BUDGET_S:
                pass
            if not self._backlog or self.partitions.commit_due:
                await self._commit()
        await self._commit()

    async def _step(self) -> bool:
        """Do the next thing in hand: a retry that is due, a set-aside batch job's turn, the next record.
        Returns whether to go on before polling again."""
        # aiokafka hands out records of a new assignment before their tails are scanned:
        # scan first, or the records would be acted on with an empty ledger.
        if not await self.partitions.ensure_scanned(self._stop):
            return False
        retry = self.retries.pop_due()
        if retry is not None:
            await self._retry(retry)
            return True
        if self.batches and not self._backlog and self._fetched and not self._looked:
            # One more look before a batch job: the poll that just drained some partitions could
            # not bring what has been appended to them since, and an interactive job among it
            # would otherwise wait behind the whole batch job.
            self._looked = True
            return False
        if (aside := self.batches.next_batch(interactive_waiting=bool(self._backlog))) is not None:
            self._looked = False
            await self._run_set_aside(aside)
            return bool(self._backlog)  # else poll before the next one: interactive work may have come meanwhile
        if self._backlog:
            await self._next_record()
            return True
        return False

    async def _poll(self, stop: asyncio.Event) -> bool:
        """Fetch more records into the backlog; ``False`` after an error (waited out)."""
        if self.batches.full and self._backlog:
            return True  # work off set-aside batch jobs before reading further ahead
        timeout_s = 0.0 if self._backlog or self.batches else min(0.5, self.retries.seconds_to_next() or 0.5)
        if timeout_s > 0:
            await self._acknowledged_quietly()  # idle: nothing to overlap the acknowledgements with
        try:
            batch = await self._consumer.getmany(timeout_ms=int(timeout_s * 1000), max_records=100)
        except KafkaError as exc:
            await wait_for_stop(stop, self._outage.failed(exc, step="poll"))
            return False
        for tp, records in batch.items():
            self._backlog.extend((tp, record) for record in records)
        self._fetched = bool(batch)
        return True

    async def _next_record(self) -> None:
        async with self._handling:  # taken first: a revocation may have emptied the backlog meanwhile
            if not self._backlog:
                return
            tp, record = self._backlog[0]
            ledger = self.partitions.ledger_for(tp, record.offset)
            try:
                if ledger is not None:
                    acted = await self._handle(tp, ledger, record)
                else:
                    acted = False  # a partition that went to another member
            except BrokerUnavailable as exc:
                # Nothing of the next step could be recorded: keep the record, wait, try it again.
                await wait_for_stop(self._stop, self._outage.failed(exc, step="a record, tried again"))
                return
            except _Stopping:
                self._backlog.clear()  # stopping: the next owner takes these records
                return
            finally:
                self._abort = AbortSignal()  # an abort is meant for the record in hand only
            self._backlog.popleft()
        self._outage.recovered()
        if acted and self.partitions.commit_due:
            # Outside the lock: a commit waits for a pending rebalance, and the
            # rebalance's revocation callback waits for the lock.
            await self._commit()

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
                acted = await self._on_event(tp, ledger, event, record.offset, record.headers)
        # Done with: the offset may move past it, unless the record was deferred (its job waits for a turn,
        # a retry, or its completion's acknowledgement).
        self.partitions.handled(tp, record.offset)
        return acted

    async def _on_event(
        self,
        tp: TopicPartition,
        ledger: Ledger,
        event: JobEvent,
        offset: int,
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> bool:
        """Fold ``event`` into the ledger and act on it; returns whether a job was acted on."""
        view = ledger.observe(event, offset, header_value(headers, HEADER_TRACEPARENT))
        if isinstance(event, JobQueued) and view.state in {JobState.QUEUED, JobState.CLAIMED}:
            if view.state is JobState.QUEUED and view.priority == "batch":
                self.partitions.defer(tp, offset)  # its turn comes (consumers.priorities); no commit passes it
                self.batches.set_aside(tp, offset, view.job_id)
                return False
            # "claimed" here means a previous owner died mid-job: claim it again, one attempt higher.
            await self._act(tp, ledger, view, offset)
            self.batches.interactive_done()
            return True
        if isinstance(event, JobReleased) and self._retry_due(view, event.payload.failed_attempt):
            delay = (view.not_before - utc_now()).total_seconds() if view.not_before is not None else 0.0
            if delay > 0:
                self.partitions.defer(tp, offset)
                self.retries.schedule(tp, offset, view.job_id, event.payload.failed_attempt, delay)
                return False
            await self._act(tp, ledger, view, offset)
            return True
        return False

    @staticmethod
    def _retry_due(view: JobView, failed_attempt: int) -> bool:
        """Whether the release of ``failed_attempt`` still calls for a new attempt.

        It does while the job is released at that attempt; and when the ledger shows a later
        attempt claimed but never finished, the worker that claimed it (when it handled this very
        record) died before the end: this record is being read again by the next owner.
        """
        if view.state is JobState.RELEASED:
            return view.attempt == failed_attempt
        return view.state is JobState.CLAIMED and view.attempt > failed_attempt

    async def _retry(self, retry: DueRetry) -> None:
        def due(view: JobView) -> bool:
            if retry.redo:  # its completion was refused: whatever is left of it (nothing, if it landed)
                return view.state in {JobState.QUEUED, JobState.CLAIMED}
            return self._retry_due(view, retry.failed_attempt)

        delay = await self._act_deferred(retry.tp, retry.offset, retry.job_id, due)
        if delay is not None:
            self.retries.schedule(retry.tp, retry.offset, retry.job_id, retry.failed_attempt, delay, redo=retry.redo)

    async def _run_set_aside(self, aside: SetAside) -> None:
        """A batch job whose turn came: act on it unless it settled meanwhile (a duplicate's result, a
        cancellation)."""
        delay = await self._act_deferred(
            aside.tp, aside.offset, aside.job_id, lambda view: view.state is JobState.QUEUED
        )
        if delay is not None:
            self.batches.put_back(aside)  # still first in line, and its record still deferred
            await wait_for_stop(self._stop, delay)
        elif self.partitions.commit_due:
            await self._commit()

    async def _act_deferred(
        self, tp: TopicPartition, offset: int, job_id: uuid.UUID, due: Callable[[JobView], bool]
    ) -> float | None:
        """Act on the job of a deferred record (a retry, a set-aside batch job) if ``due`` says it still calls
        for it, and resolve the record. Returns how long to wait when the log refused an event: the record
        stays deferred, and the caller tries again."""
        async with self._handling:
            ledger = self.partitions.ledger_for(tp, offset)
            view = ledger.jobs.get(job_id) if ledger is not None else None
            unacknowledged = False
            try:
                if ledger is not None and view is not None and due(view):
                    unacknowledged = await self._act(tp, ledger, view, offset)
            except BrokerUnavailable as exc:
                return self._outage.failed(exc, step="a deferred job, tried again")
            except _Stopping:
                return None  # stopping: the record stays deferred, for the next owner
            finally:
                self._abort = AbortSignal()
        if not unacknowledged:  # else resolved once its completion is acknowledged (see _act)
            self.partitions.resolve(tp, offset)
        return None

    async def _act(self, tp: TopicPartition, ledger: Ledger, view: JobView, offset: int) -> bool:
        """Act on ``view``'s job, read at ``offset``, in its trace (what is recorded and logged meanwhile
        carries it, and the job's id, fingerprint and attempt); returns whether its completion is still
        being acknowledged: the record is then deferred until it is, and acted on again if it is refused."""
        if self._stop.is_set():
            raise _Stopping
        bound = {"job_id": view.job_id, "fingerprint": view.fingerprint, "attempt": view.attempt + 1}
        with tracing.within(view.trace, **bound):
            return await self._act_on(tp, ledger, view, offset)

    async def _act_on(self, tp: TopicPartition, ledger: Ledger, view: JobView, offset: int) -> bool:
        if view.fingerprint in self._runner.acknowledgements.fingerprints():
            await self._acknowledged()  # a duplicate coalesces only onto a completion in the log
        request = view.request or await self._request_of(tp, view)
        if request is not None and not self._serves(request):
            return False  # another engine's or model version's job: its own group acts on it
        now = utc_now()
        try:  # one read for both questions the projection answers before a claim
            outlook = await self._lookup.outlook(view.job_id, view.fingerprint, now)
        except LookupUnavailable:  # coalescing from the ledger only (the lookup says when PostgreSQL goes and is back)
            outlook = Outlook()  # not known to be cancelled: at worst wasted work, its events fenced
        cached = await reusable_result(view, ledger, outlook.result, self._lookup, self._runner.blobs, now)
        if cached is not None:
            await self._runner.complete_from_cache(view, cached, ledger)
            return False
        if request is None:
            message = "the job's JobQueued is neither in its partition nor in the projection"
            await self._runner.fail_without_attempt(view, "request_unavailable", message, ledger)
            return False
        if outlook.cancelled:
            log.info("the job was cancelled before its claim: not synthesized", job_id=str(view.job_id))
            return False  # its JobCancelled, behind in the partition, ends the job in the ledger when read
        watch = CancelWatch(self._cancels, view.job_id, view.fingerprint)
        attempt = Attempt(view, request, view.attempt + 1, ledger, self._abort, watch, wait_for_completion=False)
        try:
            result = await self._keepalive(self._runner.run(attempt), attempt)
        finally:
            self._resolve_acknowledged()  # the attempt's waits may have told how earlier completions went
        return self._defer_unacknowledged(tp, offset, view.job_id, result)

    def _defer_unacknowledged(self, tp: TopicPartition, offset: int, job_id: uuid.UUID, result: AttemptResult) -> bool:
        """Whether the record now waits for its completion's acknowledgement (it is deferred until then)."""
        if result.recorded is None or (result.recorded.done() and result.recorded.result()):
            return False
        self.partitions.defer(tp, offset)
        self._unacknowledged.append(_Unacknowledged(tp, offset, job_id, result.recorded))
        self._resolve_acknowledged()  # refused already: acted on again
        return True

    def _resolve_acknowledged(self) -> None:
        """Resolve the records of completions now recorded; act again, after the outage backoff, on the jobs
        of those refused or dropped."""
        waiting = []
        for completion in self._unacknowledged:
            if not completion.recorded.done():
                waiting.append(completion)
            elif completion.recorded.result():
                self.partitions.resolve(completion.tp, completion.offset)
            else:
                delay = self._outage.failed("the log refused a completion", step="its job, acted on again")
                self.retries.schedule(completion.tp, completion.offset, completion.job_id, -1, delay, redo=True)
        self._unacknowledged = waiting

    async def _acknowledged(self) -> None:
        """Wait for every event handed to the log, then resolve (or act again on) the completions among them;
        raises the first refusal."""
        try:
            await self._runner.acknowledgements.wait_all()
        finally:
            self._resolve_acknowledged()

    async def _acknowledged_quietly(self) -> None:
        """:meth:`_acknowledged`, a refusal let go: each refused completion is counted on the outage, and its
        job acted on again (:meth:`_resolve_acknowledged`)."""
        with contextlib.suppress(BrokerUnavailable):
            await self._acknowledged()

    async def _commit(self) -> None:
        await self._acknowledged_quietly()  # a commit passes a job only once its events are acknowledged
        await self.partitions.commit()

    def _serves(self, request: SynthesisRequest) -> bool:
        config = self.config
        return not config.engine or (request.engine, request.model_version) == (config.engine, config.model_version)

    async def _request_of(self, tp: TopicPartition, view: JobView) -> SynthesisRequest | None:
        """The job's request when its ``JobQueued`` lies before the scanned tail: the projection's copy,
        else the log's own record (the projection may lag, or be down)."""
        try:
            request = await self._lookup.request_of(view.job_id)
        except LookupUnavailable:
            request = None  # read from the log instead
        if request is not None:
            return request
        before = self.partitions.start_of(tp)
        try:
            return await find_request(self.config.kafka, tp, before, view.job_id)
        except (KafkaError, OSError) as exc:
            raise BrokerUnavailable(f"cannot read the job's request from the log: {exc}") from exc

    async def _keepalive(self, work: Coroutine[Any, Any, T], attempt: Attempt) -> T:
        """Run ``work`` as a task under the :class:`~consumers.watchdog.Watchdog`: on shutdown, or without
        progress, the attempt is given back at a segment boundary; a hung engine's job is given back at
        once (:class:`EngineHung`: the engine's thread cannot be stopped).

        Membership stays alive without polling: aiokafka heartbeats from its own task, and
        max.poll.interval allows the longest job (VOXLOG_MAX_JOB_S) plus the poll budget.
        Polling here instead would wait out any rebalance while holding the record in hand,
        which the rebalance's revocation callback waits for.
        """
        task: asyncio.Task[T] = asyncio.create_task(work)
        config = self.config
        watchdog = Watchdog(
            self._runner.activity, config.watchdog_factor, config.watchdog_min_s, config.shutdown_grace_s
        )
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=1.0)
                if done:
                    return task.result()
                verdict = watchdog.check(stopping=self._stop.is_set(), aborting=attempt.abort.reason is not None)
                if isinstance(verdict, Hung):
                    task.cancel()
                    await self._runner.abandon(attempt, verdict.message)
                    raise EngineHung(f"job {attempt.job.job_id} attempt {attempt.number}: {verdict.message}")
                if isinstance(verdict, Abort):
                    log.warning("giving the attempt back at the next segment", reason=verdict.message)
                    attempt.abort.reason = verdict
        finally:
            if not task.done():
                task.cancel()
