"""GET /v1/jobs/{id}/events: a job's history as the log tells it, as ``voxlog audit --json`` prints it.

What differs for a tenant's key is what :func:`producers.tenant_views.tenant_history` cuts: what the job waited
behind names only that tenant's own jobs (another tenant's job and its tenant shown as null, its segments,
priority and rule kept), a cache hit names its source only when the source is the same tenant's, the request's
pronunciations leave out the server lexicon's words, and the tenant is the projection's (the operator's
``voxlog audit`` shows the log as it is).
"""

from __future__ import annotations

import uuid

from litestar import get
from litestar.exceptions import NotFoundException
from litestar.params import FromPath

from producers.api_keys import Principal
from producers.audit_slots import AuditSlots
from producers.auth import READ
from producers.deps import Injected
from producers.http_errors import responses
from producers.job_routes import known_job
from producers.ports import JobAudit
from producers.tenant_views import tenant_history, with_source
from producers.views import JobHistoryView
from projections.reads.jobs import ProjectionReader


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
    if history is not None:
        job = await with_source(reader, job, history.get("reused_from"), principal.tenant)
    shown = None if history is None else tenant_history(history, job, principal.tenant)
    if shown is None:
        raise NotFoundException(f"no event of job {job_id} in the log")
    return JobHistoryView.model_validate(shown)
