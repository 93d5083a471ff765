"""Cancellation: ``DELETE /v1/jobs/{id}``, and a streaming client that goes away.

The API records a ``JobCancelled`` on the job's partition and answers 202;
the job is cancelled once the projection applies it (at once for the API's
own reads of the log's order: nothing the job's attempt records after it
counts). Workers ask the projection before they claim a job and between
segments (see :mod:`consumers.cancellation`): a queued job is never
synthesized, a running one stops at its next segment boundary, unless
another live request of the same fingerprint waits for the same audio.

The event id derives from the job alone, so cancelling twice records one
fact. A job that already ended answers 409: its audio (or its failure)
stands.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import structlog
from litestar import Response, delete
from litestar.exceptions import HTTPException
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath

from contracts import (
    CancelReason,
    JobCancelled,
    JobCancelledPayload,
    JobState,
    Producer,
    job_event,
)
from foundation.errors import BrokerUnavailable
from producers.api_keys import Principal
from producers.auth import SUBMIT
from producers.deps import ApiDeps, Injected
from producers.http_errors import responses
from producers.job_routes import known_job
from producers.ports import JobLog
from producers.views import CancelView
from projections.errors import ProjectionUnavailable
from projections.reads.jobs import ProjectionReader

log = structlog.get_logger("voxlog.api")


def cancellation(
    job_id: uuid.UUID,
    fingerprint: str,
    reason: CancelReason,
    producer: Producer,
    message: str = "",
    document_id: uuid.UUID | None = None,
) -> JobCancelled:
    payload = JobCancelledPayload(reason=reason, message=message, document_id=document_id)
    return job_event(JobCancelled, job_id, fingerprint, 0, producer, payload)


@delete(
    "/v1/jobs/{job_id:uuid}",
    status_code=202,
    summary="Cancel a job nobody wants any more",
    guards=SUBMIT,
    responses=responses(
        401, 403, 404, 409, 503, _200=ResponseSpec(CancelView, description="It was cancelled already.")
    ),
)
async def cancel_job(
    job_id: FromPath[uuid.UUID],
    reader: Injected[ProjectionReader],
    publisher: Injected[JobLog],
    producer: Injected[Producer],
    principal: Injected[Principal],
) -> Response[CancelView]:
    """202: recorded; a queued job is never synthesized, a running one stops at its next segment boundary
    (unless another request waits for the same audio). 200 when it was cancelled already; 409 when it ended."""
    job = await known_job(reader, job_id, principal)
    links = {"self": f"/v1/jobs/{job_id}", "events": f"/v1/jobs/{job_id}/events"}
    if job.state is JobState.CANCELLED:
        return Response(CancelView(job_id=job_id, state="cancelled", links=links), status_code=200)
    if job.ended:
        raise HTTPException(
            detail=f"job {job_id} is {job.state.value} already: there is nothing to cancel", status_code=409
        )
    event = cancellation(job_id, job.fingerprint, "client", producer, "DELETE /v1/jobs")
    await publisher.publish(event, (await reader.partitions_of([job_id])).get(job_id))
    return Response(CancelView(job_id=job_id, state="cancelling", links=links), status_code=202)


async def cancel_if_abandoned(deps: ApiDeps, job_id: uuid.UUID, fingerprint: str) -> None:
    """A streaming client went away: cancel its job unless it ended or another request waits for its audio."""
    try:
        job = await deps.reader.job(job_id)
        if job is None or job.ended:
            return
        if await deps.reader.wanted_elsewhere(fingerprint, job_id):
            log.info("a streaming client left; another request wants the audio: going on", job_id=str(job_id))
            return
        partition = (await deps.reader.partitions_of([job_id])).get(job_id)
        await deps.publisher.publish(cancellation(job_id, fingerprint, "disconnected", deps.producer), partition)
        log.info("a streaming client left: its job is cancelled", job_id=str(job_id))
    except (ProjectionUnavailable, BrokerUnavailable) as exc:
        log.warning("a streaming client left; its job could not be cancelled", job_id=str(job_id), error=str(exc))


async def cancelled_when_abandoned(
    deps: ApiDeps, job_id: uuid.UUID, fingerprint: str, body: AsyncIterator[bytes]
) -> AsyncIterator[bytes]:
    """``body`` as it is; if the client leaves before its end, :func:`cancel_if_abandoned` runs (owned by the
    API's background tasks: the response's own task is being torn down)."""
    whole = False
    try:
        async for chunk in body:
            yield chunk
        whole = True
    finally:
        if not whole:
            deps.tasks.start(cancel_if_abandoned(deps, job_id, fingerprint), f"cancel abandoned job {job_id}")
