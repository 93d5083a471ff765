"""The dashboard's views of the projection's activity rows (:mod:`projections.reads.activity`)."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field

from producers.views import View
from projections.reads.activity import WINDOW, ActivityRows, NodeLiveness


class Quantiles(View):
    p50: float | None
    p95: float | None
    p99: float | None


class QueueCountView(View):
    """How many jobs of one tenant and priority wait on a worker, and their text."""

    tenant: str
    priority: str
    jobs: int
    text_chars: int


class NodeActivity(View):
    """A node as last heard from: ``gone`` once silent past its heartbeat timeout (its job and busy fraction are
    then what it last said, not what it does)."""

    worker_id: str
    state: Literal["live", "gone"]
    engine: str
    model_version: str
    device: str
    job_id: str | None
    segments: str | None
    busy_fraction: float | None
    silent_s: float | None
    claims: int = Field(0, description="The claims the worker holds (one on the engine, the others waiting).")
    queue: list[QueueCountView] = Field(
        default_factory=list, description="The jobs waiting on it (read, not claimed), by tenant and priority."
    )


class Activity(View):
    window: str
    jobs_per_s: float
    completed: int
    failed: int
    cache_ratio: float | None
    phases_s: dict[str, Quantiles | None]
    nodes: list[NodeActivity]


def activity_view(rows: ActivityRows, liveness: NodeLiveness) -> Activity:
    """Jobs per second (last minute), phase p50/p95/p99 and the cache ratio, and the nodes, as shown."""
    counts, phases = rows.counts, rows.phases
    completed = counts["completed"]
    return Activity(
        window=WINDOW,
        jobs_per_s=round(counts["completed_60s"] / 60, 3),
        completed=completed,
        failed=counts["failed"],
        cache_ratio=round(counts["from_cache"] / completed, 3) if completed else None,
        phases_s={name: _quantiles(phases[name]) for name in ("queued", "synthesis", "total")},
        nodes=[
            NodeActivity(
                worker_id=n["worker_id"],
                state="gone" if float(n["silent_s"]) > liveness.silent_after_s else "live",
                engine=n["engine"],
                model_version=n["model_version"],
                device=n["device"],
                job_id=str(n["job_id"]) if n["job_id"] else None,
                segments=f"{n['segments_done']}/{n['segments_total']}" if n["segments_total"] else None,
                busy_fraction=_round(n["busy_fraction"]),
                silent_s=_round(n["silent_s"]),
                claims=n["claims"],
                queue=_queue(n["queue_counts"]),
            )
            for n in rows.nodes
        ],
    )


def _queue(stored: str | list[dict[str, Any]]) -> list[QueueCountView]:
    counts = json.loads(stored) if isinstance(stored, str) else stored
    views = [QueueCountView.model_validate(count) for count in counts]
    return sorted(views, key=lambda c: (c.priority != "interactive", -c.jobs, c.tenant))


def _quantiles(values: list[float] | None) -> Quantiles | None:
    if values is None:
        return None
    p50, p95, p99 = map(_round, values)
    return Quantiles(p50=p50, p95=p95, p99=p99)


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 3)
