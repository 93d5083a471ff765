"""The routes of one job: submit it, read its status (now, or as the log had it), its history and its audio."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

from litestar import Request, Response, get, post
from litestar.exceptions import HTTPException, NotFoundException
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath, HeaderParameter, JSONBody, QueryParameter

from contracts import JobState
from foundation.audio_formats import media_type
from foundation.blobs import BlobNotFound, BlobStore
from producers.audio_out import render
from producers.deps import Injected
from producers.http_errors import responses
from producers.idempotency import fresh_key, scoped_key
from producers.openapi_docs import AudioOperation, WavOperation
from producers.ports import JobAudit
from producers.queries import ProjectionReader
from producers.requests import JobRequest, Limits
from producers.rows import JobRow, SegmentRow
from producers.submission import Answer, Item, Submission, Submissions
from producers.views import JobAccepted, JobView, job_links, job_view

IdempotencyKey = Annotated[
    str | None,
    HeaderParameter(
        name="Idempotency-Key",
        description="Makes a retry name what the first attempt named, whether or not it was recorded.",
    ),
]


def submission_key(idempotency_key: str | None, request: Request[Any, Any, Any]) -> tuple[str, bool]:
    """The scoped key a submission is named by, and whether the client sent it."""
    authorization = request.headers.get("authorization")
    if idempotency_key:
        return scoped_key(idempotency_key, authorization), True
    return fresh_key(authorization), False


async def submit_one(
    submissions: Submissions, body: JobRequest, idempotency_key: str | None, request: Request[Any, Any, Any]
) -> tuple[uuid.UUID, str, Answer]:
    """One request through the pipeline: its job, fingerprint and how it was answered."""
    key, sent = submission_key(idempotency_key, request)
    submitted = await submissions.submit(Submission([Item(body, body.priority)], key, sent))
    answer = submitted.answers[0]
    return answer.job_id, answer.fingerprint, answer.answer


@post(
    "/v1/jobs",
    status_code=202,
    summary="Submit text for synthesis",
    responses=responses(
        400, 409, 413, 422, 429, 503, _200=ResponseSpec(JobView, description="Cached, or the key's finished job.")
    ),
)
async def submit_job(
    data: JSONBody[JobRequest],
    submissions: Injected[Submissions],
    reader: Injected[ProjectionReader],
    request: Request[Any, Any, Any],
    idempotency_key: IdempotencyKey = None,
) -> Response[JobAccepted | JobView]:
    """202 with the new job; 200 with the finished job when the same request is cached or was already submitted.

    A client that got no answer (a timeout, a dropped connection) retries with the same
    Idempotency-Key: the retry names the same job whether or not the first attempt was recorded.
    """
    job_id, fingerprint, answer = await submit_one(submissions, data, idempotency_key, request)
    job = await reader.job(job_id) if answer is not Answer.QUEUED else None
    if job is not None and job.state is JobState.COMPLETED:
        return Response(job_view(job), status_code=200)
    state = job.state if job is not None else JobState.QUEUED
    accepted = JobAccepted(job_id=job_id, fingerprint=fingerprint, state=state, links=job_links(job_id))
    return Response(accepted, status_code=202, headers={"Location": f"/v1/jobs/{job_id}"})


def unknown_job(job_id: uuid.UUID) -> NotFoundException:
    return NotFoundException(f"no job {job_id} (a job just submitted appears within a moment)")


async def known_job(reader: ProjectionReader, job_id: uuid.UUID) -> JobRow:
    job = await reader.job(job_id)
    if job is None:
        raise unknown_job(job_id)
    return job


@get(
    "/v1/jobs/{job_id:uuid}",
    summary="A job's state, attempt, timings and segments so far, or as of a time",
    responses=responses(404, 503),
)
async def get_job(
    job_id: FromPath[uuid.UUID],
    reader: Injected[ProjectionReader],
    audit: Injected[JobAudit],
    as_of: Annotated[
        datetime | None,
        QueryParameter(name="as_of", description="ISO 8601 (UTC if no zone): the job as the log had it then"),
    ] = None,
) -> JobView:
    if as_of is None:
        return job_view(await known_job(reader, job_id))
    moment = as_of if as_of.tzinfo else as_of.replace(tzinfo=UTC)
    past = await audit.job_as_of(job_id, moment)
    if past is None:
        raise NotFoundException(f"no job {job_id} in the log as of {moment.isoformat()}")
    folded = JobRow.from_mapping(past, segments=tuple(map(SegmentRow.from_mapping, past["segments"])))
    return job_view(folded, as_of=moment)


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
    responses=responses(404, 409, 410, 503),
)
async def get_audio(
    job_id: FromPath[uuid.UUID],
    reader: Injected[ProjectionReader],
    blobs: Injected[BlobStore],
    limits: Injected[Limits],
) -> Response[bytes]:
    job = await known_job(reader, job_id)
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
    responses=responses(404, 410, 503),
)
async def get_segment_audio(
    job_id: FromPath[uuid.UUID],
    index: FromPath[int],
    reader: Injected[ProjectionReader],
    blobs: Injected[BlobStore],
    limits: Injected[Limits],
) -> Response[bytes]:
    job = await known_job(reader, job_id)
    segment = next((s for s in job.segments if s.segment_index == index), None)
    if segment is None:
        raise NotFoundException(f"job {job_id} has no segment {index} (yet)")
    try:
        audio = await asyncio.to_thread(blobs.get, segment.audio)
    except BlobNotFound as exc:
        raise HTTPException(detail=expired(job_id, limits, exc), status_code=410) from exc
    return Response(audio, media_type="audio/wav")
