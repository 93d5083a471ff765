"""The routes of one job: submit it, read its status (now, or as the log had it), its history and its audio."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Final

from litestar import Request, Response, get, post
from litestar.exceptions import HTTPException, NotFoundException
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath, HeaderParameter, JSONBody, QueryParameter

from contracts import DEFAULT_TENANT, JobState, utc_now
from foundation.audio_formats import media_type
from foundation.blobs import BlobNotFound, BlobStore
from producers.api_keys import Principal
from producers.audio_out import render
from producers.audit_slots import AuditSlots
from producers.auth import READ, SUBMIT
from producers.deps import Injected
from producers.http_errors import responses
from producers.idempotency import fresh_key, scoped_key
from producers.long_poll import PreferHeader, applied, preferred_wait, until_changed
from producers.openapi_docs import AudioOperation, WavOperation
from producers.ports import JobAudit, JobChangeFeed
from producers.queue_place import place_view
from producers.requests import JobRequest, Limits
from producers.submission import Answer, Answered, Item, Submission, Submissions
from producers.tenant_views import past_job, with_source
from producers.views import JobAccepted, JobView, degraded_view, job_links, job_view
from projections.reads.jobs import ProjectionReader
from projections.reads.published import published_job
from projections.reads.rows import JobRecord

IdempotencyKey = Annotated[
    str | None,
    HeaderParameter(
        name="Idempotency-Key",
        description="Makes a retry name what the first attempt named, whether or not it was recorded.",
    ),
]


CACHED_OR_KNOWN: Final = "Completed at once from the cache, or the key's finished job."


def submission_key(
    idempotency_key: str | None, principal: Principal, request: Request[Any, Any, Any]
) -> tuple[str, bool]:
    """The scoped key a submission is named by (its tenant's, with API keys), and whether the client sent it."""
    authorization = request.headers.get("authorization")
    tenant = principal.tenant if principal.key_id is not None else None
    if idempotency_key:
        return scoped_key(idempotency_key, authorization, tenant), True
    return fresh_key(authorization, tenant), False


async def submit_one(
    submissions: Submissions,
    body: JobRequest,
    idempotency_key: str | None,
    principal: Principal,
    request: Request[Any, Any, Any],
) -> Answered:
    """One request through the pipeline: its job, and how it was answered."""
    key, sent = submission_key(idempotency_key, principal, request)
    submitted = await submissions.submit(Submission([Item(body, body.priority)], key, sent, principal))
    return submitted.answers[0]


@post(
    "/v1/jobs",
    status_code=202,
    summary="Submit text for synthesis",
    guards=SUBMIT,
    responses=responses(
        400, 401, 403, 409, 413, 422, 429, 503, _200=ResponseSpec(JobView, description=CACHED_OR_KNOWN)
    ),
)
async def submit_job(
    data: JSONBody[JobRequest],
    submissions: Injected[Submissions],
    reader: Injected[ProjectionReader],
    principal: Injected[Principal],
    request: Request[Any, Any, Any],
    idempotency_key: IdempotencyKey = None,
) -> Response[JobAccepted | JobView]:
    """202 with the new job; 200 with the finished job when the same request is cached (a job of this client's
    own, completed at once) or was already submitted.

    A client that got no answer (a timeout, a dropped connection) retries with the same
    Idempotency-Key: the retry names the same job whether or not the first attempt was recorded.
    """
    answered = await submit_one(submissions, data, idempotency_key, principal, request)
    job_id = answered.job_id
    if answered.source is not None:
        source = await reader.job(answered.source.job_id)
        if source is not None:
            return Response(job_view(cached_job(source, answered, principal)), status_code=200)
    job = await reader.job(job_id, principal.tenant) if answered.answer is Answer.KNOWN else None
    if job is not None and job.state is JobState.COMPLETED:
        return Response(job_view(job), status_code=200)
    state = JobState.COMPLETED if answered.answer is Answer.CACHED else job.state if job else JobState.QUEUED
    accepted = JobAccepted(
        job_id=job_id,
        fingerprint=answered.fingerprint,
        state=state,
        degraded=degraded_view(answered.degraded_from),
        links=job_links(job_id),
    )
    return Response(accepted, status_code=202, headers={"Location": f"/v1/jobs/{job_id}"})


def cached_job(source: JobRecord, answered: Answered, principal: Principal) -> JobRecord:
    """The client's own job that a live result completed at once, as the projection will show it: the events
    published for it folded as the projector folds them, with the source's audio (the source job named only
    when it is the same tenant's)."""
    return published_job(answered.published, segments=source.segments, source_shown=source.tenant == principal.tenant)


def unknown_job(job_id: uuid.UUID) -> NotFoundException:
    return NotFoundException(f"no job {job_id} (a job just submitted appears within a moment)")


async def known_job(reader: ProjectionReader, job_id: uuid.UUID, principal: Principal) -> JobRecord:
    """The job, if it is the principal's tenant's (another tenant's is unknown: 404, exactly as no job)."""
    job = await reader.job(job_id, principal.tenant)
    if job is None:
        raise unknown_job(job_id)
    return job


@get(
    "/v1/jobs/{job_id:uuid}",
    summary="A job's state, attempt, timings and segments so far (and a queued job's place), or as of a time",
    guards=READ,
    responses=responses(401, 403, 404, 503),
)
async def get_job(
    job_id: FromPath[uuid.UUID],
    reader: Injected[ProjectionReader],
    audit: Injected[JobAudit],
    audit_slots: Injected[AuditSlots],
    changes: Injected[JobChangeFeed],
    principal: Injected[Principal],
    as_of: Annotated[
        datetime | None,
        QueryParameter(name="as_of", description="ISO 8601 (UTC if no zone): the job as the log had it then"),
    ] = None,
    prefer: PreferHeader = None,
) -> Response[JobView]:
    """With ``as_of``, the job is found in the projection (404 as without it) before the log is read, from the
    job's first offset, in one of the API's read slots (503 when none comes free in time). With ``Prefer:
    wait=N`` (not with ``as_of``), the answer waits until the job changed or ended (:mod:`producers.long_poll`)."""
    job = await known_job(reader, job_id, principal)
    if as_of is None:
        headers: dict[str, str] = {}
        if (wait := preferred_wait(prefer)) is not None:
            job = await until_changed(changes, lambda: known_job(reader, job_id, principal), _progress, _live_job, wait)
            headers = applied(wait)
        waiting = job.state in (JobState.QUEUED, JobState.RELEASED)
        listing = await reader.queue_listing(job_id) if waiting else None
        view = job_view(job, queue=place_view(listing, utc_now()) if listing is not None else None)
        return Response(view, headers=headers)
    moment = as_of if as_of.tzinfo else as_of.replace(tzinfo=UTC)
    async with audit_slots.held(principal.tenant):
        past = await audit.job_as_of(job_id, moment, job.submitted_at)
    if past is None or past.get("tenant", DEFAULT_TENANT) != principal.tenant:
        raise NotFoundException(f"no job {job_id} in the log as of {moment.isoformat()}")
    job = await with_source(reader, job, past.get("source_job_id"), principal.tenant)
    folded = past_job(past, job)  # cut for the tenant: no other tenant's source, no lexicon entry
    return Response(job_view(folded, as_of=moment))


def _progress(job: JobRecord) -> tuple[JobState, int, int]:
    """What a waiting client is woken for: another state, another attempt, or a segment more."""
    return job.state, job.attempt, len(job.segments)


def _live_job(job: JobRecord) -> uuid.UUID | None:
    return None if job.ended else job.job_id


def expired(job_id: uuid.UUID, limits: Limits, cause: Exception) -> str:
    """The 410 of a job whose audio the sweeper deleted: why, and what to do."""
    return (
        f"the audio of job {job_id} has expired ({cause}): a job keeps its audio for {limits.job_retention_s:g} s"
        " (VOXLOG_JOB_RETENTION_S) after it completed or its result was last reused; submit the request again"
    )


@get(
    "/v1/jobs/{job_id:uuid}/audio",
    summary="The whole job in its requested format and rate",
    operation_class=AudioOperation,
    guards=READ,
    responses=responses(401, 403, 404, 409, 410, 503),
)
async def get_audio(
    job_id: FromPath[uuid.UUID],
    reader: Injected[ProjectionReader],
    blobs: Injected[BlobStore],
    limits: Injected[Limits],
    principal: Injected[Principal],
) -> Response[bytes]:
    job = await known_job(reader, job_id, principal)
    if job.state is not JobState.COMPLETED:
        raise HTTPException(detail=f"job {job_id} is {job.state.value}, not completed", status_code=409)
    fmt, rate = job.request.format, job.request.sample_rate
    try:
        audio = await render(blobs, job.segments, fmt, rate)
    except (BlobNotFound, ValueError) as exc:
        raise HTTPException(detail=expired(job_id, limits, exc), status_code=410) from exc
    extension = "raw" if fmt == "pcm" else fmt
    return Response(
        audio,
        media_type=media_type(fmt, rate),
        headers={"Content-Disposition": f'inline; filename="{job_id}.{extension}"'},
    )


@get(
    "/v1/jobs/{job_id:uuid}/segments/{index:int}/audio",
    summary="One segment as WAV",
    operation_class=WavOperation,
    media_type="audio/wav",
    guards=READ,
    responses=responses(401, 403, 404, 410, 503),
)
async def get_segment_audio(
    job_id: FromPath[uuid.UUID],
    index: FromPath[int],
    reader: Injected[ProjectionReader],
    blobs: Injected[BlobStore],
    limits: Injected[Limits],
    principal: Injected[Principal],
) -> Response[bytes]:
    job = await known_job(reader, job_id, principal)
    segment = next((s for s in job.segments if s.segment_index == index), None)
    if segment is None:
        raise NotFoundException(f"job {job_id} has no segment {index} (yet)")
    try:
        audio = await asyncio.to_thread(blobs.get, segment.audio)
    except BlobNotFound as exc:
        raise HTTPException(detail=expired(job_id, limits, exc), status_code=410) from exc
    return Response(audio, media_type="audio/wav")
