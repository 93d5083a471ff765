"""Hypothesis strategies for job logs: what a partition of the jobs topic can hold.

``realistic_logs`` plays the actors (over a few texts, so that jobs share
fingerprints): the API queues a job (sometimes twice,
as a client retrying with its Idempotency-Key does); workers claim it one
attempt after another, render segments, and complete, fail, release it or
vanish (killed, or stalled past the session timeout); a stalled worker's
late segments and completion come after the next attempt's claim, wherever
Kafka's per-producer order allows; a cache hit completes a queued or
released job; the client may cancel it at any point; and any emitted event may be delivered again later (an exact
copy, same event id). Several jobs share the partition, interleaved.

``arbitrary_logs`` is every sequence of event types and attempts after a
``JobQueued``, each event with its own id: whatever the state machine is
given, the fold, the ledger and the projector must agree on it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from hypothesis import strategies as st

from contracts import (
    AudioRef,
    CacheEvicted,
    CacheEvictedPayload,
    DegradedFrom,
    EvictionReason,
    JobCancelled,
    JobCancelledPayload,
    JobClaimed,
    JobClaimedPayload,
    JobCompleted,
    JobCompletedPayload,
    JobEvent,
    JobFailed,
    JobFailedPayload,
    JobQueued,
    JobQueuedPayload,
    JobReleased,
    JobReleasedPayload,
    Priority,
    SegmentProduced,
    SegmentProducedPayload,
    TextSpan,
    derive_event_id,
)
from tests.support.events import PRODUCER, T0, request

_SHA = "cd" * 32


@dataclass
class _Builder:
    """Builds one job's events with the ids a real producer would derive (or unique ones)."""

    job_id: uuid.UUID
    unique_ids: bool = False
    clock: int = 0
    serial: int = 0
    request_text: str = field(default="")
    degraded_from: DegradedFrom | None = None  # what degraded mode changed in its request, when it did

    def __post_init__(self) -> None:
        self.request = request(self.request_text or f"Job {self.job_id}.")
        self.fingerprint = self.request.fingerprint()

    def _common(self, event_type: str, attempt: int, *parts: str | int) -> dict:
        self.clock += 1
        self.serial += 1
        extra = (*parts, self.serial) if self.unique_ids else parts
        return {
            "event_id": derive_event_id(self.job_id, event_type, attempt, *extra),
            "job_id": self.job_id,
            "fingerprint": self.fingerprint,
            "attempt": attempt,
            "occurred_at": T0 + timedelta(milliseconds=self.clock),
            "producer": PRODUCER,
        }

    def queued(self, priority: Priority = "interactive") -> JobQueued:
        common = self._common("JobQueued", 0)
        payload = JobQueuedPayload(
            request=self.request,
            idempotency_key=None,
            submitted_at=common["occurred_at"],
            priority=priority,
            degraded_from=self.degraded_from,
        )
        return JobQueued(payload=payload, **common)

    def claimed(self, attempt: int) -> JobClaimed:
        payload = JobClaimedPayload(
            worker_id=f"w{attempt}", device="cpu", engine="kokoro-onnx", model_version="m1", host=f"node-{attempt}"
        )
        return JobClaimed(payload=payload, **self._common("JobClaimed", attempt))

    def segment(self, attempt: int, index: int) -> SegmentProduced:
        payload = SegmentProducedPayload(
            index=index,
            span=TextSpan(start=0, end=1, text="x"),
            audio=AudioRef(sha256=_SHA, uri=f"file:///blobs/{_SHA}.wav"),
            duration_ms=100,
            sample_rate=24000,
            byte_length=4844,
        )
        return SegmentProduced(payload=payload, **self._common("SegmentProduced", attempt, index))

    def completed(self, attempt: int, segments: int, *, cache_hit: bool = False, last: bool = False) -> JobCompleted:
        """``last``: the attempt's last segment rides in it (``JobCompleted`` 3, as workers record it now)."""
        payload = JobCompletedPayload(
            segment_count=segments,
            total_duration_ms=100 * segments,
            cache_hit=cache_hit,
            source_job_id=uuid.UUID(int=1) if cache_hit else None,
            segment=self.segment(attempt, segments - 1).payload if last else None,
        )
        return JobCompleted(payload=payload, **self._common("JobCompleted", attempt, *(["cache"] if cache_hit else [])))

    def evicted(self, reason: EvictionReason = "capacity") -> CacheEvicted:
        payload = CacheEvictedPayload(reason=reason, total_bytes=4844)
        return CacheEvicted(payload=payload, **self._common("CacheEvicted", 0))

    def released(self, attempt: int) -> JobReleased:
        payload = JobReleasedPayload(reason="transient", failed_attempt=attempt, message="engine hiccup")
        return JobReleased(payload=payload, **self._common("JobReleased", attempt))

    def cancelled(self) -> JobCancelled:
        payload = JobCancelledPayload(reason="client", message="DELETE /v1/jobs")
        return JobCancelled(payload=payload, **self._common("JobCancelled", 0))

    def failed(self, attempt: int) -> JobFailed:
        payload = JobFailedPayload(reason_code="engine_error", message="model raised", attempts=attempt)
        return JobFailed(payload=payload, **self._common("JobFailed", attempt))


def _insert_after(draw: st.DrawFn, log: list[JobEvent], start: int, late: list[JobEvent]) -> None:
    """Insert ``late`` into ``log`` at positions >= ``start``, keeping their own order."""
    position = start
    for event in late:
        position = draw(st.integers(position, len(log)))
        log.insert(position, event)
        position += 1


@st.composite
def _realistic_job(draw: st.DrawFn) -> list[JobEvent]:  # noqa: C901 - listed in pyproject.toml
    # Few texts: jobs share fingerprints, so results are reused and the result cache is contended. One holds
    # what COPY's text format must escape (a backslash, a tab, a line break) and what JSON must (quotes).
    text = draw(st.sampled_from(["Alpha.", "Beta.", 'Say "\\N",\ta back\\slash\nand ünïcödé — 日本.']))
    degraded = draw(st.sampled_from([None, DegradedFrom(speed=1.0, sample_rate=48000, reason='backlog: "\\N"\t')]))
    job = _Builder(uuid.UUID(int=draw(st.integers(2, 2**64))), request_text=text, degraded_from=degraded)
    log: list[JobEvent] = [job.queued()]
    if draw(st.booleans()) and draw(st.booleans()):
        log.append(job.queued())  # the client retried with its Idempotency-Key: the same fact again
    attempt = 0
    if draw(st.integers(0, 4)) == 0:
        log.append(job.completed(0, 2, cache_hit=True))
    else:
        for _ in range(draw(st.integers(0, 4))):
            attempt += 1
            log.append(job.claimed(attempt))
            done = draw(st.integers(0, 3))
            ending = draw(st.sampled_from(["complete", "fail", "release", "release", "vanish", "stall"]))
            carried = ending == "complete" and done > 0 and draw(st.booleans())  # the last rides in the completion
            for index in range(done - 1 if carried else done):
                log.append(job.segment(attempt, index))
            if ending == "complete":
                log.append(job.completed(attempt, done, last=carried))
                break
            if ending == "fail":
                log.append(job.failed(attempt))
                break
            if ending == "release":
                log.append(job.released(attempt))
                if draw(st.integers(0, 3)) == 0:
                    log.append(job.completed(attempt, 2, cache_hit=True))
                    break
            if ending == "stall":
                # The next claim comes first; the stalled worker's late segments and completion follow it.
                late = [job.segment(attempt, done), job.completed(attempt, done + 1)]
                next_attempt = attempt + 1
                log.append(job.claimed(next_attempt))
                _insert_after(draw, log, len(log), late)
                attempt = next_attempt
                if draw(st.booleans()):
                    log.append(job.completed(attempt, 0))
                    break
                log.append(job.released(attempt))
    if draw(st.integers(0, 4)) == 0:  # the client cancels, at any point after it queued the job
        log.insert(draw(st.integers(1, len(log))), job.cancelled())
    # Any event may be delivered again, later.
    for original in draw(st.lists(st.integers(0, len(log) - 1), max_size=3)):
        copy = log[original]
        log.insert(draw(st.integers(original + 1, len(log))), copy)
    return log


def _interleave(draw: st.DrawFn, drawn: list[list[JobEvent]]) -> list[JobEvent]:
    """One partition: the jobs' events merged in any order that keeps each job's own order."""
    jobs = list({job[0].job_id: job for job in reversed(drawn)}.values())  # one story per job id
    cursors = [0] * len(jobs)
    merged: list[JobEvent] = []
    while any(cursor < len(job) for cursor, job in zip(cursors, jobs, strict=True)):
        open_jobs = [i for i, job in enumerate(jobs) if cursors[i] < len(job)]
        chosen = draw(st.sampled_from(open_jobs))
        merged.append(jobs[chosen][cursors[chosen]])
        cursors[chosen] += 1
    # One clock for the partition: events are stamped in log order (a copy keeps its original's stamp).
    stamps: dict[uuid.UUID, datetime] = {}
    for i, event in enumerate(merged):
        stamps.setdefault(event.event_id, T0 + timedelta(milliseconds=i))
    return [event.model_copy(update={"occurred_at": stamps[event.event_id]}) for event in merged]


@st.composite
def realistic_logs(draw: st.DrawFn) -> list[JobEvent]:
    return _interleave(draw, draw(st.lists(_realistic_job(), min_size=1, max_size=4)))


@st.composite
def _arbitrary_job(draw: st.DrawFn) -> list[JobEvent]:
    job = _Builder(uuid.UUID(int=draw(st.integers(2, 2**64))), unique_ids=True)
    log: list[JobEvent] = [job.queued()]
    kinds = st.sampled_from(
        ["queued", "claimed", "segment", "completed", "cache_hit", "released", "failed", "cancelled"]
    )
    for kind, attempt in draw(st.lists(st.tuples(kinds, st.integers(0, 3)), max_size=12)):
        match kind:
            case "queued":
                log.append(job.queued())
            case "claimed":
                log.append(job.claimed(attempt))
            case "segment":
                log.append(job.segment(attempt, draw(st.integers(0, 2))))
            case "completed":
                log.append(job.completed(attempt, 1))
            case "cache_hit":
                log.append(job.completed(attempt, 1, cache_hit=True))
            case "released":
                log.append(job.released(attempt))
            case "cancelled":
                log.append(job.cancelled())
            case _:
                log.append(job.failed(attempt))
    return log


@st.composite
def arbitrary_logs(draw: st.DrawFn) -> list[JobEvent]:
    return _interleave(draw, draw(st.lists(_arbitrary_job(), min_size=1, max_size=3)))
