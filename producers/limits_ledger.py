"""PostgreSQL's side of the limits, shared by every API instance: token buckets, and what was admitted.

``rate_buckets`` holds a token bucket per API key, refilled and taken from in
one statement by the database's clock (API instances' clocks may disagree),
a block of tokens at a time that an API instance gives out and puts back what
it did not (:mod:`producers.rate_leases`).
``admissions`` holds the jobs an API admitted, until the projection shows
them ended: a tenant's standing (its usage by day, its keys' live jobs) is the
projection's plus the admitted jobs it does not show yet, and its audio the
audio given plus the audio expected of every admitted job not ended, read and
added to under a lock of the tenant's, so that two API instances cannot both
admit the last of a quota. An admission is dropped as new ones are written
once its job has ended, however far the projector lags (a lag used to reset
the limits after ten minutes), or after :data:`ABANDONED_AFTER` (a job the log
never took, whose :meth:`PgLedger.forget` failed too).

The standing's reads of the projection are the read model's
(:mod:`projections.reads.standing`), made on the ledger's connection inside
its transaction. Driver errors become :class:`projections.errors.ProjectionUnavailable`.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import date
from typing import Final

import asyncpg

from foundation.db import reading
from projections.errors import ProjectionUnavailable
from projections.reads.jobs import QUERY_TIMEOUT_S
from projections.reads.live_jobs import job_ended_sql
from projections.reads.standing import Standing, read_standing

ABANDONED_AFTER: Final = "32 days"  # past the month a quota counts
_PRUNE_SQL: Final = f"""
WITH expired AS (DELETE FROM admission_leases WHERE tenant = $1 AND expires_at < clock_timestamp())
DELETE FROM admissions a WHERE a.tenant = $1
AND (a.admitted_at < now() - interval '{ABANDONED_AFTER}' OR {job_ended_sql("a")})
"""
_INSERT_ADMISSIONS: Final = """
INSERT INTO admissions (job_id, tenant, key_id, chars, live, audio_ms)
SELECT unnest($1::uuid[]), $2, $3, unnest($4::integer[]), unnest($5::boolean[]), unnest($6::integer[])
ON CONFLICT (job_id) DO NOTHING
"""
# A submission's admissions and, when the instance takes one, its new lease: one statement.
_ADMIT_SQL: Final = (
    "WITH lease AS (INSERT INTO admission_leases (lease_id, tenant, key_id, chars, audio_ms, live, expires_at)"
    " SELECT $7::uuid, $2, $3, $8, $9, $10, clock_timestamp() + make_interval(secs => $11)"
    " WHERE $7::uuid IS NOT NULL)" + _INSERT_ADMISSIONS
)
# A lease's jobs recorded as admitted and the lease gone, in one statement: the standing never counts less
# than the jobs admitted (they were at most what the lease held), so it needs no lock.
_SETTLE_SQL: Final = "WITH settled AS (DELETE FROM admission_leases WHERE lease_id = $7)" + _INSERT_ADMISSIONS

_LEASE_SQL: Final = """
UPDATE rate_buckets b SET tokens = r.refilled - r.granted, updated_at = r.at
FROM (
    SELECT key_id, at, refilled, LEAST($4::integer, GREATEST(0, floor(refilled)))::integer AS granted
    FROM (
        SELECT key_id, clock_timestamp() AS at,
               LEAST($3::float8,
                     tokens + $5::float8 + $2::float8 * EXTRACT(EPOCH FROM clock_timestamp() - updated_at)::float8)
                   AS refilled
        FROM rate_buckets WHERE key_id = $1 FOR UPDATE
    ) s
) r
WHERE b.key_id = r.key_id
RETURNING r.granted, b.tokens
"""

_CHARGE_SQL: Final = """
UPDATE rate_buckets
SET tokens = LEAST($3::float8, tokens + $2::float8 * EXTRACT(EPOCH FROM clock_timestamp() - updated_at)::float8)
             - $4::float8,
    updated_at = clock_timestamp()
WHERE key_id = $1
RETURNING tokens
"""


@dataclass(frozen=True)
class Bucket:
    granted: bool
    tokens: float  # left after this request (when granted), or what there was (when not)


@dataclass(frozen=True)
class Block:
    """Tokens taken from a key's bucket at once, for an API instance to give out (:mod:`producers.rate_leases`)."""

    granted: int  # as many as were asked for, or as many whole tokens as the bucket held (0: none)
    tokens: float  # what the bucket holds after


@dataclass(frozen=True)
class Admitted:
    job_id: uuid.UUID
    chars: int
    live: bool  # a job a worker will synthesize (not a cache hit, completed at once)
    audio_ms: int = 0  # the audio it is expected to make (contracts.audio_estimate)


@dataclass(frozen=True)
class Reserve:
    """What a lease holds of a tenant's limits, for its API instance to admit jobs by (0: none of that)."""

    chars: int = 0
    audio_ms: int = 0
    live: int = 0


_NONE: Final = Reserve()


def _admissions(jobs: Sequence[Admitted]) -> tuple[list[uuid.UUID], list[int], list[bool], list[int]]:
    return [j.job_id for j in jobs], [j.chars for j in jobs], [j.live for j in jobs], [j.audio_ms for j in jobs]


class Held:
    """A tenant's lock; under it, :meth:`standing` reads its use and :meth:`admit` records jobs (and a lease)
    before the lock is let go."""

    def __init__(self, conn: asyncpg.Connection, tenant: str, key_id: str | None, today: date) -> None:
        self._conn, self._tenant, self._key_id, self._today = conn, tenant, key_id, today

    async def standing(self) -> Standing:
        return await read_standing(self._conn, self._tenant, self._key_id, self._today, QUERY_TIMEOUT_S)

    async def settle(self, lease_id: uuid.UUID, jobs: Sequence[Admitted]) -> None:
        """Replace lease ``lease_id`` by the jobs admitted under it."""
        ids, chars, live, audio = _admissions(jobs)
        await self._conn.execute(
            _SETTLE_SQL, ids, self._tenant, self._key_id, chars, live, audio, lease_id, timeout=QUERY_TIMEOUT_S
        )

    async def admit(
        self, jobs: Sequence[Admitted], lease_id: uuid.UUID | None = None, reserve: Reserve = _NONE, ttl_s: float = 0
    ) -> None:
        """Record ``jobs`` as admitted, and with ``lease_id`` a lease of ``reserve`` counted for ``ttl_s``."""
        ids, chars, live, audio = _admissions(jobs)
        await self._conn.execute(
            _ADMIT_SQL, ids, self._tenant, self._key_id, chars, live, audio,
            lease_id, reserve.chars, reserve.audio_ms, reserve.live, ttl_s, timeout=QUERY_TIMEOUT_S,
        )  # fmt: skip


class PgLedger:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def lease(self, key_id: str, want: int, returned: float, rate_per_s: float, burst: int) -> Block:
        """Up to ``want`` whole tokens of ``key_id``'s bucket, once ``returned`` tokens an instance did not give
        out are put back (never past ``burst``), in one statement by the database's clock. ``want`` 0 only
        gives back."""
        args = (key_id, rate_per_s, float(burst), want, returned)
        async with reading("the rate limits", ProjectionUnavailable), self._pool.acquire() as conn:
            row = await conn.fetchrow(_LEASE_SQL, *args, timeout=QUERY_TIMEOUT_S)
            if row is None:  # the key's first request: a full bucket
                await conn.execute(
                    "INSERT INTO rate_buckets (key_id, tokens, updated_at) VALUES ($1, $2, clock_timestamp())"
                    " ON CONFLICT (key_id) DO NOTHING",
                    key_id,
                    float(burst),
                    timeout=QUERY_TIMEOUT_S,
                )
                row = await conn.fetchrow(_LEASE_SQL, *args, timeout=QUERY_TIMEOUT_S)
        if row is None:  # deleted between the two statements: judged next time
            return Block(min(want, 1), float(burst))
        return Block(int(row["granted"]), float(row["tokens"]))

    async def charge(self, key_id: str, tokens: float, rate_per_s: float, burst: int) -> float | None:
        """Take ``tokens`` more from ``key_id``'s bucket, into debt if it has fewer: what it holds then (``None``:
        the key has no bucket yet, which its first request makes)."""
        async with reading("the rate limits", ProjectionUnavailable), self._pool.acquire() as conn:
            left = await conn.fetchval(_CHARGE_SQL, key_id, rate_per_s, float(burst), tokens, timeout=QUERY_TIMEOUT_S)
        return None if left is None else float(left)

    @asynccontextmanager
    async def hold(self, tenant: str, key_id: str | None, today: date) -> AsyncIterator[Held]:
        """The tenant's standing under its lock (a transaction's advisory lock: another API waits for it)."""
        async with (
            reading("the tenant's usage", ProjectionUnavailable),
            self._pool.acquire() as conn,
            conn.transaction(),
        ):
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended('voxlog.admissions/' || $1, 0))",
                tenant,
                timeout=QUERY_TIMEOUT_S,
            )
            await conn.execute(_PRUNE_SQL, tenant, timeout=QUERY_TIMEOUT_S)
            yield Held(conn, tenant, key_id, today)

    async def settle(self, tenant: str, key_id: str | None, lease_id: uuid.UUID, jobs: Sequence[Admitted]) -> None:
        """Replace lease ``lease_id`` by the jobs admitted under it (no lock: the standing can only go down)."""
        async with reading("the admissions", ProjectionUnavailable), self._pool.acquire() as conn:
            await Held(conn, tenant, key_id, date.min).settle(lease_id, jobs)

    async def forget(self, job_ids: Sequence[uuid.UUID]) -> None:
        """Drop admissions whose jobs the log did not take (their submission failed)."""
        async with reading("the admissions", ProjectionUnavailable), self._pool.acquire() as conn:
            await conn.execute(
                "DELETE FROM admissions WHERE job_id = ANY($1::uuid[])", list(job_ids), timeout=QUERY_TIMEOUT_S
            )
