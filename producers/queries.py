"""Reads of the projection tables that the API serves (status, segments, voices, cache)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg


@dataclass(frozen=True)
class EngineVoices:
    engine: str
    model_version: str
    sample_rate: int
    voices: tuple[str, ...]
    languages: tuple[str, ...]
    workers: int


class ProjectionReader:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def ping(self) -> None:
        await self._pool.fetchval("SELECT 1")

    async def engines(self) -> list[EngineVoices]:
        """Per engine, the newest announced model version and the voices its workers offer."""
        rows = await self._pool.fetch(
            "SELECT DISTINCT ON (engine) engine, model_version, sample_rate, voices, languages,"
            " (SELECT count(*) FROM nodes n2 WHERE n2.engine = n.engine AND n2.model_version = n.model_version)"
            " AS workers FROM nodes n ORDER BY engine, announced_at DESC"
        )
        return [
            EngineVoices(
                r["engine"],
                r["model_version"],
                r["sample_rate"],
                tuple(r["voices"]),
                tuple(r["languages"]),
                r["workers"],
            )
            for r in rows
        ]

    async def job(self, job_id: uuid.UUID) -> dict[str, Any] | None:
        row = await self._pool.fetchrow("SELECT * FROM jobs WHERE job_id = $1", job_id)
        if row is None:
            return None
        job = dict(row)
        job["request"] = json.loads(job["request"])
        segments = await self.segments(job["source_job_id"] or job_id)
        job["segments"] = segments
        return job

    async def job_by_key(self, key: str) -> dict[str, Any] | None:
        """The first job submitted with the (scoped) idempotency key ``key``."""
        job_id = await self._pool.fetchval(
            "SELECT job_id FROM jobs WHERE idempotency_key = $1 ORDER BY submitted_at LIMIT 1", key
        )
        return None if job_id is None else await self.job(job_id)

    async def segments(self, job_id: uuid.UUID) -> list[dict[str, Any]]:
        rows = await self._pool.fetch(
            "SELECT segment_index, attempt, span_start, span_end, span_text, audio_sha256, audio_uri, duration_ms,"
            " sample_rate, byte_length, produced_at FROM segments WHERE job_id = $1 ORDER BY segment_index",
            job_id,
        )
        return [dict(r) for r in rows]

    async def cached_job_id(self, fingerprint: str) -> uuid.UUID | None:
        """The completed job whose result is still live for ``fingerprint``."""
        found: uuid.UUID | None = await self._pool.fetchval(
            "SELECT job_id FROM result_cache WHERE fingerprint = $1 AND expires_at > now()", fingerprint
        )
        return found
