"""The Litestar application: submit jobs, read their status and audio from the projections."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Final

from litestar import Litestar, MediaType, Request, Response, get, post
from litestar.exceptions import HTTPException, NotFoundException
from litestar.openapi import OpenAPIConfig
from litestar.params import HeaderParameter, JSONBody, Parameter
from litestar.plugins.prometheus import PrometheusConfig

from contracts import AudioRef
from foundation.audio_formats import SUPPORTED_RATES, media_type, supported_formats
from foundation.blobs import BlobNotFound
from foundation.errors import BrokerUnavailable
from foundation.metrics import SUBMISSIONS
from producers.audio_out import render
from producers.batches import submit_batch
from producers.cancel import cancel_job
from producers.deps import ApiDeps, deps_of
from producers.document_output import cancel_document, get_chapter_audio, get_document_audio, get_toc
from producers.documents import get_document, submit_document
from producers.observability import dashboard, get_dashboard, get_lag, metrics
from producers.queries import ProjectionUnavailable
from producers.speech import openai_speech
from producers.submit import JobRequest, Limits, Rejected, scoped_key, unavailable_message

_RETRY: Final = {"Retry-After": "5"}


def _links(job_id: uuid.UUID) -> dict[str, str]:
    return {"self": f"/v1/jobs/{job_id}", "audio": f"/v1/jobs/{job_id}/audio", "events": f"/v1/jobs/{job_id}/events"}


def job_body(job: dict[str, Any]) -> dict[str, Any]:
    audio_job = job["source_job_id"] or job["job_id"]

    def _ms(later: str, earlier: str) -> int | None:
        if job[later] is None or job[earlier] is None:
            return None
        return round((job[later] - job[earlier]).total_seconds() * 1000)

    return {
        "job_id": job["job_id"],
        "state": job["state"],
        "attempt": job["attempt"],
        "fingerprint": job["fingerprint"],
        "request": job["request"],
        "cache_hit": job["cache_hit"],
        "segments_reused": sum(1 for s in job["segments"] if s["reused"]),
        "source_job_id": job["source_job_id"],
        "worker_id": job["worker_id"],
        "segment_count": job["segment_count"],
        "total_duration_ms": job["total_duration_ms"],
        "error": {"code": job["error_code"], "message": job["error_message"]} if job["error_code"] else None,
        "release": {"reason": job["release_reason"], "not_before": job["not_before"]}
        if job["release_reason"]
        else None,
        "cancellation": {"reason": job["cancel_reason"], "at": job["cancelled_at"]} if job["cancel_reason"] else None,
        "timings": {
            "submitted_at": job["submitted_at"],
            "claimed_at": job["claimed_at"],
            "completed_at": job["completed_at"],
            "failed_at": job["failed_at"],
            "cancelled_at": job["cancelled_at"],
            "queue_wait_ms": _ms("claimed_at", "submitted_at"),
            "total_ms": _ms("completed_at", "submitted_at"),
        },
        "segments": [
            {
                "index": s["segment_index"],
                "text": s["span_text"],
                "start": s["span_start"],
                "end": s["span_end"],
                "duration_ms": s["duration_ms"],
                "sample_rate": s["sample_rate"],
                "bytes": s["byte_length"],
                "reused": s["reused"],
                "audio": f"/v1/jobs/{audio_job}/segments/{s['segment_index']}/audio",
            }
            for s in job["segments"]
        ],
        "links": _links(job["job_id"]),
    }


@post("/v1/jobs", status_code=202, summary="Submit text for synthesis")
async def submit_job(
    request: Request[Any, Any, Any],
    data: JSONBody[JobRequest],
    idempotency_key: Annotated[str | None, HeaderParameter(name="Idempotency-Key")] = None,
) -> Response[dict[str, Any]]:
    """202 with the new job; 200 with the finished job when the same request is cached or was already submitted.

    A client that got no answer (a timeout, a dropped connection) retries with the same
    Idempotency-Key: the retry names the same job whether or not the first attempt was recorded.
    """
    deps = deps_of(request)
    try:
        key = scoped_key(idempotency_key, request.headers.get("authorization")) if idempotency_key else None
        accepted = await deps.enqueue(data, key)
    except Rejected as exc:
        raise HTTPException(detail=str(exc), status_code=exc.status, headers=exc.headers()) from exc
    except BrokerUnavailable as exc:
        raise HTTPException(detail=unavailable_message(exc), status_code=503, headers={"Retry-After": "5"}) from exc
    if accepted.finished is not None:
        SUBMISSIONS.labels("cached").inc()
        return Response(job_body(accepted.finished), status_code=200)
    if accepted.known is not None:
        SUBMISSIONS.labels("known").inc()
        return Response(job_body(accepted.known), status_code=200 if accepted.known["state"] == "completed" else 202)
    SUBMISSIONS.labels("queued").inc()
    body = {
        "job_id": accepted.job_id,
        "fingerprint": accepted.fingerprint,
        "state": "queued",
        "links": _links(accepted.job_id),
    }
    return Response(body, status_code=202, headers={"Location": f"/v1/jobs/{accepted.job_id}"})


@get("/v1/jobs/{job_id:uuid}", summary="A job's state, attempt, timings and segments so far, or as of a time")
async def get_job(
    request: Request[Any, Any, Any],
    job_id: uuid.UUID,
    as_of: Annotated[
        datetime | None,
        Parameter(query="as_of", description="ISO 8601 (UTC if no zone): the job as the log had it then"),
    ] = None,
) -> dict[str, Any]:
    deps = deps_of(request)
    if as_of is None:
        job = await deps.reader.job(job_id)
        if job is None:
            raise NotFoundException(f"no job {job_id} (a job just submitted appears within a moment)")
        return job_body(job)
    moment = as_of if as_of.tzinfo else as_of.replace(tzinfo=UTC)
    try:
        past = await deps.audit.job_as_of(job_id, moment)
    except BrokerUnavailable as exc:
        raise HTTPException(detail=f"the log cannot be read: {exc}", status_code=503, headers=_RETRY) from exc
    if past is None:
        raise NotFoundException(f"no job {job_id} in the log as of {moment.isoformat()}")
    return {**job_body(past), "as_of": moment}


@get("/v1/jobs/{job_id:uuid}/events", summary="The job's history read from the log: every event, applied or fenced")
async def get_job_events(request: Request[Any, Any, Any], job_id: uuid.UUID) -> dict[str, Any]:
    """Each event with its partition, offset and time, its producer, its attempt and whether the projection
    applied it or fenced it (and why); the job's attempts, and the time it spent in each state."""
    try:
        history = await deps_of(request).audit.events(job_id)
    except BrokerUnavailable as exc:
        raise HTTPException(detail=f"the log cannot be read: {exc}", status_code=503, headers=_RETRY) from exc
    if history is None:
        raise NotFoundException(f"no event of job {job_id} in the log")
    return history


def expired(job_id: uuid.UUID, limits: Limits, cause: Exception) -> str:
    """The 410 of a job whose audio the sweeper deleted: why, and what to do."""
    return (
        f"the audio of job {job_id} has expired ({cause}): a job keeps its audio for {limits.job_retention_s:g} s"
        " (VOXLOG_JOB_RETENTION_S) after it completed or its result was last reused; submit the request again"
    )


@get("/v1/jobs/{job_id:uuid}/audio", summary="The whole job in its requested format and rate")
async def get_audio(request: Request[Any, Any, Any], job_id: uuid.UUID) -> Response[bytes]:
    deps = deps_of(request)
    job = await deps.reader.job(job_id)
    if job is None:
        raise NotFoundException(f"no job {job_id}")
    if job["state"] != "completed":
        raise HTTPException(detail=f"job {job_id} is {job['state']}, not completed", status_code=409)
    fmt, rate = job["request"]["format"], job["request"]["sample_rate"]
    try:
        audio = await render(deps.blobs, job["segments"], fmt, rate)
    except (BlobNotFound, ValueError) as exc:
        raise HTTPException(detail=expired(job_id, deps.limits, exc), status_code=410) from exc
    extension = "raw" if fmt == "pcm" else fmt
    return Response(
        audio,
        media_type=media_type(fmt, rate),
        headers={"Content-Disposition": f'inline; filename="{job_id}.{extension}"'},
    )


@get("/v1/jobs/{job_id:uuid}/segments/{index:int}/audio", summary="One segment as WAV", media_type="audio/wav")
async def get_segment_audio(request: Request[Any, Any, Any], job_id: uuid.UUID, index: int) -> Response[bytes]:
    deps = deps_of(request)
    job = await deps.reader.job(job_id)
    if job is None:
        raise NotFoundException(f"no job {job_id}")
    segment = next((s for s in job["segments"] if s["segment_index"] == index), None)
    if segment is None:
        raise NotFoundException(f"job {job_id} has no segment {index} (yet)")
    try:
        audio = await asyncio.to_thread(
            deps.blobs.get, AudioRef(sha256=segment["audio_sha256"], uri=segment["audio_uri"])
        )
    except BlobNotFound as exc:
        raise HTTPException(detail=expired(job_id, deps.limits, exc), status_code=410) from exc
    return Response(audio, media_type="audio/wav")


@get("/v1/voices", summary="Voices and model versions announced by the workers")
async def list_voices(request: Request[Any, Any, Any]) -> dict[str, Any]:
    engines = await deps_of(request).reader.engines()
    return {
        "engines": [
            {
                "engine": e.engine,
                "model_version": e.model_version,
                "sample_rate": e.sample_rate,
                "languages": list(e.languages),
                "voices": list(e.voices),
                "workers": e.workers,
            }
            for e in engines
        ],
        "formats": list(supported_formats()),
        "sample_rates": list(SUPPORTED_RATES),
    }


@get("/healthz", summary="The process is alive", media_type=MediaType.JSON)
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@get("/readyz", summary="Postgres and Kafka answer; 503 names the one that does not", media_type=MediaType.JSON)
async def readyz(request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
    deps = deps_of(request)
    checks: dict[str, str] = {}
    try:
        await deps.reader.ping()
        checks["postgres"] = "ok"
    except ProjectionUnavailable as exc:
        checks["postgres"] = f"error: {exc}"
    try:
        await deps.publisher.check()
        checks["kafka"] = "ok"
    except BrokerUnavailable as exc:
        checks["kafka"] = f"error: {exc}"
    ready = all(v == "ok" for v in checks.values())
    headers = {} if ready else {"Retry-After": "5"}
    return Response({"ready": ready, "checks": checks}, status_code=200 if ready else 503, headers=headers)


def _projection_unavailable(_: Request[Any, Any, Any], exc: ProjectionUnavailable) -> Response[dict[str, Any]]:
    detail = f"job status is unavailable while PostgreSQL is unreachable: {exc}"
    return Response({"status_code": 503, "detail": detail}, status_code=503, headers={"Retry-After": "5"})


def create_app(deps: ApiDeps, *, on_startup: list[Any] | None = None, on_shutdown: list[Any] | None = None) -> Litestar:
    app = Litestar(
        route_handlers=[
            submit_job,
            submit_batch,
            get_job,
            get_job_events,
            get_audio,
            get_segment_audio,
            list_voices,
            get_lag,
            dashboard,
            get_dashboard,
            metrics,
            healthz,
            readyz,
            openai_speech,
            cancel_job,
            submit_document,
            get_document,
            get_document_audio,
            get_chapter_audio,
            get_toc,
            cancel_document,
        ],
        openapi_config=OpenAPIConfig(title="voxlog", version="1"),
        # Requests by route (its template, not the path), method and status, and their duration.
        middleware=[
            PrometheusConfig(
                app_name="voxlog-api", prefix="voxlog_http", group_path=True, exclude=["/metrics"]
            ).middleware
        ],
        exception_handlers={ProjectionUnavailable: _projection_unavailable},
        on_startup=on_startup or [],
        on_shutdown=on_shutdown or [],
    )
    app.state.deps = deps
    return app
