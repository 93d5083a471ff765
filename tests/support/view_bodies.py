"""Whole bodies of the API's views, as a fake API sends them to voxlog.client (which reads them typed): each
checked against its model in :mod:`producers.views` before it is returned, so a fake that drifts from the API
fails where it is built."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from producers.views import JobAccepted, JobHistoryView, JobView, VoicesView

RATE = 24000
SERVER_T0 = datetime(2030, 1, 1, tzinfo=UTC)
"""The server's clock at a job's submission: later than any test's own clock."""


def checked(view: type[Any], body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as the API would send it: every field of ``view``, valid (else the fake itself is wrong)."""
    return dict(view.model_validate(body).model_dump(mode="json"))


def at(ms: int) -> str:
    """``ms`` after :data:`SERVER_T0`, as the API writes a time."""
    return (SERVER_T0 + timedelta(milliseconds=ms)).isoformat().replace("+00:00", "Z")


def error(status: int, detail: str) -> httpx.Response:
    """An error answer as the API gives one (its ``detail`` says what to fix)."""
    return httpx.Response(status, json={"status_code": status, "detail": detail})


def voices_body(*voices: str) -> dict[str, Any]:
    """``GET /v1/voices``: one engine announcing ``voices`` (none: no worker announced one)."""
    engines = [{"engine": "kokoro-onnx", "model_version": "m1", "sample_rate": RATE, "languages": ["en-us"],
                "voices": list(voices), "workers": 1}] if voices else []  # fmt: skip
    return checked(VoicesView, {"engines": engines, "formats": ["wav"], "sample_rates": [RATE]})


def links(job_id: uuid.UUID) -> dict[str, str]:
    return {"self": f"/v1/jobs/{job_id}", "audio": f"/v1/jobs/{job_id}/audio", "events": f"/v1/jobs/{job_id}/events"}


def accepted_body(job_id: uuid.UUID, state: str = "queued") -> dict[str, Any]:
    """``POST /v1/jobs``'s 202."""
    body = {"job_id": str(job_id), "fingerprint": "ab" * 32, "state": state, "degraded": None, "links": links(job_id)}
    return checked(JobAccepted, body)


def job_body(
    job_id: uuid.UUID, text: str, state: str, *, claimed: bool = True, error: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``GET /v1/jobs/{id}``: claimed 100 ms after its submission, ended 300 ms after."""
    request = {"text": text, "voice": "af_heart", "speed": 1.0, "lang": "en-us", "engine": "kokoro-onnx",
               "model_version": "m1", "format": "wav", "sample_rate": RATE}  # fmt: skip
    ended = state == "completed"
    timings = {"submitted_at": at(0), "claimed_at": at(100) if claimed else None,
               "completed_at": at(300) if ended else None, "failed_at": at(300) if state == "failed" else None,
               "cancelled_at": None, "queue_wait_ms": 100 if claimed else None,
               "total_ms": 300 if ended else None}  # fmt: skip
    return checked(JobView, {
        "job_id": str(job_id), "state": state, "attempt": 1 if claimed else 0, "fingerprint": "ab" * 32,
        "request": request, "degraded": None, "cache_hit": False, "segments_reused": 0, "source_job_id": None,
        "worker_id": "w-1" if claimed else None, "segment_count": 1 if ended else None,
        "total_duration_ms": 4000 if ended else None, "error": error, "release": None, "cancellation": None,
        "timings": timings, "segments": [], "links": links(job_id), "queue": None,
    })  # fmt: skip


def history_body(job_id: uuid.UUID, text: str) -> dict[str, Any]:
    """``GET /v1/jobs/{id}/events`` of a job that completed: queued at 0 ms, claimed at 1, its two segments
    produced at 2 and 4 (recorded in that order), completed at 3 (server time)."""

    def event(offset: int, kind: str, ms: int, state: str) -> dict[str, Any]:
        producer = {"service": "worker", "instance": "w-1", "host": None, "engine": "kokoro-onnx",
                    "model_version": "m1", "device": "cpu"}  # fmt: skip
        return {"partition": 3, "offset": offset, "appended_at": at(ms), "occurred_at": at(ms), "type": kind,
                "schema_version": 1, "event_id": str(uuid.UUID(int=offset)), "attempt": 1, "producer": producer,
                "outcome": "applied", "reason": None, "state_after": state, "payload": {}}  # fmt: skip

    events = [event(0, "JobQueued", 0, "queued"), event(1, "JobClaimed", 1, "claimed"),
              event(2, "SegmentProduced", 2, "claimed"), event(3, "SegmentProduced", 4, "claimed"),
              event(4, "JobCompleted", 3, "completed")]  # fmt: skip
    attempt = {"attempt": 1, "worker_id": "w-1", "host": None, "device": "cpu", "engine": "kokoro-onnx",
               "model_version": "m1", "claimed_at": at(1), "ended_at": at(3), "ended_by": "JobCompleted",
               "seconds": 0.002, "segments": 2, "fenced_events": 0}  # fmt: skip
    return checked(JobHistoryView, {
        "job_id": str(job_id), "tenant": "default", "fingerprint": "ab" * 32, "state": "completed", "attempt": 1,
        "request": {"text": text}, "degraded_from": None, "reused_from": None, "result_evicted": None,
        "cancelled": None, "waited": [], "events": events, "attempts": [attempt],
        "time_in_state": [{"state": "completed", "attempt": 1, "since": at(3), "until": None, "seconds": None}],
    })  # fmt: skip
