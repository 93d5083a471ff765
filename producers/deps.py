"""What the API's handlers need, attached to the app by the composition root."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from litestar import Request

from contracts import Producer
from producers.queries import ProjectionReader
from producers.submit import LazyPublisher, Limits
from voxlog.blobs import BlobStore


@dataclass(frozen=True)
class ApiDeps:
    reader: ProjectionReader
    publisher: LazyPublisher
    blobs: BlobStore
    limits: Limits
    producer: Producer
    speech_timeout_s: float = 120.0
    stream_poll_s: float = 0.1
    openai_default_voice: str = ""


def deps_of(request: Request[Any, Any, Any]) -> ApiDeps:
    deps: ApiDeps = request.app.state.deps
    return deps
