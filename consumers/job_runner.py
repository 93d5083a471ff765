"""One attempt at one job: claim, synthesize segment by segment, complete (or release, or fail).

The worker decides what to do with a job and hands the runner an
:class:`Attempt`; the runner emits the events. Engine calls go through
``call``: the node's FIFO, whose one thread runs the model, so the event loop
keeps heartbeating and polling while the model works, and a node never runs
two syntheses at once. Each segment's audio is in the blob store before its
``SegmentProduced`` is published; every event id is derived from the job,
attempt and index, so a repeated emission is applied once.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final, TypeVar

import numpy as np
import numpy.typing as npt
import structlog

from consumers.activity import Activity
from consumers.cancellation import CancelWatch
from consumers.errors import BlobWriteFailed, InputRejected, TransientEngineError
from consumers.ledger import JobView
from consumers.ports import (
    Acknowledgement,
    AudioSink,
    CachedResult,
    EventLog,
    PlannedSegment,
    ReusableSegment,
    SegmentReuse,
    SpeechEngine,
)
from consumers.segment_reuse import LOOKUP_WORTH_S
from contracts import (
    AudioRef,
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
    SynthesisRequest,
    TextSpan,
    derive_event_id,
    type_name,
    utc_now,
)
from contracts.events import ReleaseReason
from contracts.fingerprint import segment_key
from foundation.audio import encode_wav
from foundation.metrics import JOB_PHASE_SECONDS, SEGMENTS_REUSED

log = structlog.get_logger("voxlog.worker")
T = TypeVar("T")
CLAIM_RIDES_ALONG_S: Final = 0.05
"""A claim waits for the first segment when the node has measured that it comes within this long."""
_EmittedEvent = type[JobClaimed] | type[SegmentProduced] | type[JobCompleted] | type[JobReleased] | type[JobFailed]
Record = Callable[[JobEvent, int], object]
"""Sees every event the runner emits, with its offset, once Kafka has acknowledged it (the ledger's record_own)."""


@dataclass(frozen=True)
class Abort:
    """Why to give a job back at the next segment boundary, and whether its retry waits a backoff."""

    reason: ReleaseReason
    message: str
    backoff: bool = False


@dataclass(frozen=True)
class Attempt:
    """One attempt at one job, as the worker hands it to the runner."""

    job: JobView
    request: SynthesisRequest
    number: int
    record: Record
    abort: Callable[[], Abort | None]
    """Asked at every segment boundary: why to give the job back, or ``None`` to go on."""
    cancel: CancelWatch | None = None
    """Asked at segment boundaries whether the job was cancelled (see :mod:`consumers.cancellation`)."""
    settled: Callable[[bool], None] | None = None
    """Given, the attempt's completion is not waited for: the worker goes on, and this is called once its
    events are acknowledged (``True``), or once one of them was refused or dropped (``False``)."""


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int
    base_delay_s: float
    max_delay_s: float = 60.0

    def backoff(self, attempt: int) -> timedelta:
        """Exponential backoff with equal jitter: uniform in [c/2, c], c = min(max, base * 2^(attempt-1)).

        Half the delay is kept so that a retry never comes at once; the other half is random so
        that jobs that failed together do not come back together."""
        ceiling = min(self.max_delay_s, self.base_delay_s * 2 ** max(0, attempt - 1))
        return timedelta(seconds=random.uniform(ceiling / 2, ceiling))  # noqa: S311 - jitter, not crypto


@dataclass(frozen=True)
class Outcome:
    kind: str  # completed | released | failed | cancelled
    segments: int = 0
    total_duration_ms: int = 0


@dataclass(frozen=True)
class _Pending:
    event: JobEvent
    ack: Acknowledgement
    record: Record
    settled: Callable[[bool], None] | None = None


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
        self._segments = segments
        self._host = host
        self.activity = activity or Activity()
        self._blobs = blobs
        self._publisher = publisher
        self._producer = producer
        self._worker_id = worker_id
        self._retry = retry
        self._call = call
        # Events handed to the log and not yet acknowledged, in order (see _emit), with what to record each
        # with once acknowledged, and for a completion not waited for, whom to tell how it went.
        self._pending: list[_Pending] = []
        # A claim that goes with the attempt's next event, and the partition it goes to.
        self._held: tuple[JobEvent, int | None] | None = None

    async def _blocking(self, fn: Callable[..., T], *args: object) -> T:
        result: T = await self._call(fn, *args)
        return result

    async def run(self, attempt: Attempt) -> Outcome:
        """Run ``attempt``: claim, plan, render every segment, complete; or release, or fail.

        Whatever goes wrong after the claim ends the attempt with an event: a request the engine
        cannot speak fails the job; an engine hiccup or a blob that could not be written releases it
        for a retry (or fails it once its attempts are spent). Only an unreachable broker escapes
        (``BrokerUnavailable``): nothing can be recorded then, and the worker tries the record again.
        """
        job, number, record = attempt.job, attempt.number, attempt.record
        if number > self._retry.max_attempts:
            last = f"; the last: {job.last_error}" if job.last_error else ""
            message = f"{number - 1} attempts failed{last}"
            return await self._fail(record, job, number - 1, "attempts_exhausted", message, number - 1)
        description = self._engine.description
        claim = JobClaimedPayload(
            worker_id=self._worker_id,
            device=description.device,
            engine=description.name,
            model_version=description.model_version,
            host=self._host,
        )
        # A fast node's claim travels with the first segment: one request to the broker instead of two.
        hold = self.activity.surely_within(len(attempt.request.text), CLAIM_RIDES_ALONG_S)
        await self._emit(record, JobClaimed, job, number, claim, settle=False, hold=hold)
        if number == 1 and job.submitted_at is not None:
            JOB_PHASE_SECONDS.labels("queued").observe(max((utc_now() - job.submitted_at).total_seconds(), 0.0))
        self.activity.begin(job.job_id, job.fingerprint, number, len(attempt.request.text))
        completed = False
        try:
            outcome = await self._synthesize(attempt)
            completed = outcome.kind == "completed"
            return outcome
        except InputRejected as exc:
            return await self._fail(record, job, number, "input_rejected", str(exc), number)
        except (TransientEngineError, BlobWriteFailed) as exc:
            if number >= self._retry.max_attempts:
                code = "engine_error" if isinstance(exc, TransientEngineError) else "storage_error"
                return await self._fail(record, job, number, code, str(exc), number)
            return await self._release(record, job, number, "transient", str(exc), backoff=True)
        except asyncio.CancelledError:
            raise  # the watchdog gives the job back (abandon), and records what the attempt sent
        except BaseException:
            self._discard_pending()  # the worker tries the record again, as a new attempt
            raise
        finally:
            self.activity.end(completed=completed)

    async def abandon(self, attempt: Attempt, message: str) -> Outcome:
        """Give the job back while its engine call never returns (the watchdog's last resort)."""
        self.activity.end(completed=False)
        return await self._release(attempt.record, attempt.job, attempt.number, "transient", message, backoff=True)

    async def _synthesize(self, attempt: Attempt) -> Outcome:
        claimed = time.perf_counter()
        job, request, number, record = attempt.job, attempt.request, attempt.number, attempt.record
        description = self._engine.description
        plan = await self._blocking(self._engine.plan, request.text, request.lang, request.normalize)
        self.activity.planned(len(plan))
        total_ms = 0
        started = time.perf_counter()
        for_duplicate = False  # cancelled, but a duplicate waits: render the rest for it, record nothing
        for segment in plan:
            self._raise_if_refused()
            abort = attempt.abort()
            if abort is not None:
                if for_duplicate:  # the duplicate reuses what was rendered, and renders the rest itself
                    return await self._cancelled(record, job, number, segment.index, len(plan))
                message = f"released at segment {segment.index}: {abort.message}"
                return await self._release(record, job, number, abort.reason, message, backoff=abort.backoff)
            if not for_duplicate and attempt.cancel is not None and await attempt.cancel.cancelled():
                if self._segments is None or not await attempt.cancel.wanted_elsewhere():
                    return await self._cancelled(record, job, number, segment.index, len(plan))
                for_duplicate = True
                log.info("job cancelled; a duplicate waits: rendering the rest for it", job_id=str(job.job_id))
            key = self._segment_key(segment, request)
            reuse = None
            if key and self._segments is not None:
                speed = self.activity.chars_per_s  # unknown yet: assume the engine is slow enough to ask
                worth = speed is None or len(segment.text) / speed > LOOKUP_WORTH_S
                reuse = await self._segments.find(key, ask_projection=worth)
            if reuse is not None and reuse.sample_rate == description.sample_rate and await self._still_stored(reuse):
                ref, byte_length, duration_ms = reuse.audio, reuse.byte_length, reuse.duration_ms
                self.activity.reused(len(segment.text))
                SEGMENTS_REUSED.labels(description.name).inc()
            else:
                reuse = None
                rendering = time.perf_counter()
                samples = await self._blocking(self._engine.render, segment, request.voice, request.speed)
                self.activity.rendered(time.perf_counter() - rendering)
                try:  # encoded and written in one hop off the loop
                    ref, byte_length = await asyncio.to_thread(self._store, samples, description.sample_rate)
                except OSError as exc:
                    raise BlobWriteFailed(f"cannot store segment {segment.index}'s audio: {exc}") from exc
                duration_ms = round(1000 * len(samples) / description.sample_rate)
                if key and self._segments is not None:
                    made = ReusableSegment(ref, duration_ms, byte_length, description.sample_rate)
                    self._segments.remember(key, made)
            total_ms += duration_ms
            if for_duplicate:
                continue
            await self._emit(
                record,
                SegmentProduced,
                job,
                number,
                SegmentProducedPayload(
                    index=segment.index,
                    span=TextSpan(start=segment.start, end=segment.end, text=segment.text),
                    audio=ref,
                    duration_ms=duration_ms,
                    sample_rate=description.sample_rate,
                    byte_length=byte_length,
                    segment_key=key,
                    reused=reuse is not None,
                ),
                segment.index,
                settle=False,
            )
            if segment is plan[0]:
                JOB_PHASE_SECONDS.labels("first_segment").observe(time.perf_counter() - claimed)
        if for_duplicate:
            return await self._cancelled(record, job, number, len(plan), len(plan))
        payload = JobCompletedPayload(segment_count=len(plan), total_duration_ms=total_ms)
        later = attempt.settled is not None  # the worker settles it before anything depends on it
        await self._emit(record, JobCompleted, job, number, payload, settle=not later, settled=attempt.settled)
        log.info(
            "job completed",
            job_id=str(job.job_id),
            fingerprint=job.fingerprint,
            attempt=number,
            segments=len(plan),
            audio_ms=total_ms,
            synthesis_ms=round(1000 * (time.perf_counter() - started)),
        )
        return Outcome("completed", len(plan), total_ms)

    async def _cancelled(self, record: Record, job: JobView, attempt: int, at: int, of: int) -> Outcome:
        """End an attempt whose job was cancelled: nothing more is recorded (``JobCancelled`` is on the log
        already); what the attempt did record is acknowledged before the offset moves past the job."""
        await self._settle(record)
        log.info("job cancelled: synthesis stopped", job_id=str(job.job_id), attempt=attempt, segment=at, of=of)
        return Outcome("cancelled", at)

    def _segment_key(self, segment: PlannedSegment, request: SynthesisRequest) -> str | None:
        if not segment.ids:
            return None
        description = self._engine.description
        return segment_key(
            engine=description.name,
            model_version=description.model_version,
            voice=request.voice,
            speed=request.speed,
            ids=segment.ids,
        )

    async def _still_stored(self, reuse: ReusableSegment) -> bool:
        return await asyncio.to_thread(self._blobs.touch, [reuse.audio])

    @property
    def blobs(self) -> AudioSink:
        return self._blobs

    def _store(self, samples: npt.NDArray[np.float32], sample_rate: int) -> tuple[AudioRef, int]:
        wav = encode_wav(samples, sample_rate)
        return self._blobs.put(wav, ".wav"), len(wav)

    async def complete_from_cache(self, job: JobView, cached: CachedResult, record: Record) -> Outcome:
        """Coalesce: complete ``job`` with a live result another job produced, without synthesis."""
        payload = JobCompletedPayload(
            segment_count=cached.segment_count,
            total_duration_ms=cached.total_duration_ms,
            cache_hit=True,
            source_job_id=cached.job_id,
        )
        # Its own id: a real completion of the same attempt (a zombie's, say) is another fact.
        await self._emit(record, JobCompleted, job, job.attempt, payload, "cache", str(cached.job_id))
        return Outcome("completed", cached.segment_count, cached.total_duration_ms)

    async def fail_without_attempt(self, job: JobView, code: str, message: str, record: Record) -> Outcome:
        """Fail ``job`` before any attempt could start (its request cannot be found, say)."""
        return await self._fail(record, job, job.attempt, code, message, job.attempt)

    async def _emit(
        self,
        record: Record,
        cls: _EmittedEvent,
        job: JobView,
        attempt: int,
        payload: Any,
        *parts: int | str,
        settle: bool = True,
        hold: bool = False,
        settled: Callable[[bool], None] | None = None,
    ) -> None:
        """Hand an event to the log. A claim or a segment is not waited for (``settle=False``): the
        attempt goes on while Kafka acknowledges it, and consecutive events travel in one request. An
        attempt's last event settles them all, in order, so that the worker's offset moves past a job
        only once everything its attempt recorded is acknowledged (acks=all). A held event (``hold``) waits
        for the next one and goes in its request."""
        event = cls(
            event_id=derive_event_id(job.job_id, type_name(cls), attempt, *parts),
            job_id=job.job_id,
            fingerprint=job.fingerprint,
            attempt=attempt,
            occurred_at=utc_now(),
            producer=self._producer,
            payload=payload,
        )
        if hold:  # sent with the next event, or settled (whatever ends the attempt sends it first)
            self._held = (event, job.partition)
            return
        await self._send_held(record)
        self._pending.append(_Pending(event, await self._publisher.send(event, job.partition), record, settled))
        if settle:
            await self._settle(record)

    async def _send_held(self, record: Record) -> None:
        if self._held is not None:
            (held, partition), self._held = self._held, None
            self._pending.append(_Pending(held, await self._publisher.send(held, partition), record))

    def pending_fingerprints(self) -> set[str]:
        """Fingerprints with events handed to the log and not yet acknowledged."""
        return {pending.event.fingerprint for pending in self._pending}

    async def settle(self) -> None:
        """Wait for every event handed to the log (see :meth:`_settle`)."""
        await self._settle(None)

    async def _settle(self, record: Record | None) -> None:
        """Wait for every pending acknowledgement; record each acknowledged event, in order, tell each
        completion not waited for how it went, then raise the first refusal (``BrokerUnavailable``) if there
        was one. A completion is told ``False`` when anything settled with it was refused: the worker then
        acts on its job again, and finds it done if it was."""
        if record is not None:
            await self._send_held(record)
        pending, self._pending = self._pending, []
        outcomes = await asyncio.gather(*(p.ack for p in pending), return_exceptions=True)
        refused: BaseException | None = None
        for p, outcome in zip(pending, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                refused = refused or outcome
            else:
                p.record(p.event, outcome.offset)
        for p in pending:
            if p.settled is not None:
                p.settled(refused is None)
        if refused is not None:
            raise refused

    def _raise_if_refused(self) -> None:
        """Between segments: stop at once when the log refused one of the attempt's events (the rest are
        left to fail or land; the worker tries the record again as a new attempt either way)."""
        for p in self._pending:
            if p.ack.done() and (refused := p.ack.exception()) is not None:
                self._discard_pending()
                raise refused

    def _discard_pending(self) -> None:
        self._held = None
        pending, self._pending = self._pending, []
        # Gathered (and never awaited), so that a refusal nobody waits for is not logged as lost.
        asyncio.gather(*(p.ack for p in pending), return_exceptions=True)
        for p in pending:
            if p.settled is not None:
                p.settled(False)  # not known to be recorded: its job is acted on again

    async def _release(
        self, record: Record, job: JobView, attempt: int, reason: ReleaseReason, message: str, *, backoff: bool
    ) -> Outcome:
        not_before = utc_now() + self._retry.backoff(attempt) if backoff else None
        payload = JobReleasedPayload(reason=reason, failed_attempt=attempt, not_before=not_before, message=message)
        await self._emit(record, JobReleased, job, attempt, payload)
        log.warning("job released", job_id=str(job.job_id), attempt=attempt, reason=reason, message=message)
        return Outcome("released")

    async def _fail(
        self, record: Record, job: JobView, attempt: int, code: str, message: str, attempts: int
    ) -> Outcome:
        payload = JobFailedPayload(reason_code=code, message=message[:2000], attempts=attempts)
        await self._emit(record, JobFailed, job, attempt, payload)
        log.warning("job failed", job_id=str(job.job_id), attempt=attempt, reason=code, message=message)
        return Outcome("failed")
