"""PostgreSQL adapters of the sweeper: the live claims it inspects, and the lock that makes one sweeper act.

Leadership is a session-level advisory lock held on a connection of its own.
Why a PostgreSQL lock rather than a single-partition consumer group: the
sweeper's input is the projection, so a sweeper that cannot reach PostgreSQL
cannot act anyway, and the lock goes with the connection: a leader that
crashes, or loses the database, loses the lock at once, and a standby takes
it at its next sweep. Kafka membership would add a second failure detector
whose view can disagree with the database the sweeper actually reads.
"""

from __future__ import annotations

import uuid
from contextlib import AbstractAsyncContextManager
from typing import Final

import asyncpg
import structlog

from consumers.cache_janitor import Entry
from consumers.errors import LookupUnavailable
from consumers.sweeper import Claim
from contracts import AudioRef
from foundation.db import DATABASE_OUTAGES, reading
from foundation.outages import Outage
from projections.reads.backlog import Backlog, read_backlog
from projections.reads.live_jobs import job_partition_sql

log = structlog.get_logger("voxlog.sweeper")
LOCK_NAMESPACE: Final = 0x73776570  # "swep"
QUERY_TIMEOUT_S: Final = 5.0


def _reading() -> AbstractAsyncContextManager[None]:
    return reading("the projection", LookupUnavailable)


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


class AdvisoryLeadership:
    """Held while this process keeps its own connection and the lock on it (one per schema)."""

    def __init__(self, url: str, schema: str, outage: Outage | None = None, namespace: int = LOCK_NAMESPACE) -> None:
        self._url, self._namespace = url, namespace
        self._schema = schema
        self._outage = outage or Outage("PostgreSQL (the sweeper's lock)")  # the sweeper's: it says when it is over
        self._conn: asyncpg.Connection | None = None
        self._held = False

    async def hold(self) -> bool:
        if self._held and self._conn is not None and self._conn.is_closed():
            # The session ended under it (terminated, cut off) and the driver already knows: the lock went
            # with it. Say so for this look, rather than connect again and maybe take the lock straight back.
            log.warning("lost the sweeper lock with its connection", error="the connection was closed")
            await self.resign()
            return False
        try:
            if self._conn is None or self._conn.is_closed():
                self._conn, self._held = await asyncpg.connect(self._url, timeout=QUERY_TIMEOUT_S), False
            if self._held:
                await self._conn.fetchval("SELECT 1", timeout=QUERY_TIMEOUT_S)  # still connected: still ours
            else:
                self._held = bool(
                    await self._conn.fetchval(
                        "SELECT pg_try_advisory_lock($1, hashtext($2))",
                        self._namespace,
                        self._schema,
                        timeout=QUERY_TIMEOUT_S,
                    )
                )
                if self._held:
                    log.info("this sweeper leads", schema=self._schema)
        except DATABASE_OUTAGES as exc:
            # Whatever happened to the session (terminated, cut off), the lock went with it.
            if self._held:
                log.warning("lost the sweeper lock with its connection", error=str(exc))
            await self.resign()
            self._outage.failed(exc, lock="not held")
        return self._held

    async def resign(self) -> None:
        conn, self._conn, self._held = self._conn, None, False
        if conn is not None and not conn.is_closed():
            conn.terminate()  # the lock ends with the session
