"""The synthesis worker: a member of the synth consumer group that holds several claims at once.

Per record: records other than the status-changing types are skipped by
header, undecoded; ``JobQueued`` and ``JobReleased`` are acted on unless the
ledger shows the job already moved on. A job to act on is not run when its
record is read: its record is deferred and the job waits in the run queue
(:mod:`consumers.run_queue`) while the worker reads on. Whenever it holds
fewer than ``held_claims`` claims, the worker takes the job its policy puts
first (:mod:`consumers.scheduling`) and acts on it in a task of its own: a
live result of the same fingerprint completes it without synthesis (see
:mod:`consumers.coalescing`), otherwise its attempt runs, and its segments
take the engine's turns with those of the other claims
(:mod:`consumers.engine_turns`): a short request claimed behind a long one
is done a segment later, not a job later. A released job waits for its retry
in a due-time queue (:mod:`consumers.retries`), then in the run queue.

The worker polls again after at most ``POLL_BUDGET_S`` of handling records;
handling one never waits for a job. When the run queue is full the worker
pauses its partitions and polls only to stay in the group. A revocation
gives the revoked partitions' claims the grace period, then has them give
their jobs back at their next segment boundary. When Kafka cannot take an
event, the job is acted on again after a backoff: whatever the attempt had
published is in the ledger, and the next try claims the job one attempt
higher. Offsets and their batched commits are
:class:`consumers.partitions.Partitions`' business.

The runner (:mod:`consumers.job_runner`) returns what an attempt did
(:mod:`consumers.attempts`); only the worker defers, resolves and commits
records. A completion is not waited for: the engine goes on while Kafka
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
from consumers.cancellation import CancelLookup, CancelWatches
from consumers.coalescing import reusable_result
from consumers.engine_turns import EngineTurns, HeldTurns
from consumers.errors import EngineHung
from consumers.job_runner import JobRunner
from consumers.ledger import JobView, Ledger
from consumers.outlooks import GroupedOutlooks, OutlookLookup, OutlookSource
from consumers.partitions import Partitions, TailScanner
from consumers.ports import DeadLetter, ResultLookup
from consumers.recovery import LEDGER_TYPES, find_request, scan_tails
from consumers.retries import DueRetry, RetryQueue
from consumers.run_queue import Due, RunQueue, Waiting
from consumers.scheduling import Contender, FairShares, Policy, TurnLog
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
from contracts.scheduling import WaitedBehind
from foundation import tracing
from foundation.errors import BrokerUnavailable
from foundation.lifecycle import wait_for_stop
from foundation.outages import Outage
from projections.errors import ProjectionUnavailable
from projections.reads.worker import Outlook

log = structlog.get_logger("voxlog.worker")
T = TypeVar("T")
ACTIONABLE: Final = frozenset({type_name(JobQueued), type_name(JobReleased)})
POLL_BUDGET_S: Final = 5.0  # handling time after which the worker polls again
UNKNOWN_TEXT_CHARS: Final = 200  # a job's work to the scheduler when its request is not in the ledger


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


@dataclass
class _Held:
    """A claim the worker holds: the job taken from the run queue, its place among the engine's turns, and
    the task acting on it."""

    entry: Waiting
    turns: HeldTurns
    task: asyncio.Task[None]


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
        outlooks: OutlookLookup | None = None,
    ) -> None:
        self.config = config
        self._cancels = CancelWatches(cancels)  # one query for every claim held, not one per claim
        # Claims taken together read their outlooks in one query; without ``outlooks``, one read per claim.
        self._outlooks: OutlookSource = lookup if outlooks is None else GroupedOutlooks(outlooks)
        self._consumer = consumer
        self._runner = runner
        self._lookup = lookup
        self._dead_letter = dead_letter
        self.partitions = Partitions(consumer, scan_tails or self._scan_tails, config.commit_interval_s)
        self.retries = RetryQueue()
        shares = FairShares(config.tenant_weights, config.fair_share_half_life_s)
        self.policy = Policy(shares, config.interactive_per_batch, config.aging_s)
        self.waiting = RunQueue(self.policy, config.batch_lookahead)
        self.turns = EngineTurns(
            self.policy, TurnLog(self.policy), batch=config.batch, padded_ids=config.batch_padded_ids
        )
        self._held: dict[uuid.UUID, _Held] = {}
        self._seq = 0  # the order records were read in: the policy's last rule
        self._backlog: deque[tuple[TopicPartition, ConsumerRecord]] = deque()
        self._unacknowledged: list[_Unacknowledged] = []  # completions not waited for, in the order run
        self._stop = asyncio.Event()
        self._room = asyncio.Event()  # the run queue has room again: read on
        self._handling = asyncio.Lock()
        self._paused = False
        self._fatal: EngineHung | None = None
        self._outage = Outage("Kafka (the worker's records and events)")

    async def _scan_tails(self, starts: Mapping[TopicPartition, int]) -> tuple[dict[TopicPartition, Ledger], int]:
        return await scan_tails(self.config.kafka, starts, lambda: Ledger(self.config.cache_ttl))

    def settled(self) -> bool:
        """Nothing in hand: no record to handle, no claim held, no job waiting for one."""
        return not self._backlog and not self._held and not len(self.waiting) and not self.retries.redoing()

    @property
    def held(self) -> list[uuid.UUID]:
        """The jobs this worker holds claims on."""
        return list(self._held)

    # -- group membership ------------------------------------------------------
    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        # Jobs of revoked partitions not claimed yet go at once (their records, uncommitted, go with the
        # partitions); the claims held on them get the grace period, then give their jobs back at their next
        # segment boundary.
        self.partitions.scanned.clear()
        async with self._handling:  # the record in hand (handling one never waits for a job)
            self.retries.drop(revoked)
            self.waiting.drop(revoked)
            self._backlog = deque((tp, r) for tp, r in self._backlog if tp not in revoked)
            leaving = [held for held in self._held.values() if held.entry.tp in revoked]
            if leaving:
                _, late = await asyncio.wait([h.task for h in leaving], timeout=self.config.rebalance_grace_s)
                for held in leaving:
                    if held.task in late:
                        held.turns.abort.give_back(Abort("rebalance", "its partition went to another worker"))
                if late:
                    await asyncio.wait(late)
            await self._acknowledged_quietly()  # what the revoked partitions' jobs recorded, before they go
            await self.partitions.revoke(revoked)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.partitions.assigned(assigned)  # the loop scans their tails before acting on them

    # -- main loop ----------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        self._stop = stop
        self._consumer.subscribe([self.config.jobs_topic], listener=self)
        try:
            while not stop.is_set():
                if not await self._poll(stop):
                    continue
                polled_at = time.monotonic()
                # At least one step per poll, then more until the handling budget is spent.
                while not stop.is_set() and await self._step() and time.monotonic() - polled_at < POLL_BUDGET_S:
                    pass
                self._admit()
                if not self._backlog or self.partitions.commit_due:
                    await self._commit()
        finally:
            stop.set()
            # Each claim's watchdog gives it back once the shutdown grace is over.
            while self._held:
                await asyncio.wait([held.task for held in self._held.values()])
        await self._commit()
        if self._fatal is not None:
            raise self._fatal

    async def _step(self) -> bool:
        """Handle the next record read; returns whether to go on before polling again."""
        # aiokafka hands out records of a new assignment before their tails are scanned:
        # scan first, or the records would be acted on with an empty ledger.
        if not await self.partitions.ensure_scanned(self._stop):
            return False
        if self._backlog and not self.waiting.full:
            await self._next_record()
            return True
        return False

    async def _poll(self, stop: asyncio.Event) -> bool:
        """Fetch more records into the backlog; ``False`` after an error (waited out). While the run queue is
        full the partitions are paused: the poll only keeps the worker in its group."""
        full = self.waiting.full
        if full != self._paused:
            partitions = self._consumer.assignment()
            (self._consumer.pause if full else self._consumer.resume)(*partitions)
            self._paused = full
        if full:
            self._room.clear()
            await wait_for_stop(self._room, 0.5)
        timeout_s = 0.0 if self._backlog and not full else min(0.5, self.retries.seconds_to_next() or 0.5)
        if timeout_s > 0:
            await self._acknowledged_quietly()  # idle: nothing to overlap the acknowledgements with
        try:
            batch = await self._consumer.getmany(timeout_ms=int(timeout_s * 1000), max_records=100)
        except KafkaError as exc:
            await wait_for_stop(stop, self._outage.failed(exc, step="poll"))
            return False
        for tp, records in batch.items():
            self._backlog.extend((tp, record) for record in records)
        return True

    async def _next_record(self) -> None:
        async with self._handling:  # taken first: a revocation may have emptied the backlog meanwhile
            if not self._backlog:
                return
            tp, record = self._backlog[0]
            ledger = self.partitions.ledger_for(tp, record.offset)
            try:
                if ledger is not None:
                    await self._handle(tp, ledger, record)
            except BrokerUnavailable as exc:
                # Nothing of the next step could be recorded: keep the record, wait, try it again.
                await wait_for_stop(self._stop, self._outage.failed(exc, step="a record, tried again"))
                return
            self._backlog.popleft()
        self._outage.recovered()

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
        """Fold ``event`` into the ledger; a job to act on waits in the run queue, its record deferred.
        Returns whether a job began to wait."""
        view = ledger.observe(event, offset, header_value(headers, HEADER_TRACEPARENT))
        if isinstance(event, JobQueued) and view.state in {JobState.QUEUED, JobState.CLAIMED}:
            # "claimed" here means a previous owner died mid-job: it is claimed again, one attempt higher.
            self._wait(tp, offset, view, "queued")
            return True
        if isinstance(event, JobReleased) and self._retry_due(view, event.payload.failed_attempt):
            failed = event.payload.failed_attempt
            delay = (view.not_before - utc_now()).total_seconds() if view.not_before is not None else 0.0
            self.partitions.defer(tp, offset)
            if delay > 0:
                self.retries.schedule(tp, offset, view.job_id, failed, delay)
            else:
                self._wait(tp, offset, view, "retry", failed)
            return True
        return False

    def _wait(self, tp: TopicPartition, offset: int, view: JobView, due: Due, failed_attempt: int = 0) -> None:
        """The job of the record at ``offset`` waits in the run queue; no commit passes its record meanwhile."""
        self.partitions.defer(tp, offset)
        self.waiting.add(Waiting(tp, offset, self._contender(view), due, failed_attempt, self.turns.log.count))

    def _contender(self, view: JobView) -> Contender:
        """The job as the policy sees it, next in the order read."""
        self._seq += 1
        chars = len(view.request.text) if view.request is not None else UNKNOWN_TEXT_CHARS
        return Contender(view.job_id, view.fingerprint, view.tenant, view.priority, chars, self._seq)

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

    # -- claims ---------------------------------------------------------------------
    def _admit(self) -> None:
        """Take waiting jobs into claims while there is room (retries that came due join the run queue
        first). Batch work keeps one claim free for interactive work. Called after each poll's records and
        whenever a claim ends, so that the engine never waits for the loop."""
        if self._stop.is_set() or self._fatal is not None:
            return
        while (retry := self.retries.pop_due()) is not None:
            self._wait_again(retry)
        held_limit = self.config.held_claims
        was_full = self.waiting.full
        while len(self._held) < held_limit:
            batch_held = sum(h.entry.job.priority == "batch" for h in self._held.values())
            batch_room = held_limit == 1 or batch_held < held_limit - 1
            held_fingerprints = {h.entry.job.fingerprint for h in self._held.values()}
            entry = self.waiting.take(held_fingerprints, allow_batch=batch_room)
            if entry is None:
                break
            self._start(entry)
        if was_full and not self.waiting.full:
            self._room.set()

    def _wait_again(self, retry: DueRetry) -> None:
        """A deferred job whose wait is over (a retry's backoff, an outage's) waits for a claim again."""
        ledger = self.partitions.ledger_for(retry.tp, retry.offset)
        view = ledger.jobs.get(retry.job_id) if ledger is not None else None
        if view is None:
            return  # its partition went to another worker
        due: Due = "redo" if retry.redo else "retry"
        job = self._contender(view)
        self.waiting.add(Waiting(retry.tp, retry.offset, job, due, retry.failed_attempt, self.turns.log.count))

    def _start(self, entry: Waiting) -> None:
        turns = HeldTurns(self.turns, entry.job, AbortSignal(), claimed_turn=self.turns.log.count)
        task = asyncio.create_task(self._hold(entry, turns), name=f"claim {entry.job_id}")
        self._held[entry.job_id] = _Held(entry, turns, task)

    async def _hold(self, entry: Waiting, turns: HeldTurns) -> None:
        """Act on a job taken from the run queue, and let its record go (or wait again) by how it went."""
        try:
            delay = await self._act_deferred(entry, turns)
            if delay is not None:  # the log refused an event: the record stays deferred, the job tried again
                self.retries.schedule(entry.tp, entry.offset, entry.job_id, entry.failed_attempt, delay, redo=True)
        except EngineHung as exc:
            self._fatal = exc  # the engine's thread cannot be stopped: the worker gives back every claim, exits
            for held in self._held.values():
                held.turns.abort.give_back(Abort("transient", "the engine hung", backoff=True))
            self._stop.set()
        except Exception:
            log.exception("acting on a job failed; it is tried again", job_id=str(entry.job_id))
            delay = self._outage.failed("an unexpected error", step="its job, acted on again")
            self.retries.schedule(entry.tp, entry.offset, entry.job_id, entry.failed_attempt, delay, redo=True)
        finally:
            turns.finished()  # a turn kept for it (an attempt cut short, say) goes to the others
            del self._held[entry.job_id]
            self._admit()

    def _due(self, entry: Waiting) -> Callable[[JobView], bool]:
        if entry.due == "queued":
            return lambda view: view.state in {JobState.QUEUED, JobState.CLAIMED}
        if entry.due == "redo":  # after an outage, or a refused completion: whatever is left of it (if anything)
            return lambda view: view.state in {JobState.QUEUED, JobState.CLAIMED, JobState.RELEASED}
        return lambda view: self._retry_due(view, entry.failed_attempt)

    async def _act_deferred(self, entry: Waiting, turns: HeldTurns) -> float | None:
        """Act on the job of a deferred record if it still calls for it (a duplicate's result or a
        cancellation may have settled it meanwhile), and resolve the record. Returns how long to wait when
        the log refused an event: the record stays deferred, and the job is tried again."""
        tp, offset = entry.tp, entry.offset
        ledger = self.partitions.ledger_for(tp, offset)
        view = ledger.jobs.get(entry.job_id) if ledger is not None else None
        if ledger is None or view is None:
            return None  # its partition went to another worker: the record goes with it
        unacknowledged = False
        try:
            if self._due(entry)(view):
                waited_s = time.monotonic() - entry.read_at
                waited = self.turns.log.behind(entry.job, entry.read_turn, waited_s)
                unacknowledged = await self._act(tp, ledger, view, offset, turns, waited)
        except BrokerUnavailable as exc:
            return self._outage.failed(exc, step="a job, tried again")
        except _Stopping:
            return None  # stopping: the record stays deferred, for the next owner
        self._outage.recovered()
        if not unacknowledged:  # else resolved once its completion is acknowledged (see _act)
            self.partitions.resolve(tp, offset)
        return None

    async def _act(
        self,
        tp: TopicPartition,
        ledger: Ledger,
        view: JobView,
        offset: int,
        turns: HeldTurns,
        waited: WaitedBehind | None,
    ) -> bool:
        """Act on ``view``'s job, read at ``offset``, in its trace (what is recorded and logged meanwhile
        carries it, and the job's id, fingerprint and attempt); returns whether its completion is still
        being acknowledged: the record is then deferred until it is, and acted on again if it is refused."""
        if self._stop.is_set():
            raise _Stopping
        bound = {"job_id": view.job_id, "fingerprint": view.fingerprint, "attempt": view.attempt + 1}
        with tracing.within(view.trace, **bound):
            return await self._act_on(tp, ledger, view, offset, turns, waited)

    async def _act_on(
        self,
        tp: TopicPartition,
        ledger: Ledger,
        view: JobView,
        offset: int,
        turns: HeldTurns,
        waited: WaitedBehind | None,
    ) -> bool:
        if view.fingerprint in self._runner.acknowledgements.fingerprints():
            await self._acknowledged()  # a duplicate coalesces only onto a completion in the log
        request = view.request or await self._request_of(tp, view)
        if request is not None and not self._serves(request):
            return False  # another engine's or model version's job: its own group acts on it
        now = utc_now()
        try:  # one read for both questions the projection answers before a claim
            outlook = await self._outlooks.outlook(view.job_id, view.fingerprint, now)
        except ProjectionUnavailable:  # coalescing from the ledger only (the lookup says when PostgreSQL is back)
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
        number = view.attempt + 1
        with self._cancels.watch(view.job_id, view.fingerprint) as watch:
            attempt = Attempt(view, request, number, ledger, turns.abort, watch, False, turns, waited)
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
        except ProjectionUnavailable:
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

        The worker's loop polls meanwhile (a held claim never stops it): membership stays alive.
        """
        task: asyncio.Task[T] = asyncio.create_task(work)
        config = self.config
        watchdog = Watchdog(
            self._runner.activity,
            attempt.job.job_id,
            config.watchdog_factor,
            config.watchdog_min_s,
            config.shutdown_grace_s,
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
                    attempt.abort.give_back(verdict)
        finally:
            if not task.done():
                task.cancel()
