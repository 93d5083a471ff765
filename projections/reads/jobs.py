"""Reads of the projection tables that the API serves (status, segments, voices, cache).

Driver errors (asyncpg's, a refused connection, a timeout) become
:class:`projections.errors.ProjectionUnavailable` here, which the app answers with 503 and
Retry-After. The engines and voices the workers announced are remembered:
for a second between reads, and for as long as Postgres is down, so that
submissions keep reaching the log while the read side is unreachable.
"""

from __future__ import annotations

import time
import uuid
from contextlib import AbstractAsyncContextManager
from datetime import date
from typing import Final

import asyncpg
import msgspec

from foundation.db import reading
from projections.errors import ProjectionUnavailable
from projections.reads.activity import ActivityRows, NodeLiveness, WorkerQueues, activity, live_workers, worker_queues
from projections.reads.backlog import Backlog, read_backlog
from projections.reads.live_jobs import LIVE_SQL, WANTED_ELSEWHERE, job_partition_sql
from projections.reads.live_results import live_results, live_results_placed
from projections.reads.queue_place import QueueRow, queue_row
from projections.reads.rows import (
    JOB_COLUMNS,
    SEGMENT_COLUMNS,
    EngineVoices,
    JobRecord,
    JobStateRow,
    LiveResult,
    SegmentRow,
    StoredKey,
    UsageRow,
    columns,
)

ENGINES_FRESH_S: Final = 1.0
QUERY_TIMEOUT_S: Final = 5.0


def _reading(what: str) -> AbstractAsyncContextManager[None]:
    return reading(what, ProjectionUnavailable)


class ProjectionReader:
    def __init__(self, pool: asyncpg.Pool, liveness: NodeLiveness | None = None) -> None:
        self._pool = pool
        self._liveness = liveness or NodeLiveness()
        self._engines: list[EngineVoices] | None = None
        self._engines_read_at = 0.0

    async def ping(self) -> None:
        async with _reading("anything"):
            await self._pool.fetchval("SELECT 1", timeout=QUERY_TIMEOUT_S)

    async def engines(self) -> list[EngineVoices]:
        """Per engine, the newest announced model version and the voices its workers offer."""
        if self._engines is not None and time.monotonic() - self._engines_read_at < ENGINES_FRESH_S:
            return self._engines
        try:
            async with _reading("the announced engines"):
                rows = await self._pool.fetch(
                    "SELECT DISTINCT ON (engine) engine, model_version, sample_rate, voices, languages,"
                    " (SELECT count(*) FROM nodes n2 WHERE n2.engine = n.engine"
                    " AND n2.model_version = n.model_version) AS workers"
                    " FROM nodes n ORDER BY engine, announced_at DESC",
                    timeout=QUERY_TIMEOUT_S,
                )
        except ProjectionUnavailable:
            if self._engines is None:
                raise
            return self._engines  # what the workers last announced, rather than refusing the job
        self._engines = [
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
        self._engines_read_at = time.monotonic()
        return self._engines

    async def job(self, job_id: uuid.UUID, tenant: str | None = None) -> JobRecord | None:
        """The job (``tenant``'s only, when given: another tenant's is unknown) and the segments that hold its
        audio: a cache hit's are its source job's, whose id it shows only when the source is the same tenant's
        (a reused result never tells who asked first). ``lexicon_words``: the words of its pronunciations that
        the server lexicon holds, or held (a removed word keeps its row), which no answer to a tenant shows."""
        async with _reading(f"job {job_id}"):
            row = await self._pool.fetchrow(
                f"SELECT {JOB_COLUMNS},"
                " (SELECT s.tenant FROM jobs s WHERE s.job_id = j.source_job_id) AS source_tenant,"
                " ARRAY(SELECT w.word FROM jsonb_object_keys(coalesce(j.request->'pronunciations', '{}'::jsonb))"
                " AS w(word) WHERE EXISTS (SELECT 1 FROM lexicon l WHERE l.word = w.word) ORDER BY w.word)"
                " AS lexicon_words"
                " FROM jobs j WHERE job_id = $1 AND ($2::text IS NULL OR tenant = $2)",
                job_id,
                tenant,
                timeout=QUERY_TIMEOUT_S,
            )
        if row is None:
            return None
        segments = await self.segments(row["source_job_id"] or job_id)
        job = JobRecord.from_mapping(row, segments=tuple(segments), lexicon_words=tuple(row["lexicon_words"]))
        if job.source_job_id is not None and row["source_tenant"] != job.tenant:
            job = msgspec.structs.replace(job, source_job_id=None)
        return job

    async def queue_listing(self, job_id: uuid.UUID) -> QueueRow | None:
        """Where the queued job waits, as the latest heartbeat of a live worker that lists it tells it."""
        async with _reading(f"the queue of job {job_id}"):
            return await queue_row(self._pool, job_id, self._liveness.silent_after_s, QUERY_TIMEOUT_S)

    async def api_key(self, key_id: str) -> StoredKey | None:
        """The key's row, as the API judges a presented key by it."""
        async with _reading("an API key"):
            row = await self._pool.fetchrow(
                "SELECT key_id, tenant, scopes, secret_sha256, expires_at, revoked_at FROM api_keys WHERE key_id = $1",
                key_id,
                timeout=QUERY_TIMEOUT_S,
            )
        if row is None:
            return None
        return StoredKey(
            row["key_id"], row["tenant"], frozenset(row["scopes"]), row["secret_sha256"], row["expires_at"],
            row["revoked_at"],
        )  # fmt: skip

    async def lexicon(self) -> dict[str, str]:
        """Every word of the server's lexicon and its phonemes (a removed word has none, and is not listed)."""
        async with _reading("the lexicon"):
            rows = await self._pool.fetch(
                "SELECT word, phonemes FROM lexicon WHERE phonemes IS NOT NULL", timeout=QUERY_TIMEOUT_S
            )
        return {row["word"]: row["phonemes"] for row in rows}

    async def usage(self, tenant: str | None, since: date, until: date | None = None) -> list[UsageRow]:
        """Each day's usage of ``tenant`` (``None``: of every tenant) from ``since`` to ``until``, by tenant and day."""
        async with _reading("the usage"):
            rows = await self._pool.fetch(
                f"SELECT {columns(UsageRow)} FROM usage_daily WHERE ($1::text IS NULL OR tenant = $1)"
                " AND day >= $2 AND ($3::date IS NULL OR day <= $3) ORDER BY tenant, day",
                tenant,
                since,
                until,
                timeout=QUERY_TIMEOUT_S,
            )
        return [UsageRow.from_mapping(row) for row in rows]

    async def partitions_of(self, job_ids: list[uuid.UUID]) -> dict[uuid.UUID, int]:
        """The partition each job's events are in, for the jobs the projection shows an event of: a later
        event of the job (a cancellation) goes there, wherever its fingerprint would hash."""
        async with _reading("the jobs' partitions"):
            rows = await self._pool.fetch(
                f"SELECT job_id, {job_partition_sql('jobs')} AS kafka_partition FROM jobs"
                " WHERE job_id = ANY($1::uuid[])",
                job_ids,
                timeout=QUERY_TIMEOUT_S,
            )
        return {r["job_id"]: r["kafka_partition"] for r in rows if r["kafka_partition"] is not None}

    async def progress(self, job_id: uuid.UUID, since: int) -> tuple[JobStateRow | None, list[SegmentRow]]:
        """The job's state and its segments from index ``since`` on, in one statement (so the state is never
        newer than the segments): what a stream reads each time the job changes."""
        segment_columns = ", ".join(f"s.{name}" for name in SegmentRow.__struct_fields__)
        async with _reading(f"job {job_id}"):
            rows = await self._pool.fetch(
                f"SELECT {', '.join(f'j.{name}' for name in JobStateRow.__struct_fields__)}, {segment_columns}"
                " FROM jobs j LEFT JOIN segments s ON s.job_id = coalesce(j.source_job_id, j.job_id)"
                " AND s.segment_index >= $2 WHERE j.job_id = $1 ORDER BY s.segment_index",
                job_id,
                since,
                timeout=QUERY_TIMEOUT_S,
            )
        if not rows:
            return None, []
        state = JobStateRow.from_mapping(rows[0])
        return state, [SegmentRow.from_mapping(row) for row in rows if row["segment_index"] is not None]

    async def jobs_by_keys(self, keys: list[str]) -> dict[str, JobRecord]:
        """The first job submitted with each (scoped) idempotency key of ``keys`` that named one (no segments)."""
        async with _reading("idempotency keys"):
            rows = await self._pool.fetch(
                f"SELECT DISTINCT ON (idempotency_key) {JOB_COLUMNS} FROM jobs"
                " WHERE idempotency_key = ANY($1::text[]) ORDER BY idempotency_key, submitted_at",
                keys,
                timeout=QUERY_TIMEOUT_S,
            )
        return {row["idempotency_key"]: JobRecord.from_mapping(row) for row in rows}

    async def jobs_by_ids(self, job_ids: list[uuid.UUID]) -> dict[uuid.UUID, JobRecord]:
        """Of ``job_ids``, the jobs the projection shows (no segments)."""
        async with _reading("jobs by id"):
            rows = await self._pool.fetch(
                f"SELECT {JOB_COLUMNS} FROM jobs WHERE job_id = ANY($1::uuid[])", job_ids, timeout=QUERY_TIMEOUT_S
            )
        return {row["job_id"]: JobRecord.from_mapping(row) for row in rows}

    async def segments(self, job_id: uuid.UUID, since: int = 0) -> list[SegmentRow]:
        """The job's segments from index ``since`` on, in order (a stream asks only for those it has not sent)."""
        async with _reading(f"the segments of job {job_id}"):
            rows = await self._pool.fetch(
                f"SELECT {SEGMENT_COLUMNS} FROM segments WHERE job_id = $1 AND segment_index >= $2"
                " ORDER BY segment_index",
                job_id,
                since,
                timeout=QUERY_TIMEOUT_S,
            )
        return [SegmentRow.from_mapping(row) for row in rows]

    @property
    def liveness(self) -> NodeLiveness:
        return self._liveness

    async def activity(self) -> ActivityRows:
        """Throughput, phase latencies, the cache ratio and the nodes, for the dashboard."""
        async with _reading("the recent activity"):
            return await activity(self._pool, QUERY_TIMEOUT_S, self._liveness)

    async def live_workers(self) -> dict[tuple[str, str], int]:
        """The workers heard from within their heartbeat timeout, by (engine, model version)."""
        async with _reading("the live workers"):
            return await live_workers(self._pool, QUERY_TIMEOUT_S, self._liveness)

    async def worker_queues(self) -> WorkerQueues:
        """By live worker, the jobs waiting on it by (tenant, priority), as its last heartbeat counted them."""
        async with _reading("the workers' queues"):
            return await worker_queues(self._pool, QUERY_TIMEOUT_S, self._liveness)

    async def cached_results(self, fingerprints: list[str]) -> dict[str, LiveResult]:
        """Of ``fingerprints``, those with a live result: the completed job that holds it, and its blobs."""
        async with _reading("the result cache"):
            return await live_results(self._pool, fingerprints, QUERY_TIMEOUT_S)

    async def cached_results_placed(
        self, fingerprints: list[str], proposed: list[int], ttl_s: float, partitions: int, keys: list[str] | None = None
    ) -> tuple[dict[str, LiveResult], dict[str, int], dict[str, JobRecord]]:
        """:meth:`cached_results` of ``fingerprints`` (distinct), and in the same statement the partition each is
        placed in (``proposed`` for one placed now) and :meth:`jobs_by_keys` of ``keys``
        (:mod:`projections.reads.live_results`)."""
        async with _reading("the result cache and the placements"):
            return await live_results_placed(
                self._pool, fingerprints, proposed, ttl_s, partitions, QUERY_TIMEOUT_S, keys or ()
            )

    async def backlog(self) -> Backlog:
        """The work ahead of a new submission (see :mod:`projections.reads.backlog`)."""
        async with _reading("the backlog"):
            return await read_backlog(self._pool, QUERY_TIMEOUT_S)

    async def modes_on(self) -> dict[str, list[tuple[str, str]]]:
        """By service mode, the (source, reason) of every switch that holds it on (a mode off is absent)."""
        async with _reading("the service modes"):
            rows = await self._pool.fetch(
                "SELECT mode, source, reason FROM service_modes WHERE enabled ORDER BY mode, source",
                timeout=QUERY_TIMEOUT_S,
            )
        modes: dict[str, list[tuple[str, str]]] = {}
        for r in rows:
            modes.setdefault(r["mode"], []).append((r["source"], r["reason"]))
        return modes

    async def wanted_elsewhere(self, fingerprint: str, job_id: uuid.UUID) -> bool:
        """Whether a live job of ``fingerprint`` other than ``job_id`` waits for the same audio."""
        async with _reading("the jobs in flight"):
            found = await self._pool.fetchval(
                WANTED_ELSEWHERE,
                fingerprint,
                job_id,
                timeout=QUERY_TIMEOUT_S,
            )
        return bool(found)

    async def in_flight(self, fingerprints: list[str]) -> set[str]:
        """Of ``fingerprints``, those a job not finished yet is synthesizing (a duplicate coalesces onto it)."""
        async with _reading("the jobs in flight"):
            rows = await self._pool.fetch(
                f"SELECT DISTINCT fingerprint FROM jobs WHERE fingerprint = ANY($1::text[]) AND state IN ({LIVE_SQL})",
                list(set(fingerprints)),
                timeout=QUERY_TIMEOUT_S,
            )
        return {r["fingerprint"] for r in rows}
