"""What the API's handlers need, attached to the app by the composition root."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from litestar import Request

from contracts import Producer
from foundation.blobs import BlobStore
from foundation.lifecycle import OwnedTasks
from producers.admission import Admission
from producers.document_queries import DocumentReader
from producers.ports import DocumentLog, JobAudit, JobChangeFeed, JobLog, LagView, Polling
from producers.queries import ProjectionReader
from producers.submit import Accepted, JobRequest, Limits, enqueue


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
    documents: DocumentReader | None = None  # None (with document_log): no /v1/documents
    document_log: DocumentLog | None = None
    tasks: OwnedTasks = field(default_factory=OwnedTasks)  # closed by the composition root at shutdown

    async def enqueue(self, body: JobRequest, key: str | None) -> Accepted:
        """:func:`producers.submit.enqueue` with this API's projection, log, blobs, limits and backpressure."""
        return await enqueue(
            body,
            key,
            reader=self.reader,
            publisher=self.publisher,
            limits=self.limits,
            producer=self.producer,
            blobs=self.blobs,
            admission=self.admission,
        )


def deps_of(request: Request[Any, Any, Any]) -> ApiDeps:
    deps: ApiDeps = request.app.state.deps
    return deps
