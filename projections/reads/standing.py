"""A tenant's standing, which the limits ledger (:mod:`producers.limits_ledger`) reads under the tenant's lock.

Its usage by day (``usage_daily``) and its key's live jobs (``jobs``) as the
projection shows them, plus the jobs the API admitted (``admissions``, the
API's own table) that the projection does not show yet, plus what the API
instances hold in leases not expired (``admission_leases``: producers.quota_leases). Read on the ledger's
connection, inside the transaction that holds the tenant's advisory lock, so
that two API instances cannot both admit the last of a quota: the caller
passes the connection, and the standing is one statement of that
transaction (one snapshot, one round trip). Raises the driver's errors (the
ledger knows its outage).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Final

import asyncpg

from projections.errors import ProjectionUnavailable
from projections.reads.live_jobs import LIVE_SQL

# One statement, so one snapshot: the projector commits a job's row and its usage together, and a standing
# read in two statements could see the usage before that commit and the job after it, counting the job by
# neither (two API instances then both admitted the last of a quota). Admitted and not projected yet: counted
# on top of the projection's figures. Audio is counted for every admission (the projection's usage has a job's
# audio only once it completed; the admission goes once it ended).
_STANDING: Final = f"""
WITH usage AS (
    SELECT coalesce(sum(chars) FILTER (WHERE day = $2), 0)::bigint AS chars_today,
           coalesce(sum(chars), 0)::bigint AS chars_month,
           coalesce(sum(audio_ms_synthesized + audio_ms_reused) FILTER (WHERE day = $2), 0)::bigint
               AS audio_ms_today,
           coalesce(sum(audio_ms_synthesized + audio_ms_reused), 0)::bigint AS audio_ms_month
    FROM usage_daily WHERE tenant = $1 AND day >= date_trunc('month', $2::date)::date AND day <= $2
), pending AS (
    SELECT coalesce(sum(a.chars) FILTER (WHERE j.job_id IS NULL), 0)::bigint AS chars,
           count(*) FILTER (WHERE j.job_id IS NULL AND a.key_id = $3 AND a.live) AS live,
           coalesce(sum(a.audio_ms), 0)::bigint AS audio_ms
    FROM admissions a LEFT JOIN jobs j ON j.job_id = a.job_id
    WHERE a.tenant = $1
), projected AS (
    SELECT count(*) AS live FROM jobs WHERE $3::text IS NOT NULL AND key_id = $3 AND state IN ({LIVE_SQL})
), leased AS (
    SELECT coalesce(sum(chars), 0)::bigint AS chars, coalesce(sum(audio_ms), 0)::bigint AS audio_ms,
           coalesce(sum(live) FILTER (WHERE key_id = $3), 0)::bigint AS live
    FROM admission_leases WHERE tenant = $1 AND expires_at > clock_timestamp()
)
SELECT u.chars_today + p.chars + l.chars AS chars_today, u.chars_month + p.chars + l.chars AS chars_month,
       u.audio_ms_today + p.audio_ms + l.audio_ms AS audio_ms_today,
       u.audio_ms_month + p.audio_ms + l.audio_ms AS audio_ms_month,
       (j.live + p.live + l.live)::bigint AS live_jobs,
       l.chars AS leased_chars, l.audio_ms AS leased_audio_ms, l.live AS leased_live
FROM usage u, pending p, projected j, leased l
"""


@dataclass(frozen=True)
class Standing:
    """A tenant's use so far (the projection's, plus what was admitted and is not projected yet)."""

    chars_today: int
    chars_month: int
    audio_ms_today: int
    audio_ms_month: int
    live_jobs: int  # of the key
    leased_chars: int = 0  # of the above, what API instances hold in leases (room again once they settle)
    leased_audio_ms: int = 0
    leased_live: int = 0


async def read_standing(
    conn: asyncpg.Connection, tenant: str, key_id: str | None, today: date, timeout_s: float
) -> Standing:
    """``tenant``'s standing on ``today`` (the live jobs of ``key_id``; none without a key), on ``conn``."""
    row = await conn.fetchrow(_STANDING, tenant, today, key_id, timeout=timeout_s)
    if row is None:  # an aggregate always has its row
        raise ProjectionUnavailable("the tenant's usage read no row")
    return Standing(
        chars_today=row["chars_today"],
        chars_month=row["chars_month"],
        audio_ms_today=row["audio_ms_today"],
        audio_ms_month=row["audio_ms_month"],
        live_jobs=row["live_jobs"],
        leased_chars=row["leased_chars"],
        leased_audio_ms=row["leased_audio_ms"],
        leased_live=row["leased_live"],
    )
