"""What the API's handlers need, attached to the app by the composition root."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from litestar import Request

from contracts import Producer
from foundation.blobs import BlobStore
from producers.admission import Admission
from producers.ports import JobAudit, JobChangeFeed, JobLog, LagView, Polling
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
    changes: JobChangeFeed = field(default_factory=Polling)
    speech_timeout_s: float = 120.0
    openai_default_voice: str = ""
    admission: Admission | None = None  # None: every submission is taken (no backpressure)


def deps_of(request: Request[Any, Any, Any]) -> ApiDeps:
    deps: ApiDeps = request.app.state.deps
    return deps
