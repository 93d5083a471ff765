"""The sweeper's and the cache janitor's reads of the projection: live claims, their blobs, the result cache,
the backlog and the backlog's switches. Driver errors become :class:`projections.errors.ProjectionUnavailable`.
"""

from __future__ import annotations

import uuid
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Final

import asyncpg

from contracts import AudioRef
from foundation.db import reading
from projections.errors import ProjectionUnavailable
from projections.reads.backlog import Backlog, read_backlog
from projections.reads.live_jobs import job_partition_sql

QUERY_TIMEOUT_S: Final = 5.0


@dataclass(frozen=True)
class Claim:
    """A live claim, as the projection shows it."""

    job_id: uuid.UUID
    fingerprint: str
    attempt: int
    worker_id: str
    claimed_at: datetime
    text_chars: int
    partition: int | None = None  # where the job's events are (None: its fingerprint's partition)


@dataclass(frozen=True)
class Entry:
    """A result cache entry as the projection shows it, with the blobs of its segments."""

    fingerprint: str
    job_id: uuid.UUID
    expires_at: datetime
    total_bytes: int
    blobs: frozenset[str]  # sha256
    partition: int | None = None  # where the job's events are (None: its fingerprint's partition)


def _reading() -> AbstractAsyncContextManager[None]:
    return reading("the projection", ProjectionUnavailable)


class PostgresSweeperStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def live_claims(self) -> list[Claim]:
        async with _reading():
            rows = await self._pool.fetch(
                "SELECT job_id, fingerprint, attempt, worker_id, claimed_at, length(request->>'text') AS chars,"
                f" {job_partition_sql('jobs')} AS kafka_partition FROM jobs WHERE state = 'claimed'",
                timeout=QUERY_TIMEOUT_S,
            )
        return [
            Claim(
                r["job_id"],
                r["fingerprint"],
                r["attempt"],
                r["worker_id"] or "?",
                r["claimed_at"],
                r["chars"] or 0,
                r["kafka_partition"],
            )
            for r in rows
        ]

    async def attempt_blobs(self, job_id: uuid.UUID, attempt: int) -> list[AudioRef]:
        async with _reading():
            rows = await self._pool.fetch(
                "SELECT audio_sha256, audio_uri FROM segments WHERE job_id = $1 AND attempt = $2",
                job_id,
                attempt,
                timeout=QUERY_TIMEOUT_S,
            )
        return [AudioRef(sha256=r["audio_sha256"], uri=r["audio_uri"]) for r in rows]

    async def referenced_elsewhere(self, sha256: str, job_id: uuid.UUID, attempt: int) -> bool:
        async with _reading():
            found = await self._pool.fetchval(
                "SELECT EXISTS (SELECT 1 FROM segments WHERE audio_sha256 = $1 AND NOT (job_id = $2 AND attempt = $3))",
                sha256,
                job_id,
                attempt,
                timeout=QUERY_TIMEOUT_S,
            )
        return bool(found)


class PostgresCacheStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def entries(self) -> list[Entry]:
        async with _reading():
            rows = await self._pool.fetch(
                "SELECT rc.fingerprint, rc.job_id, rc.expires_at, rc.total_bytes,"
                " array_remove(array_agg(s.audio_sha256), NULL) AS blobs,"
                f" {job_partition_sql('rc')} AS kafka_partition"
                " FROM result_cache rc LEFT JOIN segments s ON s.job_id = rc.job_id GROUP BY rc.fingerprint",
                timeout=QUERY_TIMEOUT_S,
            )
        return [
            Entry(
                r["fingerprint"],
                r["job_id"],
                r["expires_at"],
                r["total_bytes"],
                frozenset(r["blobs"]),
                r["kafka_partition"],
            )
            for r in rows
        ]

    async def in_flight_blobs(self) -> set[str]:
        async with _reading():
            rows = await self._pool.fetch(
                "SELECT DISTINCT s.audio_sha256 FROM segments s JOIN jobs j ON j.job_id = s.job_id"
                " WHERE j.state = 'claimed'",
                timeout=QUERY_TIMEOUT_S,
            )
        return {r["audio_sha256"] for r in rows}


class PostgresBacklog:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def backlog(self) -> Backlog:
        async with _reading():
            return await read_backlog(self._pool, QUERY_TIMEOUT_S)

    async def switched_on(self, mode: str) -> bool:
        """Whether the projection shows the backlog's switch of ``mode`` on."""
        async with _reading():
            found = await self._pool.fetchval(
                "SELECT enabled FROM service_modes WHERE mode = $1 AND source = 'backlog'",
                mode,
                timeout=QUERY_TIMEOUT_S,
            )
        return bool(found)
