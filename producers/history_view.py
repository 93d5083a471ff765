"""GET /v1/jobs/{id}/events: a job's history as the log tells it, as ``voxlog audit --json`` prints it.

What differs for a tenant's key is what :func:`producers.tenant_views.tenant_history` cuts: what the job waited
behind names only that tenant's own jobs (another tenant's job and its tenant shown as null, its segments,
priority and rule kept), a cache hit names its source only when the source is the same tenant's, the request's
pronunciations leave out the server lexicon's words, and the tenant is the projection's (the operator's
``voxlog audit`` shows the log as it is).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from litestar import get
from litestar.exceptions import NotFoundException
from litestar.params import FromPath
from pydantic import Field

from contracts import JobState
from producers.api_keys import Principal
from producers.audit_slots import AuditSlots
from producers.auth import READ
from producers.deps import Injected
from producers.http_errors import responses
from producers.job_routes import known_job
from producers.ports import JobAudit
from producers.queries import ProjectionReader
from producers.tenant_views import tenant_history
from producers.views import DegradedJobView, View


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


@get(
    "/v1/jobs/{job_id:uuid}/events",
    summary="The job's history read from the log: every event, applied or fenced",
    guards=READ,
    responses=responses(401, 403, 404, 503),
)
async def get_job_events(
    job_id: FromPath[uuid.UUID],
    reader: Injected[ProjectionReader],
    audit: Injected[JobAudit],
    audit_slots: Injected[AuditSlots],
    principal: Injected[Principal],
) -> JobHistoryView:
    """Each event with its partition, offset and time, its producer, its attempt and whether the projection
    applied it or fenced it (and why); the job's attempts, and the time it spent in each state.

    The job is found in the projection first (404 as GET /v1/jobs/{id}: an unknown id and another tenant's read
    nothing of the log); its partition is then read from the job's first offset, in one of the API's read slots
    (503 when none comes free in time)."""
    job = await known_job(reader, job_id, principal)
    async with audit_slots.held(principal.tenant):
        history = await audit.events(job_id, job.submitted_at)
    shown = None if history is None else tenant_history(history, job, principal.tenant)
    if shown is None:
        raise NotFoundException(f"no event of job {job_id} in the log")
    return JobHistoryView.model_validate(shown)
