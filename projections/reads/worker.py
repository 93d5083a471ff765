"""The worker's reads of the projection (results, requests and segments other workers produced).

Driver errors become :class:`projections.errors.ProjectionUnavailable`: the worker then does without
(its own ledger for coalescing, the log for a request), it never stops. The
lookups share one :class:`~foundation.outages.Outage`: PostgreSQL's going and
coming back are said once each, not once per job or segment, and while it is
down a lookup is not even tried until the backoff's delay is over (a lookup
per segment waited for a connection that could not be made).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from contracts import AudioRef, JobState, SynthesisRequest, TraceContext, WordTiming
from contracts.word_timings import shifted, words_of
from foundation.db import reading
from foundation.outages import Outage
from projections.errors import ProjectionUnavailable
from projections.reads.live_jobs import WANTED_ELSEWHERE

QUERY_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ReusableSegment:
    """A segment synthesized before, whose audio another segment of the same key can reuse; its words'
    characters count from the start of its ``text`` (another segment of the key may be elsewhere in its
    request, or written otherwise: its words are reused only when its text is the same)."""

    audio: AudioRef
    duration_ms: int
    byte_length: int
    sample_rate: int
    text: str = ""
    words: tuple[WordTiming, ...] | None = None


@dataclass(frozen=True)
class CachedResult:
    job_id: uuid.UUID
    segment_count: int
    total_duration_ms: int
    expires_at: datetime
    trace: TraceContext | None = None
    """The span of the completion that made it (a duplicate's trace links to it); ``None``: not known (the
    projection does not keep traces)."""


@dataclass(frozen=True)
class Outlook:
    """What the projection says about a job the worker is about to act on, in one read."""

    cancelled: bool = False  # a JobCancelled the worker may not have read yet in its partition
    result: CachedResult | None = None  # a live result of the job's fingerprint, which it may reuse


# One row per job asked whatever is found: its state (null before it is projected) beside its fingerprint's live
# result (result_cache is keyed by fingerprint: one at most). Several jobs' claims come together under a backlog.
_OUTLOOKS = (
    "SELECT a.job_id AS asked, j.state, r.job_id, r.segment_count, r.total_duration_ms, r.expires_at"
    " FROM unnest($1::uuid[], $2::text[]) AS a(job_id, fingerprint)"
    " LEFT JOIN jobs j ON j.job_id = a.job_id"
    " LEFT JOIN result_cache r ON r.fingerprint = a.fingerprint AND r.expires_at > $3"
)

# The latest segment of each key: a lateral read per key, by the key's index (as one key's own query was).
_SEGMENTS = (
    "SELECT k.segment_key, s.audio_sha256, s.audio_uri, s.duration_ms, s.byte_length, s.sample_rate,"
    " s.span_start, s.span_text, s.words"
    " FROM unnest($1::text[]) AS k(segment_key)"
    " CROSS JOIN LATERAL (SELECT * FROM segments WHERE segments.segment_key = k.segment_key"
    " ORDER BY produced_at DESC LIMIT 1) AS s"
)


class PostgresResultLookup:
    def __init__(self, pool: asyncpg.Pool, outage: Outage | None = None) -> None:
        self._pool = pool
        self._outage = outage or Outage("PostgreSQL (the worker's lookups: it does without them meanwhile)")

    @asynccontextmanager
    async def _reading(self) -> AsyncIterator[None]:
        if self._outage.holding_off():
            raise ProjectionUnavailable(
                f"PostgreSQL is unreachable (tried again in {self._outage.delay_s:.1f}s at most)"
            )
        try:
            async with reading("the projection", ProjectionUnavailable):
                yield
        except ProjectionUnavailable as exc:
            self._outage.failed(exc)
            raise
        self._outage.recovered()

    async def outlook(self, job_id: uuid.UUID, fingerprint: str, now: datetime) -> Outlook:
        return (await self.outlooks([(job_id, fingerprint)], now))[job_id]

    async def outlooks(self, asked: Collection[tuple[uuid.UUID, str]], now: datetime) -> dict[uuid.UUID, Outlook]:
        """The outlook of each (job, fingerprint) ``asked``, every one answered, in one statement."""
        if not asked:
            return {}
        job_ids, fingerprints = [job_id for job_id, _ in asked], [fingerprint for _, fingerprint in asked]
        async with self._reading():
            rows = await self._pool.fetch(_OUTLOOKS, job_ids, fingerprints, now, timeout=QUERY_TIMEOUT_S)
        return {row["asked"]: _outlook_of(row) for row in rows}

    async def request_of(self, job_id: uuid.UUID) -> SynthesisRequest | None:
        async with self._reading():
            raw = await self._pool.fetchval(
                "SELECT request FROM jobs WHERE job_id = $1", job_id, timeout=QUERY_TIMEOUT_S
            )
        return None if raw is None else SynthesisRequest.model_validate_json(raw)

    async def result_blobs(self, job_id: uuid.UUID) -> list[AudioRef]:
        async with self._reading():
            rows = await self._pool.fetch(
                "SELECT audio_sha256, audio_uri FROM segments WHERE job_id = $1", job_id, timeout=QUERY_TIMEOUT_S
            )
        return [AudioRef(sha256=r["audio_sha256"], uri=r["audio_uri"]) for r in rows]

    async def cancelled_among(self, job_ids: Collection[uuid.UUID]) -> set[uuid.UUID]:
        """Those of ``job_ids`` that are cancelled: one statement for every job a worker holds."""
        if not job_ids:
            return set()
        async with self._reading():
            rows = await self._pool.fetch(
                "SELECT job_id FROM jobs WHERE job_id = ANY($1::uuid[]) AND state = $2",
                list(job_ids),
                JobState.CANCELLED.value,
                timeout=QUERY_TIMEOUT_S,
            )
        return {row["job_id"] for row in rows}

    async def wanted_elsewhere(self, fingerprint: str, job_id: uuid.UUID) -> bool:
        async with self._reading():
            found = await self._pool.fetchval(
                WANTED_ELSEWHERE,
                fingerprint,
                job_id,
                timeout=QUERY_TIMEOUT_S,
            )
        return bool(found)

    async def segments(self, keys: Collection[str]) -> dict[str, ReusableSegment]:
        """The latest segment some job produced of each of ``keys`` found (its blob may be gone since: the
        caller touches it), in one statement: each key's latest by the key's index, as a single key's was."""
        if not keys:
            return {}
        async with self._reading():
            rows = await self._pool.fetch(_SEGMENTS, list(keys), timeout=QUERY_TIMEOUT_S)
        found = {}
        for row in rows:
            audio = AudioRef(sha256=row["audio_sha256"], uri=row["audio_uri"])
            words = shifted(words_of(row["words"]), -row["span_start"])
            text = row["span_text"]
            segment = ReusableSegment(audio, row["duration_ms"], row["byte_length"], row["sample_rate"], text, words)
            found[row["segment_key"]] = segment
        return found


def _outlook_of(row: asyncpg.Record) -> Outlook:
    result = None
    if row["job_id"] is not None:
        result = CachedResult(row["job_id"], row["segment_count"], row["total_duration_ms"], row["expires_at"])
    return Outlook(cancelled=row["state"] == JobState.CANCELLED.value, result=result)
