"""What the API's handlers need, attached to the app by the composition root."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from litestar import Request

from contracts import Producer
from foundation.blobs import BlobStore
from producers.ports import JobAudit, JobLog, LagView
from producers.queries import ProjectionReader
from producers.submit import Limits


@dataclass(frozen=True)
class ApiDeps:
    reader: ProjectionReader
    publisher: JobLog
    blobs: BlobStore
    limits: Limits
    producer: Producer
    audit: JobAudit
    lag: LagView
    speech_timeout_s: float = 120.0
    stream_poll_s: float = 0.1
    openai_default_voice: str = ""


def deps_of(request: Request[Any, Any, Any]) -> ApiDeps:
    deps: ApiDeps = request.app.state.deps
    return deps
