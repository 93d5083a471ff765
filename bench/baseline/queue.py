"""The baseline's job table: submit, claim with SKIP LOCKED, upsert segments, complete, read status.

Every statement is a single round trip; asyncpg prepares each one once per
pooled connection and reuses it (its statement cache), so the hot path sends
only bind and execute. Writes by a worker are fenced on (worker_id, state):
a job requeued as stale can no longer be written by its old owner.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import asyncpg

from bench.errors import BenchError
from contracts import AudioRef
from contracts.engine_info import EngineInfo
from projections.migrations import quote_schema
from projections.reads.jobs import EngineVoices

SCHEMA_SQL: Final = Path(__file__).with_name("schema.sql")
CHANNEL: Final = "bl_jobs"
LIVE: Final = "state IN ('queued', 'claimed', 'completed')"

_SUBMIT = (
    "WITH ins AS (INSERT INTO bl_jobs (job_id, fingerprint, request) VALUES ($1, $2, $3::jsonb)"
    f" ON CONFLICT (fingerprint) WHERE {LIVE} DO NOTHING RETURNING job_id)"
    f" SELECT job_id, pg_notify('{CHANNEL}', '') FROM ins"
)
_SUBMIT_DUPLICATE = (
    "INSERT INTO bl_jobs (job_id, fingerprint, request, state, source_job_id)"
    f" SELECT $1, $2, $3::jsonb, 'duplicate', job_id FROM bl_jobs WHERE fingerprint = $2 AND {LIVE}"
    " RETURNING source_job_id"
)
_CLAIM = (
    "UPDATE bl_jobs j SET state = 'claimed', attempts = j.attempts + 1, worker_id = $1,"
    " claimed_at = clock_timestamp(), heartbeat_at = clock_timestamp()"
    " FROM (SELECT job_id FROM bl_jobs WHERE state = 'queued' ORDER BY submitted_at"
    " LIMIT 1 FOR UPDATE SKIP LOCKED) next"
    " WHERE j.job_id = next.job_id RETURNING j.job_id, j.fingerprint, j.request, j.attempts"
)
# Up to $2 jobs in one statement, the oldest first (a batching worker's claim: one forward for them all).
_CLAIM_MANY = (
    "UPDATE bl_jobs j SET state = 'claimed', attempts = j.attempts + 1, worker_id = $1,"
    " claimed_at = clock_timestamp(), heartbeat_at = clock_timestamp()"
    " FROM (SELECT job_id FROM bl_jobs WHERE state = 'queued' ORDER BY submitted_at"
    " LIMIT $2 FOR UPDATE SKIP LOCKED) next"
    " WHERE j.job_id = next.job_id RETURNING j.job_id, j.fingerprint, j.request, j.attempts, j.submitted_at"
)
_SEGMENT = (
    "WITH owner AS (UPDATE bl_jobs SET heartbeat_at = clock_timestamp()"
    " WHERE job_id = $1 AND worker_id = $2 AND state = 'claimed' RETURNING job_id)"
    " INSERT INTO bl_segments (job_id, segment_index, span_start, span_end, span_text, audio_sha256, audio_uri,"
    " duration_ms, sample_rate, byte_length) SELECT job_id, $3, $4, $5, $6, $7, $8, $9, $10, $11 FROM owner"
    " ON CONFLICT (job_id, segment_index) DO UPDATE SET span_start = EXCLUDED.span_start,"
    " span_end = EXCLUDED.span_end, span_text = EXCLUDED.span_text, audio_sha256 = EXCLUDED.audio_sha256,"
    " audio_uri = EXCLUDED.audio_uri, duration_ms = EXCLUDED.duration_ms, sample_rate = EXCLUDED.sample_rate,"
    " byte_length = EXCLUDED.byte_length, produced_at = clock_timestamp() RETURNING 1"
)
_COMPLETE = (
    "UPDATE bl_jobs SET state = 'completed', segment_count = $3, total_duration_ms = $4,"
    " completed_at = clock_timestamp() WHERE job_id = $1 AND worker_id = $2 AND state = 'claimed' RETURNING 1"
)
_GIVE_BACK = (
    "UPDATE bl_jobs SET state = CASE WHEN $3 OR attempts >= $4 THEN 'failed' ELSE 'queued' END,"
    " error = $5, worker_id = NULL, completed_at = CASE WHEN $3 OR attempts >= $4 THEN clock_timestamp() END"
    " WHERE job_id = $1 AND worker_id = $2 AND state = 'claimed' RETURNING state"
)
_REQUEUE_STALE = (
    "WITH stale AS (UPDATE bl_jobs SET state = 'queued', worker_id = NULL"
    " WHERE state = 'claimed' AND heartbeat_at < clock_timestamp() - make_interval(secs => $1) RETURNING 1)"
    " SELECT count(*) FROM stale"
)
_STATUS = (
    "SELECT j.job_id, j.fingerprint, j.source_job_id, coalesce(s.state, j.state) AS state,"
    " coalesce(s.attempts, j.attempts) AS attempts, coalesce(s.worker_id, j.worker_id) AS worker_id,"
    " coalesce(s.segment_count, j.segment_count) AS segment_count,"
    " coalesce(s.total_duration_ms, j.total_duration_ms) AS total_duration_ms, coalesce(s.error, j.error) AS error,"
    " j.submitted_at, coalesce(s.claimed_at, j.claimed_at) AS claimed_at,"
    " coalesce(s.completed_at, j.completed_at) AS completed_at"
    " FROM bl_jobs j LEFT JOIN bl_jobs s ON s.job_id = j.source_job_id WHERE j.job_id = $1"
)
_SEGMENTS = (
    "SELECT segment_index, span_start, span_end, span_text, audio_sha256, audio_uri, duration_ms, sample_rate,"
    " byte_length, produced_at FROM bl_segments WHERE job_id = $1 ORDER BY segment_index"
)


@dataclass(frozen=True)
class ClaimedJob:
    job_id: uuid.UUID
    fingerprint: str
    request: dict[str, Any]
    attempt: int


async def install(url: str, schema: str) -> None:
    """Create the baseline's schema and tables (idempotent)."""
    try:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_schema(schema)}")
            await conn.execute(f"SET search_path TO {quote_schema(schema)}")
            await conn.execute(SCHEMA_SQL.read_text())
        finally:
            await conn.close()
    except (OSError, asyncpg.PostgresError) as exc:
        raise BenchError(f"cannot install the baseline schema {schema!r}: {exc}") from exc


class BaselineQueue:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def _fetch(self, sql: str, *args: object) -> list[asyncpg.Record]:
        try:
            rows: list[asyncpg.Record] = await self._pool.fetch(sql, *args)
        except (OSError, asyncpg.PostgresError) as exc:
            raise BenchError(f"baseline query failed: {exc}") from exc
        return rows

    async def announce(self, worker_id: str, d: EngineInfo) -> None:
        await self._fetch(
            "INSERT INTO bl_nodes (worker_id, engine, model_version, sample_rate, voices, languages)"
            " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (worker_id) DO UPDATE SET engine = EXCLUDED.engine,"
            " model_version = EXCLUDED.model_version, sample_rate = EXCLUDED.sample_rate,"
            " voices = EXCLUDED.voices, languages = EXCLUDED.languages, announced_at = clock_timestamp()",
            worker_id,
            d.name,
            d.model_version,
            d.sample_rate,
            list(d.voices),
            list(d.languages),
        )

    async def engines(self) -> list[EngineVoices]:
        rows = await self._fetch(
            "SELECT engine, model_version, sample_rate, voices, languages, count(*) OVER (PARTITION BY engine) AS n"
            " FROM bl_nodes ORDER BY announced_at DESC"
        )
        seen: dict[str, EngineVoices] = {}
        for r in rows:
            seen.setdefault(
                r["engine"],
                EngineVoices(
                    r["engine"], r["model_version"], r["sample_rate"], tuple(r["voices"]), tuple(r["languages"]), r["n"]
                ),
            )
        return list(seen.values())

    async def submit(self, job_id: uuid.UUID, fingerprint: str, request: dict[str, Any]) -> uuid.UUID | None:
        """Queue a job, or record it as a duplicate of the live job with its fingerprint (returned)."""
        body = json.dumps(request)
        for _ in range(3):  # the live job can fail between the two statements; then this one goes live
            if await self._fetch(_SUBMIT, job_id, fingerprint, body):
                return None
            source = await self._fetch(_SUBMIT_DUPLICATE, job_id, fingerprint, body)
            if source:
                found: uuid.UUID = source[0]["source_job_id"]
                return found
        raise BenchError(f"fingerprint {fingerprint} kept changing state; submission abandoned")

    async def claim(self, worker_id: str) -> ClaimedJob | None:
        rows = await self._fetch(_CLAIM, worker_id)
        if not rows:
            return None
        r = rows[0]
        return ClaimedJob(r["job_id"], r["fingerprint"], json.loads(r["request"]), r["attempts"])

    async def claim_many(self, worker_id: str, limit: int) -> list[ClaimedJob]:
        """Up to ``limit`` queued jobs claimed in one ``FOR UPDATE SKIP LOCKED`` statement, oldest first."""
        rows = sorted(await self._fetch(_CLAIM_MANY, worker_id, limit), key=lambda r: r["submitted_at"])
        return [ClaimedJob(r["job_id"], r["fingerprint"], json.loads(r["request"]), r["attempts"]) for r in rows]

    async def put_segment(
        self,
        job_id: uuid.UUID,
        worker_id: str,
        index: int,
        span: tuple[int, int, str],
        audio: AudioRef,
        duration_ms: int,
        sample_rate: int,
        byte_length: int,
    ) -> bool:
        """Upsert one segment and beat the job's heartbeat; False when this worker no longer owns the job."""
        rows = await self._fetch(
            _SEGMENT, job_id, worker_id, index, *span, audio.sha256, audio.uri, duration_ms, sample_rate, byte_length
        )
        return bool(rows)

    async def complete(self, job_id: uuid.UUID, worker_id: str, segments: int, total_ms: int) -> bool:
        return bool(await self._fetch(_COMPLETE, job_id, worker_id, segments, total_ms))

    async def give_back(
        self, job_id: uuid.UUID, worker_id: str, error: str, *, permanent: bool, max_attempts: int
    ) -> str | None:
        """Requeue the job (or fail it when ``permanent`` or out of attempts); the new state, None if not owned."""
        rows = await self._fetch(_GIVE_BACK, job_id, worker_id, permanent, max_attempts, error[:2000])
        return str(rows[0]["state"]) if rows else None

    async def requeue_stale(self, older_than_s: float) -> int:
        """Put back claims whose heartbeat is older than ``older_than_s`` (their worker died)."""
        rows = await self._fetch(_REQUEUE_STALE, older_than_s)
        count = int(rows[0]["count"])
        if count:
            await self._fetch(f"SELECT pg_notify('{CHANNEL}', '')")
        return count

    async def status(self, job_id: uuid.UUID) -> dict[str, Any] | None:
        rows = await self._fetch(_STATUS, job_id)
        if not rows:
            return None
        job = dict(rows[0])
        job["segments"] = [dict(s) for s in await self._fetch(_SEGMENTS, job["source_job_id"] or job_id)]
        return job
