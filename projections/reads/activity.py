"""What the dashboard shows beside consumer lag, read from the projection: throughput, phases, cache, nodes.

A node is live while it is heard from: a worker silent past its heartbeat timeout (the sweeper's
15 s: ``voxlog.composition.configs.STALE_AFTER_S``) is shown as gone, and past 15 minutes it leaves the list.
The same rule counts the live workers the API exports (``voxlog_workers``). The API makes its views of these
rows (:mod:`producers.dashboard_activity`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import asyncpg

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


@dataclass(frozen=True)
class ActivityRows:
    """The counts and phase quantiles of the last :data:`WINDOW`, and the nodes heard from."""

    counts: dict[str, Any]
    phases: dict[str, list[float] | None]
    nodes: list[dict[str, Any]]


async def activity(pool: asyncpg.Pool, timeout_s: float, liveness: NodeLiveness) -> ActivityRows:
    """Jobs completed (last minute and :data:`WINDOW`), from the cache and failed; the phases' p50/p95/p99
    over :data:`WINDOW`; the nodes heard from within ``liveness.forget_after_s``."""
    async with pool.acquire(timeout=timeout_s) as conn:
        counts = await conn.fetchrow(_COUNTS, timeout=timeout_s)
        phases = await conn.fetchrow(_PHASES, timeout=timeout_s)
        nodes = await conn.fetch(_NODES, liveness.forget_after_s, timeout=timeout_s)
    return ActivityRows(dict(counts), dict(phases), [dict(n) for n in nodes])


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
