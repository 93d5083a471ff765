"""What the dashboard shows beside consumer lag, read from the projection: throughput, phases, cache, nodes."""

from __future__ import annotations

from typing import Final

import asyncpg

from producers.views import View

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
SELECT worker_id, engine, model_version, device, job_id, segments_done, segments_total,
       busy_s / greatest(extract(epoch FROM sent_at - started_at), 1) AS busy_fraction,
       extract(epoch FROM now() - sent_at) AS silent_s
FROM node_heartbeats ORDER BY worker_id
"""


class Quantiles(View):
    p50: float | None
    p95: float | None
    p99: float | None


class NodeActivity(View):
    worker_id: str
    engine: str
    model_version: str
    device: str
    job_id: str | None
    segments: str | None
    busy_fraction: float | None
    silent_s: float | None


class Activity(View):
    window: str
    jobs_per_s: float
    completed: int
    failed: int
    cache_ratio: float | None
    phases_s: dict[str, Quantiles | None]
    nodes: list[NodeActivity]


async def activity(pool: asyncpg.Pool, timeout_s: float) -> Activity:
    """Jobs per second (last minute), phase p50/p95/p99 and the cache ratio (last 10 minutes), and the nodes."""
    async with pool.acquire(timeout=timeout_s) as conn:
        counts = await conn.fetchrow(_COUNTS, timeout=timeout_s)
        phases = await conn.fetchrow(_PHASES, timeout=timeout_s)
        nodes = await conn.fetch(_NODES, timeout=timeout_s)
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
                engine=n["engine"],
                model_version=n["model_version"],
                device=n["device"],
                job_id=str(n["job_id"]) if n["job_id"] else None,
                segments=f"{n['segments_done']}/{n['segments_total']}" if n["segments_total"] else None,
                busy_fraction=_round(n["busy_fraction"]),
                silent_s=_round(n["silent_s"]),
            )
            for n in nodes
        ],
    )


def _quantiles(values: list[float] | None) -> Quantiles | None:
    if values is None:
        return None
    p50, p95, p99 = map(_round, values)
    return Quantiles(p50=p50, p95=p95, p99=p99)


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 3)
