"""The baseline's HTTP front: submit, status and streaming speech, read straight from the job table."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

from litestar import Litestar, Request, Response, get, post
from litestar.response import Stream

from bench.baseline.queue import BaselineQueue
from contracts import JobState
from foundation.audio_formats import media_type
from foundation.blobs import BlobStore
from producers.audio_out import Audible, Progress, pcm_stream, segments_as_they_appear
from producers.errors import Rejected
from producers.requests import JobRequest, Limits, validate
from projections.reads.rows import JobStateRow, StoredSegment


@dataclass(frozen=True)
class BaselineDeps:
    queue: BaselineQueue
    blobs: BlobStore
    limits: Limits
    stream_poll_s: float
    stream_timeout_s: float


def _deps(request: Request[Any, Any, Any]) -> BaselineDeps:
    deps: BaselineDeps = request.app.state.deps
    return deps


async def _submit(deps: BaselineDeps, data: JobRequest) -> tuple[uuid.UUID, uuid.UUID | None]:
    synthesis = validate(data, deps.limits, await deps.queue.engines())
    job_id = uuid.uuid4()
    source = await deps.queue.submit(job_id, synthesis.fingerprint(), synthesis.model_dump(mode="json"))
    return job_id, source


@post("/jobs", status_code=202)
async def submit_job(request: Request[Any, Any, Any], data: JobRequest) -> Response[dict[str, Any]]:
    try:
        job_id, source = await _submit(_deps(request), data)
    except Rejected as exc:
        return Response({"detail": str(exc)}, status_code=exc.status)
    return Response({"job_id": str(job_id), "source_job_id": str(source) if source else None}, status_code=202)


@get("/jobs/{job_id:uuid}")
async def get_job(request: Request[Any, Any, Any], job_id: uuid.UUID) -> Response[Any]:
    job = await _deps(request).queue.status(job_id)
    if job is None:
        return Response({"detail": f"job {job_id} is unknown"}, status_code=404)
    return Response(job)


@post("/speech", status_code=200)
async def speech(request: Request[Any, Any, Any], data: JobRequest) -> Response[Any] | Stream:
    """The job's audio as raw pcm at its rate, streamed segment by segment as rows appear."""
    deps = _deps(request)
    try:
        job_id, _ = await _submit(deps, data)
    except Rejected as exc:
        return Response({"detail": str(exc)}, status_code=exc.status)

    async def progress(since: int) -> tuple[Progress | None, list[Audible]]:
        # The baseline reads the whole job each time, as a job table's status query does.
        job = await deps.queue.status(job_id)
        if job is None:
            return None, []
        state = JobStateRow(
            state=JobState(job["state"]),
            source_job_id=job["source_job_id"],
            error_code=None,
            error_message=job["error"],
        )
        return state, stored_segments(job["segments"][since:])

    segments = segments_as_they_appear(progress, lambda: asyncio.sleep(deps.stream_poll_s), deps.stream_timeout_s)
    return Stream(pcm_stream(deps.blobs, segments, data.sample_rate), media_type=media_type("pcm", data.sample_rate))


def stored_segments(rows: list[dict[str, Any]]) -> list[Audible]:
    """The job's segment rows as the streaming code reads them. The baseline keeps no word timings: a job
    table stores the audio, not when each word is said."""
    return [StoredSegment.from_mapping(row, words=None) for row in rows]


@get("/readyz")
async def readyz(request: Request[Any, Any, Any]) -> dict[str, int]:
    return {"engines": len(await _deps(request).queue.engines())}


def create_baseline_app(deps: BaselineDeps) -> Litestar:
    app = Litestar(route_handlers=[submit_job, get_job, speech, readyz], openapi_config=None)
    app.state.deps = deps
    return app
