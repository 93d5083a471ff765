"""One attempt at one job: claim, synthesize segment by segment, complete (or release, or fail).

Engine calls go through ``call``: the node's FIFO, whose one thread runs the
model, so the event loop keeps heartbeating and polling while the model
works, and a node never runs two syntheses at once. Each segment's audio is in the blob store before its
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
from typing import Any, TypeVar

import structlog

from consumers.errors import InputRejected, TransientEngineError
from consumers.ledger import JobView
from consumers.ports import AudioSink, CachedResult, SpeechEngine
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
    SynthesisRequest,
    TextSpan,
    derive_event_id,
    utc_now,
)
from contracts.events import ReleaseReason
from voxlog.audio import encode_wav
from voxlog.kafka import EventPublisher

log = structlog.get_logger("voxlog.worker")
T = TypeVar("T")
_EmittedEvent = type[JobClaimed] | type[SegmentProduced] | type[JobCompleted] | type[JobReleased] | type[JobFailed]


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0

    def backoff(self, attempt: int) -> timedelta:
        """Exponential backoff with full jitter: uniform in [0, min(max, base * 2^(attempt-1))]."""
        ceiling = min(self.max_delay_s, self.base_delay_s * 2 ** max(0, attempt - 1))
        return timedelta(seconds=random.uniform(ceiling / 2, ceiling))  # noqa: S311 - jitter, not crypto


@dataclass(frozen=True)
class Outcome:
    kind: str  # completed | released | failed
    segments: int = 0
    total_duration_ms: int = 0


class JobRunner:
    def __init__(
        self,
        engine: SpeechEngine,
        blobs: AudioSink,
        publisher: EventPublisher,
        producer: Producer,
        worker_id: str,
        retry: RetryPolicy,
        call: Callable[..., Awaitable[Any]],
    ) -> None:
        self._engine = engine
        self._blobs = blobs
        self._publisher = publisher
        self._producer = producer
        self._worker_id = worker_id
        self._retry = retry
        self._call = call
        self._observe: Callable[[JobEvent], object] = lambda _: None

    async def _blocking(self, fn: Callable[..., T], *args: object) -> T:
        result: T = await self._call(fn, *args)
        return result

    async def run(
        self,
        job: JobView,
        request: SynthesisRequest,
        attempt: int,
        abort: Callable[[], ReleaseReason | None],
        observe: Callable[[JobEvent], object],
    ) -> Outcome:
        """Run attempt ``attempt``.

        ``abort`` is asked at every segment boundary whether to give the job
        back; ``observe`` sees every event once Kafka has acknowledged it, so
        the ledger knows the outcome before the worker reads it back.
        """
        self._observe = observe
        if attempt > self._retry.max_attempts:
            return await self._fail(job, attempt - 1, "attempts_exhausted", "no attempt left", attempt - 1)
        try:
            plan = await self._blocking(self._engine.plan, request.text, request.lang)
        except InputRejected as exc:
            return await self._fail(job, job.attempt, "input_rejected", str(exc), job.attempt)
        description = self._engine.description
        await self._emit(
            JobClaimed,
            job,
            attempt,
            JobClaimedPayload(
                worker_id=self._worker_id,
                device=description.device,
                engine=description.name,
                model_version=description.model_version,
            ),
        )
        total_ms = 0
        started = time.perf_counter()
        for segment in plan:
            reason = abort()
            if reason is not None:
                return await self._release(job, attempt, reason, f"released at segment {segment.index}", backoff=False)
            try:
                samples = await self._blocking(self._engine.render, segment, request.voice, request.speed)
            except InputRejected as exc:
                return await self._fail(job, attempt, "input_rejected", str(exc), attempt)
            except TransientEngineError as exc:
                if attempt >= self._retry.max_attempts:
                    return await self._fail(job, attempt, "engine_error", str(exc), attempt)
                return await self._release(job, attempt, "transient", str(exc), backoff=True)
            wav = encode_wav(samples, description.sample_rate)
            ref = await asyncio.to_thread(self._blobs.put, wav, ".wav")
            duration_ms = round(1000 * len(samples) / description.sample_rate)
            total_ms += duration_ms
            await self._emit(
                SegmentProduced,
                job,
                attempt,
                SegmentProducedPayload(
                    index=segment.index,
                    span=TextSpan(start=segment.start, end=segment.end, text=segment.text),
                    audio=ref,
                    duration_ms=duration_ms,
                    sample_rate=description.sample_rate,
                    byte_length=len(wav),
                ),
                segment.index,
            )
        await self._emit(
            JobCompleted, job, attempt, JobCompletedPayload(segment_count=len(plan), total_duration_ms=total_ms)
        )
        log.info(
            "job completed",
            job_id=str(job.job_id),
            fingerprint=job.fingerprint,
            attempt=attempt,
            segments=len(plan),
            audio_ms=total_ms,
            synthesis_ms=round(1000 * (time.perf_counter() - started)),
        )
        return Outcome("completed", len(plan), total_ms)

    async def complete_from_cache(
        self, job: JobView, cached: CachedResult, observe: Callable[[JobEvent], object]
    ) -> Outcome:
        """Coalesce: complete ``job`` with a live result another job produced, without synthesis."""
        self._observe = observe
        payload = JobCompletedPayload(
            segment_count=cached.segment_count,
            total_duration_ms=cached.total_duration_ms,
            cache_hit=True,
            source_job_id=cached.job_id,
        )
        await self._emit(JobCompleted, job, job.attempt, payload)
        return Outcome("completed", cached.segment_count, cached.total_duration_ms)

    async def fail_without_attempt(
        self, job: JobView, code: str, message: str, observe: Callable[[JobEvent], object]
    ) -> Outcome:
        """Fail ``job`` before any attempt could start (its request cannot be found, say)."""
        self._observe = observe
        return await self._fail(job, job.attempt, code, message, job.attempt)

    async def _emit(self, cls: _EmittedEvent, job: JobView, attempt: int, payload: Any, *parts: int) -> None:
        event_type: str = cls.model_fields["type"].default
        event = cls(
            event_id=derive_event_id(job.job_id, event_type, attempt, *parts),
            job_id=job.job_id,
            fingerprint=job.fingerprint,
            attempt=attempt,
            occurred_at=utc_now(),
            producer=self._producer,
            payload=payload,
        )
        await self._publisher.publish(event)
        self._observe(event)

    async def _release(
        self, job: JobView, attempt: int, reason: ReleaseReason, message: str, *, backoff: bool
    ) -> Outcome:
        not_before = utc_now() + self._retry.backoff(attempt) if backoff else None
        payload = JobReleasedPayload(reason=reason, failed_attempt=attempt, not_before=not_before, message=message)
        await self._emit(JobReleased, job, attempt, payload)
        log.warning("job released", job_id=str(job.job_id), attempt=attempt, reason=reason, message=message)
        return Outcome("released")

    async def _fail(self, job: JobView, attempt: int, code: str, message: str, attempts: int) -> Outcome:
        payload = JobFailedPayload(reason_code=code, message=message[:2000], attempts=attempts)
        await self._emit(JobFailed, job, attempt, payload)
        log.warning("job failed", job_id=str(job.job_id), attempt=attempt, reason=code, message=message)
        return Outcome("failed")
