"""One attempt at one job: claim, synthesize segment by segment, complete (or release, or fail).

The worker decides what to do with a job and hands the runner an
:class:`~consumers.attempts.Attempt`; the runner emits the events, tracked
until Kafka acknowledges them (:mod:`consumers.acknowledgements`), and
returns what happened (:class:`~consumers.attempts.AttemptResult`). Engine calls go through
``call``: the node's FIFO, whose one thread runs the model, so the event loop
keeps heartbeating and polling while the model works, and a node never runs
two syntheses at once. Each segment's audio is in the blob store before its
``SegmentProduced`` is published (the last segment's rides in the attempt's
``JobCompleted``, version 3); every event id is derived from the job,
attempt and index, so a repeated emission is applied once.

Synthesis is a plan, then one step per segment (:meth:`JobRunner._step`): at
its boundary the attempt stops if the worker asked for the job back or the
job was cancelled; otherwise the segment's audio is made
(:mod:`consumers.segment_audio`) and its event handed to the log.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final, TypeVar

import structlog

from consumers.acknowledgements import Acknowledgements, Recorder
from consumers.attempts import Attempt, AttemptResult
from consumers.engine_turns import TurnWithdrawn
from consumers.errors import BlobWriteFailed, InputRejected, TransientEngineError
from consumers.ledger import JobView
from consumers.ports import AudioSink, EventLog, PlannedSegment, SegmentReuse, SpeechEngine
from consumers.segment_audio import SegmentAudio, SegmentMaker
from consumers.worker_activity import Activity
from contracts import (
    JobClaimed,
    JobClaimedPayload,
    JobCompleted,
    JobCompletedPayload,
    JobEvent,
    JobFailed,
    JobFailedPayload,
    JobReleased,
    JobReleasedPayload,
    Producer,
    SegmentProduced,
    SegmentProducedPayload,
    TextSpan,
    TraceContext,
    derive_event_id,
    job_event,
    job_trace_of,
    span_id_of,
    utc_now,
)
from contracts.events import ReleaseReason
from foundation import tracing
from foundation.metrics import JOB_PHASE_SECONDS
from foundation.outages import backoff_delay
from projections.reads.worker import CachedResult

log = structlog.get_logger("voxlog.worker")
T = TypeVar("T")
CLAIM_RIDES_ALONG_S: Final = 0.05
"""A claim waits for the first segment when the node has measured that it comes within this long."""
_SPAN_NAMES: Final = {
    "JobClaimed": "claim",
    "JobCompleted": "completion",
    "JobReleased": "release",
    "JobFailed": "failure",
}
_EmittedEvent = type[JobClaimed] | type[SegmentProduced] | type[JobCompleted] | type[JobReleased] | type[JobFailed]


def _span_name(event: JobEvent) -> str:
    coalesced = isinstance(event, JobCompleted) and event.payload.cache_hit
    return "coalesced completion" if coalesced else _SPAN_NAMES[event.type]


def _span_attributes(event: JobEvent) -> dict[str, tracing.Attribute]:
    if isinstance(event, JobCompleted):
        return {"voxlog.segments": event.payload.segment_count, "voxlog.audio_ms": event.payload.total_duration_ms}
    if isinstance(event, JobReleased):
        return {"voxlog.reason": event.payload.reason}
    if isinstance(event, JobFailed):
        return {"voxlog.reason": event.payload.reason_code}
    return {}


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int
    base_delay_s: float
    max_delay_s: float = 60.0

    def backoff(self, attempt: int) -> timedelta:
        """The one backoff rule (:func:`foundation.outages.backoff_delay`): uniform in [c/2, c],
        c = min(max, base * 2^(attempt-1)), so that jobs that failed together do not come back together."""
        return timedelta(seconds=backoff_delay(self.base_delay_s, self.max_delay_s, attempt))


@dataclass
class _Progress:
    """How far an attempt's synthesis got: what each segment's step reads and moves on."""

    attempt: Attempt
    plan: Sequence[PlannedSegment]
    claimed_at: float  # perf_counter() values
    planned_at: float
    total_ms: int = 0
    for_duplicate: bool = False  # cancelled, but a duplicate waits: render the rest for it, record nothing
    remaining_chars: int = 0  # the text of the segments not made yet: the work left, to the scheduler
    last: SegmentProducedPayload | None = None  # the last segment, recorded with the completion (one record)


class JobRunner:
    def __init__(
        self,
        engine: SpeechEngine,
        blobs: AudioSink,
        publisher: EventLog,
        producer: Producer,
        worker_id: str,
        retry: RetryPolicy,
        call: Callable[..., Awaitable[Any]],
        activity: Activity | None = None,
        host: str | None = None,
        segments: SegmentReuse | None = None,
    ) -> None:
        self._engine = engine
        self._reuses_segments = segments is not None
        self._host = host
        self.activity = activity or Activity()
        self._blobs = blobs
        self._producer = producer
        self._worker_id = worker_id
        self._retry = retry
        self._call = call
        self._audio = SegmentMaker(engine, blobs, call, self.activity, segments)
        self.acknowledgements = Acknowledgements(publisher)
        """What this runner handed to the log and Kafka has not acknowledged yet: the worker waits for it."""
        self._joined: TraceContext | None = None  # the completion a coalesced duplicate takes its audio from

    @property
    def blobs(self) -> AudioSink:
        return self._blobs

    async def run(self, attempt: Attempt) -> AttemptResult:
        """Run ``attempt``: claim, plan, render every segment, complete; or release, or fail.

        Whatever goes wrong after the claim ends the attempt with an event: a request the engine
        cannot speak fails the job; an engine hiccup or a blob that could not be written releases it
        for a retry (or fails it once its attempts are spent). Only an unreachable broker escapes
        (``BrokerUnavailable``): nothing can be recorded then, and the worker tries the record again.
        """
        job, description = attempt.job, self._engine.description
        parent = job.trace or tracing.current() or job_trace_of(job.job_id)
        span = tracing.start_span(
            "synthesis attempt",
            parent,
            attributes={
                "voxlog.job_id": str(job.job_id),
                "voxlog.attempt": attempt.number,
                "voxlog.worker": self._worker_id,
                "voxlog.engine": description.name,
                "voxlog.device": description.device,
            },
        )
        outcome = "interrupted"  # by a broker that went away, a cancellation from the watchdog
        try:
            with tracing.within(span.context):
                result = await self._attempt(attempt)
            outcome = result.kind
            return result
        finally:
            span.end(attributes={"voxlog.outcome": outcome})

    async def _attempt(self, attempt: Attempt) -> AttemptResult:
        job, number, ledger = attempt.job, attempt.number, attempt.ledger
        if number > self._retry.max_attempts:
            last = f"; the last: {job.last_error}" if job.last_error else ""
            message = f"{number - 1} attempts failed{last}"
            return await self._fail(ledger, job, number - 1, "attempts_exhausted", message, number - 1)
        await self._claim(attempt)
        self.activity.begin(job.job_id, job.fingerprint, number, len(attempt.request.text))
        if attempt.turns is not None:
            attempt.turns.progressed(len(attempt.request.text))
        completed = False
        try:
            result = await self._synthesize(attempt)
            completed = result.kind == "completed"
            return result
        except InputRejected as exc:
            return await self._fail(ledger, job, number, "input_rejected", str(exc), number)
        except (TransientEngineError, BlobWriteFailed) as exc:
            if number >= self._retry.max_attempts:
                code = "engine_error" if isinstance(exc, TransientEngineError) else "storage_error"
                return await self._fail(ledger, job, number, code, str(exc), number)
            return await self._release(attempt, "transient", str(exc), backoff=True)
        except asyncio.CancelledError:
            raise  # the watchdog gives the job back (abandon), and records what the attempt sent
        except BaseException:
            self.acknowledgements.discard()  # the worker tries the record again, as a new attempt
            raise
        finally:
            self.activity.end(job.job_id, completed=completed)
            if attempt.turns is not None:
                attempt.turns.finished()

    async def abandon(self, attempt: Attempt, message: str) -> AttemptResult:
        """Give the job back while its engine call never returns (the watchdog's last resort)."""
        self.activity.end(attempt.job.job_id, completed=False)
        return await self._release(attempt, "transient", message, backoff=True)

    async def _claim(self, attempt: Attempt) -> None:
        job, description = attempt.job, self._engine.description
        claim = JobClaimedPayload(
            worker_id=self._worker_id,
            device=description.device,
            engine=description.name,
            model_version=description.model_version,
            host=self._host,
            waited=attempt.waited,
        )
        # A fast node's claim travels with the first segment: one request to the broker instead of two.
        hold = self.activity.surely_within(len(attempt.request.text), CLAIM_RIDES_ALONG_S)
        await self._emit(attempt.ledger, JobClaimed, job, attempt.number, claim, wait=False, hold=hold)
        if attempt.number == 1 and job.submitted_at is not None:
            JOB_PHASE_SECONDS.labels("queued").observe(max((utc_now() - job.submitted_at).total_seconds(), 0.0))

    async def _synthesize(self, attempt: Attempt) -> AttemptResult:
        claimed_at, request = time.perf_counter(), attempt.request
        plan = await self._blocking(
            self._engine.plan,
            request.text,
            request.lang,
            request.normalize,
            request.input_format,
            request.pronunciations,
        )
        self.activity.planned(attempt.job.job_id, len(plan))
        progress = _Progress(attempt, plan, claimed_at, time.perf_counter())
        progress.remaining_chars = sum(len(segment.text) for segment in plan)
        if attempt.turns is not None:
            attempt.turns.progressed(progress.remaining_chars)
        for segment in plan:
            ended = await self._step(progress, segment)
            if ended is not None:
                return ended
        return await self._complete(progress)

    async def _step(self, progress: _Progress, segment: PlannedSegment) -> AttemptResult | None:
        """One segment: stop at its boundary if the attempt must, else make its audio and hand its event to
        the log. Returns how the attempt ended, or ``None`` to go on."""
        if (refused := self.acknowledgements.refusal()) is not None:
            raise refused  # the rest are left to fail or land; the worker tries the record again either way
        ended = await self._at_boundary(progress, segment.index)
        if ended is not None:
            return ended
        started_ns, started = tracing.now_ns(), time.perf_counter()
        attempt = progress.attempt
        if attempt.turns is not None:  # its work left counts down only once it is made: told apart here
            attempt.turns.last_segment = segment is progress.plan[-1]
        try:
            audio = await self._audio.make(segment, attempt.request, attempt.job.job_id, attempt.turns)
        except TurnWithdrawn:  # given back while it waited for the engine: released here
            return await self._at_boundary(progress, segment.index)
        if attempt.turns is not None:
            progress.remaining_chars -= len(segment.text)
            attempt.turns.progressed(progress.remaining_chars)
        progress.total_ms += audio.duration_ms
        if not progress.for_duplicate:
            synthesis_s = time.perf_counter() - started
            await self._emit_segment(progress, segment, audio)
            self._segment_span(progress.attempt, segment, audio, started_ns, synthesis_s)
        return None

    def _segment_span(
        self, attempt: Attempt, segment: PlannedSegment, audio: SegmentAudio, started_ns: int, synthesis_s: float
    ) -> None:
        """The span of a segment's ``SegmentProduced``, from the start of its synthesis to its hand-off to the log."""
        attributes: dict[str, tracing.Attribute] = {
            "voxlog.engine": self._engine.description.name,
            "voxlog.segment.index": segment.index,
            "voxlog.segment.chars": len(segment.text),
            "voxlog.segment.audio_ms": audio.duration_ms,
            "voxlog.segment.rtf": round(synthesis_s / max(audio.duration_ms / 1000, 1e-3), 4),
            "voxlog.segment.reused": audio.reused,
        }
        event_id = derive_event_id(attempt.job.job_id, "SegmentProduced", attempt.number, segment.index)
        self._record_span("segment synthesis", event_id, started_ns, attributes)

    async def _at_boundary(self, progress: _Progress, index: int) -> AttemptResult | None:
        """Before segment ``index``: release the job if the worker wants it back, stop if it was cancelled
        (unless a duplicate waits for its audio: then the rest is rendered for it, and not recorded)."""
        attempt, of = progress.attempt, len(progress.plan)
        abort = attempt.abort.reason
        if abort is not None:
            if progress.for_duplicate:  # the duplicate reuses what was rendered, and renders the rest itself
                return await self._cancelled(attempt, index, of)
            message = f"released at segment {index}: {abort.message}"
            return await self._release(attempt, abort.reason, message, backoff=abort.backoff)
        if progress.for_duplicate or attempt.cancel is None or not await attempt.cancel.cancelled():
            return None
        if not self._reuses_segments or not await attempt.cancel.wanted_elsewhere():
            return await self._cancelled(attempt, index, of)
        progress.for_duplicate = True
        log.info("job cancelled; a duplicate waits: rendering the rest for it", job_id=str(attempt.job.job_id))
        return None

    async def _emit_segment(self, progress: _Progress, segment: PlannedSegment, audio: SegmentAudio) -> None:
        """Hand the segment's event to the log; the attempt's last rides in its completion instead (one record
        fewer: a one-sentence job is its claim and its completion)."""
        attempt = progress.attempt
        payload = SegmentProducedPayload(
            index=segment.index,
            span=TextSpan(start=segment.start, end=segment.end, text=segment.text),
            audio=audio.ref,
            duration_ms=audio.duration_ms,
            sample_rate=self._engine.description.sample_rate,
            byte_length=audio.byte_length,
            segment_key=audio.key,
            reused=audio.reused,
            words=audio.words,
        )
        if segment is progress.plan[-1]:
            progress.last = payload
        else:
            await self._emit(
                attempt.ledger, SegmentProduced, attempt.job, attempt.number, payload, segment.index, wait=False
            )
        if segment is progress.plan[0]:
            JOB_PHASE_SECONDS.labels("first_segment").observe(time.perf_counter() - progress.claimed_at)

    async def _complete(self, progress: _Progress) -> AttemptResult:
        attempt, segments, total_ms = progress.attempt, len(progress.plan), progress.total_ms
        if progress.for_duplicate:
            return await self._cancelled(attempt, segments, segments)
        payload = JobCompletedPayload(
            segment_count=segments,
            total_duration_ms=total_ms,
            waited=attempt.waited_while_claimed(),
            segment=progress.last,
        )
        wait = attempt.wait_for_completion
        recorded = await self._emit(attempt.ledger, JobCompleted, attempt.job, attempt.number, payload, wait=wait)
        log.info(
            "job completed",
            job_id=str(attempt.job.job_id),
            fingerprint=attempt.job.fingerprint,
            attempt=attempt.number,
            segments=segments,
            audio_ms=total_ms,
            synthesis_ms=round(1000 * (time.perf_counter() - progress.planned_at)),
        )
        return AttemptResult("completed", segments, total_ms, recorded=None if wait else recorded)

    async def _cancelled(self, attempt: Attempt, at: int, of: int) -> AttemptResult:
        """End an attempt whose job was cancelled: nothing more is recorded (``JobCancelled`` is on the log
        already); what the attempt did record is acknowledged before the offset moves past the job."""
        await self.acknowledgements.wait_all()
        job_id = str(attempt.job.job_id)
        log.info("job cancelled: synthesis stopped", job_id=job_id, attempt=attempt.number, segment=at, of=of)
        return AttemptResult("cancelled", at)

    async def complete_from_cache(self, job: JobView, cached: CachedResult, ledger: Recorder) -> AttemptResult:
        """Coalesce: complete ``job`` with a live result another job produced, without synthesis."""
        payload = JobCompletedPayload(
            segment_count=cached.segment_count,
            total_duration_ms=cached.total_duration_ms,
            cache_hit=True,
            source_job_id=cached.job_id,
        )
        # Its own id: a real completion of the same attempt (a zombie's, say) is another fact.
        self._joined = cached.trace  # its span links to the synthesis whose audio it takes
        try:
            await self._emit(ledger, JobCompleted, job, job.attempt, payload, "cache", str(cached.job_id))
        finally:
            self._joined = None
        return AttemptResult("completed", cached.segment_count, cached.total_duration_ms)

    async def fail_without_attempt(self, job: JobView, code: str, message: str, ledger: Recorder) -> AttemptResult:
        """Fail ``job`` before any attempt could start (its request cannot be found, say)."""
        return await self._fail(ledger, job, job.attempt, code, message, job.attempt)

    async def _blocking(self, fn: Callable[..., T], *args: object) -> T:
        result: T = await self._call(fn, *args)
        return result

    async def _emit(
        self,
        ledger: Recorder,
        cls: _EmittedEvent,
        job: JobView,
        number: int,
        payload: Any,
        *parts: int | str,
        wait: bool = True,
        hold: bool = False,
    ) -> asyncio.Future[bool] | None:
        """Hand an event of attempt ``number`` to the log; returns its *recorded* future (``None`` when held).

        A claim or a segment is not waited for (``wait=False``): the attempt goes on while Kafka
        acknowledges it, and consecutive events travel in one request. An attempt's last event waits for
        them all, in order, so that the worker's offset moves past a job only once everything its attempt
        recorded is acknowledged (acks=all). A held event (``hold``) goes with the next one, in its request."""
        event = job_event(cls, job.job_id, job.fingerprint, number, self._producer, payload, *parts)
        started_ns = tracing.now_ns()
        if hold:
            self.acknowledgements.hold(event, job.partition, ledger)
            recorded = None
        else:
            recorded = await self.acknowledgements.send(event, job.partition, ledger)
            if wait:
                await self.acknowledgements.wait_all()
        if cls is not SegmentProduced:  # a segment's span covers its synthesis (_step)
            self._record_span(_span_name(event), event.event_id, started_ns, _span_attributes(event))
        return recorded

    def _record_span(
        self, name: str, event_id: uuid.UUID, started_ns: int, attributes: dict[str, tracing.Attribute]
    ) -> None:
        """The span of the record ``event_id`` (its id derived from the event's, as its ``traceparent`` names
        it), a child of the work in hand: the attempt, or for a coalesced duplicate its job."""
        parent = tracing.current()
        if parent is not None and tracing.exporting():
            links = (self._joined,) if self._joined is not None else ()
            tracing.start_span(
                name,
                parent,
                span_id_of(event_id),
                kind="producer",
                links=links,
                start_ns=started_ns,
                attributes=attributes,
            ).end()

    async def _release(self, attempt: Attempt, reason: ReleaseReason, message: str, *, backoff: bool) -> AttemptResult:
        job, number = attempt.job, attempt.number
        not_before = utc_now() + self._retry.backoff(number) if backoff else None
        payload = JobReleasedPayload(reason=reason, failed_attempt=number, not_before=not_before, message=message)
        await self._emit(attempt.ledger, JobReleased, job, number, payload)
        log.warning("job released", job_id=str(job.job_id), attempt=number, reason=reason, message=message)
        return AttemptResult("released")

    async def _fail(
        self, ledger: Recorder, job: JobView, number: int, code: str, message: str, attempts: int
    ) -> AttemptResult:
        payload = JobFailedPayload(reason_code=code, message=message[:2000], attempts=attempts)
        await self._emit(ledger, JobFailed, job, number, payload)
        log.warning("job failed", job_id=str(job.job_id), attempt=number, reason=code, message=message)
        return AttemptResult("failed")
