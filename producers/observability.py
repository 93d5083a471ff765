"""The API's routes for watching voxlog: consumer lag, the live dashboard, and Prometheus metrics."""

from __future__ import annotations

from litestar import MediaType, Response, get
from prometheus_client import generate_latest

from producers.auth import OPERATOR
from producers.dashboard_activity import Activity, activity_view
from producers.dashboard_page import PAGE
from producers.deps import Injected
from producers.http_errors import responses
from producers.ports import LagView
from producers.views import View
from projections.errors import ProjectionUnavailable
from projections.reads.jobs import ProjectionReader


class PartitionLag(View):
    partition: int
    position: int | None
    end: int
    records: int
    seconds: float
    per_s: float | None
    drain_s: float | None


class GroupLag(View):
    group: str
    topic: str
    members: int | None
    status: str  # OK, WARN, STALL or STOP
    reason: str
    records: int
    seconds: float
    per_s: float | None
    drain_s: float | None
    window_s: float
    partitions: list[PartitionLag]


class LagReport(View):
    """What ``voxlog lag --json`` prints."""

    at: str
    groups: list[GroupLag]
    dead_letters: int | None
    error: str | None


class DashboardView(View):
    lag: LagReport
    activity: Activity | None  # None while PostgreSQL is unreachable (lag comes from Kafka, and is still shown)


@get(
    "/v1/lag",
    summary="Consumer lag of the synthesis groups and the projector, as last sampled",
    guards=OPERATOR,
    responses=responses(401, 403),
)
async def get_lag(lag: Injected[LagView]) -> LagReport:
    """Per group and partition: records and seconds behind, rate, time to drain, and a Burrow-style status."""
    return LagReport.model_validate(lag.latest())


@get(
    "/dashboard",
    summary="A live page of consumer lag, throughput, latencies, nodes and dead letters",
    media_type=MediaType.HTML,
    include_in_schema=False,
)
async def dashboard() -> str:
    return PAGE


@get(
    "/v1/dashboard",
    summary="What /dashboard shows: consumer lag (as /v1/lag) and the projection's recent activity",
    guards=OPERATOR,
    responses=responses(401, 403),
)
async def get_dashboard(lag: Injected[LagView], reader: Injected[ProjectionReader]) -> DashboardView:
    try:
        recent: Activity | None = activity_view(await reader.activity(), reader.liveness)
    except ProjectionUnavailable:
        recent = None
    return DashboardView(lag=LagReport.model_validate(lag.latest()), activity=recent)


@get(
    "/metrics",
    summary="Prometheus metrics of this API process",
    media_type="text/plain; version=0.0.4",
    guards=OPERATOR,
    responses=responses(401, 403),
)
async def metrics() -> Response[bytes]:
    return Response(generate_latest(), media_type="text/plain; version=0.0.4; charset=utf-8")
