"""The worker's read-only view of the projections (results and requests of other workers)."""

from __future__ import annotations

import uuid
from datetime import datetime

import asyncpg

from consumers.ports import CachedResult
from contracts import SynthesisRequest


class PostgresResultLookup:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def live_result(self, fingerprint: str, now: datetime) -> CachedResult | None:
        row = await self._pool.fetchrow(
            "SELECT job_id, segment_count, total_duration_ms, expires_at FROM result_cache"
            " WHERE fingerprint = $1 AND expires_at > $2",
            fingerprint,
            now,
        )
        if row is None:
            return None
        return CachedResult(row["job_id"], row["segment_count"], row["total_duration_ms"], row["expires_at"])

    async def request_of(self, job_id: uuid.UUID) -> SynthesisRequest | None:
        raw = await self._pool.fetchval("SELECT request FROM jobs WHERE job_id = $1", job_id)
        return None if raw is None else SynthesisRequest.model_validate_json(raw)
