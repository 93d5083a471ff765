"""A queued job's place on the worker it waits on, and when it may start: read from the worker's last heartbeat.

A worker's heartbeat (``NodeHeartbeat`` version 2) lists every claim it holds
and the first jobs waiting on it, in the order it would take them now
(:mod:`contracts.scheduling`); the projection keeps each worker's latest
(``node_heartbeats``). A job listed there waits behind the claims the worker
holds and the jobs listed before it: its position counts them, and its
estimated start is their remaining text over the worker's measured speed. The
figures are the worker's word as of its heartbeat, which the answer dates; a
job the worker names nowhere (further back than the jobs a heartbeat lists, or
not read by its worker yet) has no place. Only counts and times are shown:
never which jobs are ahead (they may be other tenants').
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Final

import asyncpg
from pydantic import TypeAdapter

from contracts.scheduling import HeldClaim

_PLACE: Final = """
SELECT h.worker_id, h.sent_at, h.chars_per_s, h.claims, q.n AS place,
       (SELECT coalesce(sum((ahead.job->>'text_chars')::bigint), 0)
          FROM jsonb_array_elements(h.queue) WITH ORDINALITY AS ahead(job, n) WHERE ahead.n < q.n) AS chars_before
FROM node_heartbeats h CROSS JOIN LATERAL jsonb_array_elements(h.queue) WITH ORDINALITY AS q(job, n)
WHERE h.sent_at > now() - make_interval(secs => $2) AND q.job->>'job_id' = $1::text
ORDER BY h.sent_at DESC LIMIT 1
"""
_CLAIMS: Final = TypeAdapter(list[HeldClaim])


@dataclass(frozen=True)
class QueueRow:
    """The latest heartbeat of a live worker that lists the job: the claims it holds, and the job's place
    (from 1) among the jobs it lists, behind ``chars_before`` characters of them."""

    worker: str
    sent_at: datetime
    chars_per_s: float | None
    claims: list[HeldClaim]
    place: int
    chars_before: int


async def queue_row(pool: asyncpg.Pool, job_id: uuid.UUID, live_within_s: float, timeout_s: float) -> QueueRow | None:
    """The job's listing by the worker heard from within ``live_within_s`` whose latest heartbeat lists it (the
    newest heartbeat's, should two list it during a rebalance); ``None`` when none does."""
    row = await pool.fetchrow(_PLACE, str(job_id), live_within_s, timeout=timeout_s)
    if row is None:
        return None
    claims = row["claims"]
    return QueueRow(
        row["worker_id"],
        row["sent_at"],
        row["chars_per_s"],
        _CLAIMS.validate_python(json.loads(claims) if isinstance(claims, str) else claims),
        int(row["place"]),
        int(row["chars_before"]),
    )
