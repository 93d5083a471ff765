"""A tenant's standing, which the limits ledger (:mod:`producers.limits_ledger`) reads under the tenant's lock.

Its usage by day (``usage_daily``) and its key's live jobs (``jobs``) as the
projection shows them, plus the jobs the API admitted (``admissions``, the
API's own table) that the projection does not show yet. Read on the ledger's
connection, inside the transaction that holds the tenant's advisory lock, so
that two API instances cannot both admit the last of a quota: the caller
passes the connection, and these are the transaction's statements, one round
trip each. Raises the driver's errors (the ledger knows its outage).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Final

import asyncpg

from projections.errors import ProjectionUnavailable
from projections.reads.live_jobs import LIVE_SQL

_USAGE: Final = """
SELECT coalesce(sum(chars) FILTER (WHERE day = $2), 0)::bigint AS chars_today,
       coalesce(sum(chars), 0)::bigint AS chars_month,
       coalesce(sum(audio_ms_synthesized + audio_ms_reused) FILTER (WHERE day = $2), 0)::bigint AS audio_ms_today,
       coalesce(sum(audio_ms_synthesized + audio_ms_reused), 0)::bigint AS audio_ms_month
FROM usage_daily WHERE tenant = $1 AND day >= date_trunc('month', $2::date)::date AND day <= $2
"""
# Admitted and not projected yet: counted on top of the projection's figures. Audio is counted for every
# admission (the projection's usage has a job's audio only once it completed; the admission goes once it ended).
_PENDING: Final = """
SELECT coalesce(sum(a.chars) FILTER (WHERE j.job_id IS NULL), 0)::bigint AS chars,
       count(*) FILTER (WHERE j.job_id IS NULL AND a.key_id = $2 AND a.live) AS live,
       coalesce(sum(a.audio_ms), 0)::bigint AS audio_ms
FROM admissions a LEFT JOIN jobs j ON j.job_id = a.job_id
WHERE a.tenant = $1
"""
_LIVE: Final = f"SELECT count(*) FROM jobs WHERE key_id = $1 AND state IN ({LIVE_SQL})"


@dataclass(frozen=True)
class Standing:
    """A tenant's use so far (the projection's, plus what was admitted and is not projected yet)."""

    chars_today: int
    chars_month: int
    audio_ms_today: int
    audio_ms_month: int
    live_jobs: int  # of the key


async def read_standing(
    conn: asyncpg.Connection, tenant: str, key_id: str | None, today: date, timeout_s: float
) -> Standing:
    """``tenant``'s standing on ``today`` (the live jobs of ``key_id``; none without a key), on ``conn``."""
    usage = await conn.fetchrow(_USAGE, tenant, today, timeout=timeout_s)
    pending = await conn.fetchrow(_PENDING, tenant, key_id, timeout=timeout_s)
    live = await conn.fetchval(_LIVE, key_id, timeout=timeout_s) if key_id else 0
    if usage is None or pending is None:  # an aggregate always has its row
        raise ProjectionUnavailable("the tenant's usage read no row")
    return Standing(
        chars_today=usage["chars_today"] + pending["chars"],
        chars_month=usage["chars_month"] + pending["chars"],
        audio_ms_today=usage["audio_ms_today"] + pending["audio_ms"],
        audio_ms_month=usage["audio_ms_month"] + pending["audio_ms"],
        live_jobs=int(live) + pending["live"],
    )
