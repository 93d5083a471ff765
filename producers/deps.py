"""What the API's handlers need, handed to them by Litestar's dependency injection.

The composition root builds one :class:`ApiDeps`; :func:`dependencies` makes
each of its fields a dependency of the same name, so a handler declares the
parameters it uses (``reader: ProjectionReader``) and never looks anything up
on the request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Annotated, Any, TypeAlias, TypeVar

from litestar import Request
from litestar.di import Dependency, Provide
from litestar.params import SkipValidationMarker

from contracts import Producer
from foundation.blobs import BlobStore
from foundation.lifecycle import OwnedTasks
from foundation.settings import OPENAI_VOICES
from producers.api_keys import Principal
from producers.audit_slots import AuditSlots
from producers.auth import KeyBook
from producers.caption_cache import CaptionCache
from producers.document_parsing import DocumentParser
from producers.ports import JobAudit, JobChangeFeed, JobLog, LagView, Operations, Polling
from producers.rate_limit import RateLimiter
from producers.requests import Limits
from producers.submission import Submissions
from producers.tenant_limits import NO_LIMITS, Policies
from producers.webhooks import WebhookRegistry
from projections.reads.documents import DocumentReader
from projections.reads.jobs import ProjectionReader

T = TypeVar("T")

Injected: TypeAlias = Annotated[T, Dependency(kind="named"), SkipValidationMarker()]
"""A handler's parameter that the app injects by its name (a field of :class:`ApiDeps`). It is one of
this API's own objects, so it is not validated as request data is."""


@dataclass(frozen=True)
class ApiDeps:
    reader: ProjectionReader
    submissions: Submissions
    publisher: JobLog  # cancellations (submissions publish through ``submissions``)
    blobs: BlobStore
    limits: Limits
    producer: Producer
    audit: JobAudit
    lag: LagView
    documents: DocumentReader
    document_parser: DocumentParser  # parses and splits a POST /v1/documents off the event loop
    keys: KeyBook | None = None  # None: auth is off, every request is the default tenant's with every scope
    limiter: RateLimiter | None = None  # each key's requests per second (None: none judged)
    policies: Policies = NO_LIMITS  # each tenant's limits, as /v1/usage shows them
    changes: JobChangeFeed = field(default_factory=Polling)
    audit_slots: AuditSlots = field(default_factory=AuditSlots)  # the audit's reads of the log, fair by tenant
    captions: CaptionCache = field(default_factory=CaptionCache)  # completed jobs' and documents' captions, kept
    operations: Operations | None = None  # the admin routes' switches and purges (None: they answer 404)
    webhooks: WebhookRegistry | None = None  # the tenants' webhook endpoints (None: /v1/webhooks answers 404)
    speech_timeout_s: float = 120.0
    stream_send_timeout_s: float = 30.0  # a streamed answer whose client takes no chunk for this long is closed
    openai_default_voice: str = ""
    openai_voices: Mapping[str, str] = field(default_factory=lambda: dict(OPENAI_VOICES))  # OpenAI's names -> ours
    tasks: OwnedTasks = field(default_factory=OwnedTasks)  # closed by the composition root at shutdown


def _constant(value: T) -> Callable[[], T]:
    def provide() -> T:
        return value

    return provide


def _principal(request: Request[Any, Any, Any]) -> Principal:
    """Whom the request speaks for, as the authentication middleware found (producers.auth)."""
    principal: Principal = request.user
    return principal


def dependencies(deps: ApiDeps) -> dict[str, Provide]:
    """Each field of ``deps`` as a dependency of its name, ``deps`` itself, and the request's ``principal``."""
    provided: dict[str, Any] = {f.name: getattr(deps, f.name) for f in fields(deps)}
    provided["deps"] = deps
    injected = {
        name: Provide(_constant(value), use_cache=True, sync_to_thread=False) for name, value in provided.items()
    }
    injected["principal"] = Provide(_principal, sync_to_thread=False)
    return injected
