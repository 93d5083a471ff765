"""The API's routes for watching voxlog: consumer lag, the live dashboard, and Prometheus metrics."""

from __future__ import annotations

from typing import Any

from litestar import MediaType, Request, Response, get
from prometheus_client import generate_latest

from producers.dashboard_page import PAGE
from producers.deps import deps_of
from producers.queries import ProjectionUnavailable


@get("/v1/lag", summary="Consumer lag of the synthesis groups and the projector, as last sampled")
async def get_lag(request: Request[Any, Any, Any]) -> dict[str, Any]:
    """Per group and partition: records and seconds behind, rate, time to drain, and a Burrow-style status."""
    return deps_of(request).lag.latest()


@get(
    "/dashboard",
    summary="A live page of consumer lag, throughput, latencies, nodes and dead letters",
    media_type=MediaType.HTML,
    include_in_schema=False,
)
async def dashboard() -> str:
    return PAGE


@get("/v1/dashboard", summary="What /dashboard shows: consumer lag (as /v1/lag) and the projection's recent activity")
async def get_dashboard(request: Request[Any, Any, Any]) -> dict[str, Any]:
    deps = deps_of(request)
    try:
        recent: dict[str, Any] | None = await deps.reader.activity()
    except ProjectionUnavailable:
        recent = None  # lag comes from Kafka and is still shown
    return {"lag": deps.lag.latest(), "activity": recent}


@get("/metrics", summary="Prometheus metrics of this API process", media_type="text/plain; version=0.0.4")
async def metrics() -> Response[bytes]:
    return Response(generate_latest(), media_type="text/plain; version=0.0.4; charset=utf-8")
