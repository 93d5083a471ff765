"""What the API answers: one response model per body, so that /schema documents every one.

Each model is built from typed rows (:mod:`projections.reads.rows`) by the function
beside it; handlers return models, never dicts.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from contracts import DegradedFrom, JobState, SynthesisRequest
from contracts.document_state import DocumentState
from producers.tenant_views import shown_request
from projections.reads.rows import JobRecord


class View(BaseModel):
    model_config = ConfigDict(frozen=True)


def job_links(job_id: uuid.UUID) -> dict[str, str]:
    return {"self": f"/v1/jobs/{job_id}", "audio": f"/v1/jobs/{job_id}/audio", "events": f"/v1/jobs/{job_id}/events"}


class ErrorView(View):
    code: str
    message: str | None


class ReleaseView(View):
    reason: str
    not_before: datetime | None


class CancellationView(View):
    reason: str
    at: datetime | None


class DegradedJobView(View):
    """What degraded mode changed: the job's ``request`` is the degraded one, at the quality it was made."""

    speed: float = Field(description="The speed its client asked for.")
    sample_rate: int = Field(description="The sample rate its client asked for.")
    reason: str = Field(description="Why degraded mode was on: each switch holding it, source: reason.")


class TimingsView(View):
    submitted_at: datetime
    claimed_at: datetime | None
    completed_at: datetime | None
    failed_at: datetime | None
    cancelled_at: datetime | None
    queue_wait_ms: int | None = Field(description="From submission to the (last) claim.")
    total_ms: int | None = Field(description="From submission to completion.")


class SegmentView(View):
    index: int
    text: str = Field(description="The segment's text, as written in the request.")
    start: int
    end: int
    duration_ms: int
    sample_rate: int
    bytes: int
    reused: bool = Field(description="The audio is an earlier identical sentence's (the segment cache).")
    audio: str = Field(description="The segment's WAV.")


class QueuePlaceView(View):
    """Where a queued job waits, as its worker's last heartbeat tells it (an estimate, not a promise)."""

    worker: str = Field(description="The worker whose queue lists the job.")
    position: int = Field(
        description="1 + the jobs that worker serves before it: the claims it holds, then the jobs its queue lists"
        " ahead of it (in the order it would take them as of its heartbeat; a job submitted later may still come"
        " first, by its priority, tenant or length)."
    )
    estimated_start: datetime | None = Field(
        description="An estimate from the worker's last heartbeat: now plus the text still to synthesize of the"
        " claims it holds and of the jobs ahead of it, over the worker's measured speed (characters per second);"
        " null while the worker has no measured speed."
    )
    heartbeat_at: datetime = Field(description="When the worker sent the heartbeat these figures come from.")
    heartbeat_age_s: float = Field(description="How old that heartbeat was when this answer was made, in seconds.")


class JobView(View):
    """A job as the projection shows it (or, with ``as_of``, as the log had it then)."""

    job_id: uuid.UUID
    state: JobState
    attempt: int
    fingerprint: str
    request: SynthesisRequest = Field(
        description="What the job says; its pronunciations are the request's own, less any word the server's"
        " lexicon holds or held (applied to the text, never listed: GET /v1/lexicon, admin scope)."
    )
    degraded: DegradedJobView | None = Field(
        description="Set when degraded mode took the job at cheaper settings than its client asked for."
    )
    cache_hit: bool
    segments_reused: int
    source_job_id: uuid.UUID | None = Field(
        description="A cache hit's: the job whose audio it reuses, when that job is the same tenant's (else null)."
    )
    worker_id: str | None
    segment_count: int | None
    total_duration_ms: int | None
    error: ErrorView | None
    release: ReleaseView | None
    cancellation: CancellationView | None
    timings: TimingsView
    segments: list[SegmentView]
    links: dict[str, str]
    as_of: datetime | None = Field(None, description="Only with ?as_of=T: the moment of the log it shows.")
    queue: QueuePlaceView | None = Field(
        None,
        description="A queued job's place on the worker it waits on, and an estimate of when it starts, from that"
        " worker's last heartbeat; null when no live worker's heartbeat lists it (it is further back than the"
        " first 200 jobs a worker lists, or not read by a worker yet), for a job that is not queued, and with"
        " ?as_of=T.",
    )


def degraded_view(degraded_from: DegradedFrom | None) -> DegradedJobView | None:
    return None if degraded_from is None else DegradedJobView.model_validate(degraded_from.model_dump())


def _ms(later: datetime | None, earlier: datetime | None) -> int | None:
    return None if later is None or earlier is None else round((later - earlier).total_seconds() * 1000)


def job_view(job: JobRecord, as_of: datetime | None = None, queue: QueuePlaceView | None = None) -> JobView:
    return JobView(
        job_id=job.job_id,
        state=job.state,
        attempt=job.attempt,
        fingerprint=job.fingerprint,
        request=shown_request(job.request, job.lexicon_words),
        degraded=degraded_view(job.degraded_from),
        cache_hit=job.cache_hit,
        segments_reused=sum(1 for s in job.segments if s.reused),
        source_job_id=job.source_job_id,
        worker_id=job.worker_id,
        segment_count=job.segment_count,
        total_duration_ms=job.total_duration_ms,
        error=ErrorView(code=job.error_code, message=job.error_message) if job.error_code else None,
        release=ReleaseView(reason=job.release_reason, not_before=job.not_before) if job.release_reason else None,
        cancellation=CancellationView(reason=job.cancel_reason, at=job.cancelled_at) if job.cancel_reason else None,
        timings=TimingsView(
            submitted_at=job.submitted_at,
            claimed_at=job.claimed_at,
            completed_at=job.completed_at,
            failed_at=job.failed_at,
            cancelled_at=job.cancelled_at,
            queue_wait_ms=_ms(job.claimed_at, job.submitted_at),
            total_ms=_ms(job.completed_at, job.submitted_at),
        ),
        segments=[
            SegmentView(
                index=s.segment_index,
                text=s.span_text,
                start=s.span_start,
                end=s.span_end,
                duration_ms=s.duration_ms,
                sample_rate=s.sample_rate,
                bytes=s.byte_length,
                reused=s.reused,
                audio=f"/v1/jobs/{job.job_id}/segments/{s.segment_index}/audio",
            )
            for s in job.segments
        ],
        links=job_links(job.job_id),
        as_of=as_of,
        queue=queue,
    )


class JobAccepted(View):
    """A job on the log (202): it appears in GET /v1/jobs/{id} within a moment."""

    job_id: uuid.UUID
    fingerprint: str
    state: JobState
    degraded: DegradedJobView | None = Field(
        None, description="Set when degraded mode took the job at cheaper settings than its client asked for."
    )
    links: dict[str, str]


class BatchItemView(View):
    index: int
    job_id: uuid.UUID
    fingerprint: str
    state: JobState = Field(description="queued (a new job), or the state of the job that answers it.")


class BatchAccepted(View):
    queued: int = Field(description="Requests that became new jobs.")
    cached: int = Field(description="Requests answered by a job that exists already (cached, or the key's).")
    jobs: list[BatchItemView]


class CancelView(View):
    job_id: uuid.UUID
    state: Literal["cancelling", "cancelled"]
    links: dict[str, str]


class EngineView(View):
    engine: str
    model_version: str
    sample_rate: int
    languages: list[str]
    voices: list[str]
    workers: int


class VoicesView(View):
    engines: list[EngineView]
    formats: list[str]
    sample_rates: list[int]


class HealthView(View):
    status: Literal["ok"]


class ReadyView(View):
    ready: bool
    checks: dict[str, str] = Field(
        description="Per service (postgres, kafka): ok, or error: database unreachable / error: kafka unreachable"
        " (the driver's error, which names hosts, is in the API's log)."
    )


class ErrorBody(View):
    """Every error this API answers (but the OpenAI route's, in OpenAI's shape)."""

    status_code: int
    detail: str = Field(description="What went wrong, and what to do about it.")
    errors: list[dict[str, Any]] | None = Field(
        None, description="A submission of several: each invalid request's index, status and detail."
    )
    extra: list[Any] | dict[str, Any] | None = Field(
        None, description="A body the route does not take: each field that is wrong, and why."
    )


def document_links(document_id: uuid.UUID) -> dict[str, str]:
    base = f"/v1/documents/{document_id}"
    return {"self": base, "audio": f"{base}/audio", "toc": f"{base}/toc"}


class ChapterAccepted(View):
    index: int
    title: str
    parts: int


class DocumentAccepted(View):
    document_id: uuid.UUID
    title: str
    parts: int
    chars: int
    chapters: list[ChapterAccepted]
    links: dict[str, str]


class PartsView(View):
    total: int
    completed: int
    failed: int
    cancelled: int


class ChapterProgressView(View):
    index: int
    title: str
    parts: int
    completed: int
    audio_seconds: float
    links: dict[str, str]


class PartsRequestView(View):
    """How every part is spoken (the parts' common request, less the text)."""

    voice: str
    speed: float
    lang: str
    engine: str
    model_version: str
    format: str
    sample_rate: int
    normalize: bool
    pronunciations: dict[str, str] = Field(default_factory=dict, description="The document's own pronunciations.")


class DocumentView(View):
    document_id: uuid.UUID
    title: str
    state: DocumentState
    submitted_at: datetime
    priority: str
    request: PartsRequestView
    chars: int
    parts: PartsView
    audio_seconds: float
    estimated_finish: datetime | None = Field(description="If the rest goes as fast as the document went so far.")
    chapters: list[ChapterProgressView]
    links: dict[str, str]


class TocChapterView(View):
    index: int
    title: str
    start_ms: int
    duration_ms: int
    parts: int
    audio: str


class TocView(View):
    document_id: uuid.UUID
    title: str
    duration_ms: int
    chapters: list[TocChapterView]


class DocumentCancelView(View):
    document_id: uuid.UUID
    cancelled: int = Field(description="Parts whose JobCancelled was recorded now.")
    ended_already: int
    parts: int
    visible: bool = Field(description="Whether the projection showed every cancellation before the answer.")


# A job's history as the log tells it (GET /v1/jobs/{id}/events, producers/history_view.py)


class EventProducerView(View):
    service: str
    instance: str
    host: str | None
    engine: str | None
    model_version: str | None
    device: str | None


class LoggedEventView(View):
    partition: int
    offset: int
    appended_at: datetime
    occurred_at: datetime
    type: str
    schema_version: int
    event_id: uuid.UUID
    attempt: int
    producer: EventProducerView
    outcome: str  # applied, fenced or duplicate
    reason: str | None
    state_after: JobState | None
    payload: dict[str, Any]


class AttemptView(View):
    attempt: int
    worker_id: str
    host: str | None
    device: str
    engine: str
    model_version: str
    claimed_at: datetime
    ended_at: datetime | None
    ended_by: str | None
    seconds: float | None
    segments: int
    fenced_events: int


class StateSpanView(View):
    state: JobState
    attempt: int
    since: datetime
    until: datetime | None
    seconds: float | None


class EngineTurnsView(View):
    job_id: uuid.UUID | None = Field(description="Null when it is another tenant's job.")
    tenant: str | None = Field(description="Null when it is another tenant's job.")
    priority: str
    segments: int = Field(description="Its segments on the engine while this job waited.")
    rule: str = Field(
        description="Why it came first: interactive_first, batch_turn (batch work's guaranteed turn), fair_share"
        " (its tenant's use of the worker against its weight), shorter_first (less work left) or log_order."
    )


class WaitedView(View):
    """What the job waited behind on its worker over one stretch of an attempt, as the worker recorded it."""

    attempt: int
    stretch: Literal["queued", "claimed"] = Field(
        description="queued: before its claim (JobClaimed's record); claimed: between its claim and its completion,"
        " other jobs' segments between its own (JobCompleted's)."
    )
    policy: str = Field(description="The worker's scheduling policy.")
    jobs: list[EngineTurnsView] = Field(description="The jobs that took the most segments (up to 32), most first.")
    job_count: int
    segment_count: int
    waited_ms: int
    complete: bool = Field(description="False when the worker's memory of turns did not reach back far enough.")


class JobHistoryView(View):
    job_id: uuid.UUID
    trace_id: str | None = Field(
        None, description="The job's trace (W3C, 32 hex digits): its request's traceparent, else its id's."
    )
    tenant: str | None
    fingerprint: str
    state: JobState | None
    attempt: int | None
    request: dict[str, Any] | None
    degraded_from: DegradedJobView | None = Field(
        None, description="Set when degraded mode took the job at cheaper settings: what its client asked for."
    )
    reused_from: uuid.UUID | None = Field(
        description="A cache hit's source job, when that job is the same tenant's (else null, as is JobCompleted's"
        " source_job_id)."
    )
    result_evicted: str | None = Field(description="Why its result left the cache, if it did.")
    cancelled: str | None = Field(description="Why it was cancelled, if it was.")
    waited: list[WaitedView] = Field(
        default_factory=list, description="What it waited behind on its workers, and by which rule (issue 27)."
    )
    events: list[LoggedEventView]
    attempts: list[AttemptView]
    time_in_state: list[StateSpanView]
