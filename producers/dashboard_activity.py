"""What the dashboard shows beside consumer lag, read from the projection: throughput, phases, cache, nodes.

A node is live while it is heard from: a worker silent past its heartbeat timeout (the sweeper's
``VOXLOG_STALE_AFTER_S``) is shown as gone, and past ``VOXLOG_NODE_FORGET_AFTER_S`` it leaves the list.
The same rule counts the live workers the API exports (``voxlog_workers``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Literal

import asyncpg
from pydantic import Field

from producers.views import View

WorkerQueues = dict[str, dict[tuple[str, str], int]]
"""By worker, its waiting jobs by (tenant, priority)."""
WINDOW: Final = "10 minutes"  # the phase percentiles and the cache ratio look this far back

_COUNTS: Final = f"""
SELECT count(*) FILTER (WHERE completed_at > now() - interval '60 seconds') AS completed_60s,
       count(*) FILTER (WHERE completed_at > now() - interval '{WINDOW}') AS completed,
       count(*) FILTER (WHERE completed_at > now() - interval '{WINDOW}' AND cache_hit) AS from_cache,
       count(*) FILTER (WHERE failed_at > now() - interval '{WINDOW}') AS failed
FROM jobs
WHERE completed_at > now() - interval '{WINDOW}' OR failed_at > now() - interval '{WINDOW}'
"""
_QUANTILES: Final = "ARRAY[0.5, 0.95, 0.99]"
_PHASES: Final = f"""
SELECT percentile_cont({_QUANTILES}) WITHIN GROUP (ORDER BY extract(epoch FROM claimed_at - submitted_at)) AS queued,
       percentile_cont({_QUANTILES}) WITHIN GROUP (ORDER BY extract(epoch FROM completed_at - claimed_at)) AS synthesis,
       percentile_cont({_QUANTILES}) WITHIN GROUP (ORDER BY extract(epoch FROM completed_at - submitted_at)) AS total
FROM jobs
WHERE completed_at > now() - interval '{WINDOW}' AND NOT cache_hit AND claimed_at IS NOT NULL
"""
_NODES: Final = """
SELECT worker_id, engine, model_version, device, job_id, segments_done, segments_total, queue_counts,
       jsonb_array_length(claims) AS claims,
       busy_s / greatest(extract(epoch FROM sent_at - started_at), 1) AS busy_fraction,
       extract(epoch FROM now() - sent_at) AS silent_s
FROM node_heartbeats WHERE sent_at > now() - make_interval(secs => $1) ORDER BY worker_id
"""
_LIVE_WORKERS: Final = """
SELECT n.engine, n.model_version, count(*) AS workers
FROM nodes n LEFT JOIN node_heartbeats h USING (worker_id)
WHERE greatest(h.sent_at, n.announced_at) > now() - make_interval(secs => $1)
GROUP BY n.engine, n.model_version
"""


_QUEUES: Final = """
SELECT h.worker_id, c->>'tenant' AS tenant, c->>'priority' AS priority, (c->>'jobs')::bigint AS jobs
FROM node_heartbeats h LEFT JOIN LATERAL jsonb_array_elements(h.queue_counts) AS c ON true
WHERE h.sent_at > now() - make_interval(secs => $1)
"""


@dataclass(frozen=True)
class NodeLiveness:
    """When a silent node is gone (the sweeper's heartbeat timeout), and when it leaves the list."""

    silent_after_s: float = 15.0
    forget_after_s: float = 900.0


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


async def activity(pool: asyncpg.Pool, timeout_s: float, liveness: NodeLiveness) -> Activity:
    """Jobs per second (last minute), phase p50/p95/p99 and the cache ratio (last 10 minutes), and the nodes
    heard from within ``liveness.forget_after_s``."""
    async with pool.acquire(timeout=timeout_s) as conn:
        counts = await conn.fetchrow(_COUNTS, timeout=timeout_s)
        phases = await conn.fetchrow(_PHASES, timeout=timeout_s)
        nodes = await conn.fetch(_NODES, liveness.forget_after_s, timeout=timeout_s)
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
            for n in nodes
        ],
    )


async def live_workers(pool: asyncpg.Pool, timeout_s: float, liveness: NodeLiveness) -> dict[tuple[str, str], int]:
    """The announced workers heard from within ``liveness.silent_after_s``, by (engine, model version)."""
    rows = await pool.fetch(_LIVE_WORKERS, liveness.silent_after_s, timeout=timeout_s)
    return {(r["engine"], r["model_version"]): int(r["workers"]) for r in rows}


async def worker_queues(pool: asyncpg.Pool, timeout_s: float, liveness: NodeLiveness) -> WorkerQueues:
    """By worker heard from within ``liveness.silent_after_s``, its waiting jobs by (tenant, priority)."""
    rows = await pool.fetch(_QUEUES, liveness.silent_after_s, timeout=timeout_s)
    queues: WorkerQueues = {}
    for r in rows:
        counts = queues.setdefault(r["worker_id"], {})
        if r["tenant"] is not None:
            counts[(r["tenant"], r["priority"])] = int(r["jobs"])
    return queues


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
