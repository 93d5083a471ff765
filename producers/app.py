"""The Litestar application: submit jobs, read their status and audio from the projections."""

from __future__ import annotations

from typing import Any

from litestar import Litestar, MediaType, Request, Response, get
from litestar.exceptions import ClientException
from litestar.middleware.base import DefineMiddleware
from litestar.openapi import OpenAPIConfig
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import Components, SecurityScheme
from litestar.plugins.prometheus import PrometheusConfig

from foundation.audio_formats import SUPPORTED_RATES, supported_formats
from foundation.errors import BrokerUnavailable
from producers import admin_routes, lexicon_routes, webhook_routes
from producers.auth import PUBLIC_PATHS, READ, KeyAuthentication, add_limit_headers
from producers.batches import submit_batch
from producers.cancel import cancel_job
from producers.caption_routes import CAPTION_ROUTES
from producers.captioned_speech import captioned_speech
from producers.deps import ApiDeps, Injected, dependencies
from producers.document_output import cancel_document, get_chapter_audio, get_document_audio, get_toc
from producers.documents import get_document, submit_document
from producers.history_view import get_job_events
from producers.http_errors import EXCEPTION_HANDLERS, RETRY, responses
from producers.job_routes import get_audio, get_job, get_segment_audio, submit_job
from producers.observability import dashboard, get_dashboard, get_lag, metrics
from producers.ports import JobLog
from producers.request_trace import RequestTrace
from producers.speech import openai_speech
from producers.stream_guard import SendTimeout
from producers.unreachable import unreachable
from producers.usage_routes import get_usage
from producers.views import EngineView, HealthView, ReadyView, VoicesView
from projections.errors import ProjectionUnavailable
from projections.reads.jobs import ProjectionReader


@get(
    "/v1/voices",
    summary="Voices and model versions announced by the workers",
    guards=READ,
    responses=responses(401, 403, 503),
)
async def list_voices(reader: Injected[ProjectionReader]) -> VoicesView:
    return VoicesView(
        engines=[
            EngineView(
                engine=e.engine,
                model_version=e.model_version,
                sample_rate=e.sample_rate,
                languages=list(e.languages),
                voices=list(e.voices),
                workers=e.workers,
            )
            for e in await reader.engines()
        ],
        formats=list(supported_formats()),
        sample_rates=list(SUPPORTED_RATES),
    )


@get("/healthz", summary="The process is alive", media_type=MediaType.JSON, security=[{}])  # no key: PUBLIC_PATHS
async def healthz() -> HealthView:
    return HealthView(status="ok")


@get(
    "/readyz",
    summary="Postgres and Kafka answer; 503 names the one that does not",
    media_type=MediaType.JSON,
    responses={503: ResponseSpec(ReadyView, description="A service is down: the check names it.")},
    security=[{}],  # no key (PUBLIC_PATHS): the document's global security is not this route's
)
async def readyz(reader: Injected[ProjectionReader], publisher: Injected[JobLog]) -> Response[ReadyView]:
    """Each check ``ok`` or ``error: <dependency> unreachable``: the driver's error, which names internal hosts,
    is logged (producers.unreachable), never answered to whoever asks, with no key."""
    checks: dict[str, str] = {}
    try:
        await reader.ping()
        checks["postgres"] = "ok"
    except ProjectionUnavailable as exc:
        checks["postgres"] = f"error: {unreachable('postgres', exc, path='/readyz')}"
    try:
        await publisher.check()
        checks["kafka"] = "ok"
    except BrokerUnavailable as exc:
        checks["kafka"] = f"error: {unreachable('kafka', exc, path='/readyz')}"
    ready = all(v == "ok" for v in checks.values())
    return Response(
        ReadyView(ready=ready, checks=checks), status_code=200 if ready else 503, headers={} if ready else RETRY
    )


class JsonRequest(Request[Any, Any, Any]):
    """Litestar's request, with a JSON body nested deeper than the decoder recurses answered 400: msgspec
    raised RecursionError on a body of 100,000 nested arrays, and the API answered 500."""

    async def json(self) -> Any:
        try:
            return await super().json()
        except RecursionError:
            raise ClientException(
                "the JSON body nests arrays or objects too deeply for it to be read; send what the route takes"
            ) from None


ROUTES = [
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
    get_usage,
    *admin_routes.ROUTES,
    *lexicon_routes.ROUTES,
    *webhook_routes.ROUTES,
    *CAPTION_ROUTES,
    captioned_speech,
]


def create_app(deps: ApiDeps, *, on_startup: list[Any] | None = None, on_shutdown: list[Any] | None = None) -> Litestar:
    return Litestar(
        route_handlers=ROUTES,
        dependencies=dependencies(deps),
        openapi_config=OpenAPIConfig(
            title="voxlog",
            version="1",
            security=[{"apiKey": []}, {"bearer": []}],
            components=Components(
                security_schemes={
                    "apiKey": SecurityScheme(type="apiKey", name="X-API-Key", security_scheme_in="header"),
                    "bearer": SecurityScheme(type="http", scheme="bearer", description="vxl_<id>_<secret>"),
                }
            ),
        ),
        middleware=[
            RequestTrace,  # outermost: everything a request does is in its trace
            DefineMiddleware(SendTimeout, timeout_s=deps.stream_send_timeout_s),  # a stream nobody reads ends
            # Requests by route (its template, not the path), method and status, and their duration.
            PrometheusConfig(
                app_name="voxlog-api", prefix="voxlog_http", group_path=True, exclude=["/metrics"]
            ).middleware,
            DefineMiddleware(KeyAuthentication, book=deps.keys, limiter=deps.limiter, exclude=list(PUBLIC_PATHS)),
        ],
        before_send=[add_limit_headers],
        exception_handlers=EXCEPTION_HANDLERS,  # type: ignore[arg-type]
        request_class=JsonRequest,
        on_startup=on_startup or [],
        on_shutdown=on_shutdown or [],
    )
