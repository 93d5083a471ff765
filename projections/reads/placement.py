"""What the API's placement of new jobs (:mod:`producers.placement`) reads of the projection, and its upsert.

The work of each partition: the text of its live jobs (queued, claimed or
released for a retry) plus a fixed cost a job, found through ``placements``
(the API's own table: the partition each fingerprint was placed in). And which
of the jobs an API placed the projection shows already: from then on the
reading counts their work, and the API stops adding it. Raises the driver's
errors (the placement knows its outage, and places by key meanwhile).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Final

import asyncpg

from projections.reads.live_jobs import LIVE_SQL

_WORK: Final = (
    "SELECT r.kafka_partition, coalesce(sum(length(j.request->>'text')), 0) + $1 * count(*) AS work"
    " FROM jobs j JOIN placements r ON r.fingerprint = j.fingerprint"
    f" WHERE j.state IN ({LIVE_SQL}) GROUP BY r.kafka_partition"
)
_PROJECTED: Final = "SELECT job_id FROM jobs WHERE job_id = ANY($1::uuid[])"
PLACE_SQL: Final = (
    "INSERT INTO placements AS r (fingerprint, kafka_partition, expires_at)"
    " SELECT f, p, now() + make_interval(secs => $3) FROM unnest($1::text[], $2::int[]) AS u(f, p)"
    " ON CONFLICT (fingerprint) DO UPDATE SET expires_at = excluded.expires_at,"
    # An expired placement, or one in a partition the topic no longer has, is made anew.
    " kafka_partition = CASE WHEN r.expires_at < now() OR r.kafka_partition >= $4"
    " THEN excluded.kafka_partition ELSE r.kafka_partition END"
    " RETURNING fingerprint, kafka_partition"
)
"""The partition of each fingerprint ``$1`` (distinct): the one it has (its use renewed for ``$3`` seconds), or
the one proposed for it (``$2``, in the same order) when it has none, or an expired one, or one of a partition
the topic (of ``$4`` partitions) no longer has. Every API places by it, so duplicates meet."""


async def partitions_work(pool: asyncpg.Pool, job_cost_chars: int, timeout_s: float) -> dict[int, float]:
    """The work of every partition with live jobs placed in it, in characters (``job_cost_chars`` a job besides
    its text); a partition absent has none."""
    rows = await pool.fetch(_WORK, job_cost_chars, timeout=timeout_s)
    return {int(row["kafka_partition"]): float(row["work"]) for row in rows}


async def projected_jobs(pool: asyncpg.Pool, job_ids: Sequence[uuid.UUID], timeout_s: float) -> set[uuid.UUID]:
    """Which of ``job_ids`` the projection shows."""
    return {row["job_id"] for row in await pool.fetch(_PROJECTED, list(job_ids), timeout=timeout_s)}
