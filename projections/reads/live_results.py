"""The live results a submission is answered from, and, in the same statement, its new jobs' placements
(and the jobs its idempotency keys named before).

A live result is a completed job whose audio the cache still holds
(``result_cache``), with its segments' blobs. A submission looks its
fingerprints up before anything else; with balanced placement
(:mod:`producers.placement`) the same statement also upserts the partition
each of them goes to (:data:`projections.reads.placement.PLACE_SQL`), so that
a new request costs PostgreSQL one round trip, not one for the lookup and one
for its placement. Raises the driver's errors (the reader converts them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import asyncpg

from contracts import AudioRef
from projections.reads.placement import PLACE_SQL
from projections.reads.rows import JOB_COLUMNS, JobRecord, LiveResult

_LIVE: Final = (
    "SELECT rc.fingerprint, rc.job_id, rc.segment_count, rc.total_duration_ms,"
    " array_remove(array_agg(s.audio_sha256), NULL) AS shas,"
    " array_remove(array_agg(s.audio_uri), NULL) AS uris"
    " FROM result_cache rc LEFT JOIN segments s ON s.job_id = rc.job_id"
    " WHERE rc.fingerprint = ANY($1::text[]) AND rc.expires_at > now() GROUP BY rc.fingerprint"
)
# One row a fingerprint: its placement (every one has one) and its live result (where it has one).
_LIVE_AND_PLACED: Final = (
    f"WITH placed AS ({PLACE_SQL}), live AS ({_LIVE})"
    " SELECT p.fingerprint, p.kafka_partition, l.job_id, l.segment_count, l.total_duration_ms, l.shas, l.uris"
    " FROM placed p LEFT JOIN live l ON l.fingerprint = p.fingerprint"
)


# The first job each idempotency key of $5 named, in the same result: its rows have no placement, the
# placements' rows no job (a full join on false is both sides, each padded with the other's nulls).
_KNOWN: Final = (
    f"SELECT DISTINCT ON (idempotency_key) {JOB_COLUMNS} FROM jobs"
    " WHERE idempotency_key = ANY($5::text[]) ORDER BY idempotency_key, submitted_at"
)
_LIVE_PLACED_AND_KNOWN: Final = (
    f"WITH placed AS ({PLACE_SQL}), live AS ({_LIVE}), known AS ({_KNOWN})"
    " SELECT p.fingerprint AS placed_fingerprint, p.kafka_partition AS placed_partition, l.job_id AS live_job_id,"
    " l.segment_count AS live_segment_count, l.total_duration_ms AS live_total_duration_ms,"
    " l.shas AS live_shas, l.uris AS live_uris, k.*"
    " FROM (placed p LEFT JOIN live l ON l.fingerprint = p.fingerprint) FULL JOIN known k ON false"
)


def _result(row: asyncpg.Record, prefix: str = "") -> LiveResult:
    """The live result in ``row``, its columns named with ``prefix``."""
    shas, uris = row[f"{prefix}shas"], row[f"{prefix}uris"]
    return LiveResult(
        job_id=row[f"{prefix}job_id"],
        refs=tuple(AudioRef(sha256=sha, uri=uri) for sha, uri in zip(shas, uris, strict=True)),
        segment_count=row[f"{prefix}segment_count"],
        total_duration_ms=row[f"{prefix}total_duration_ms"],
    )


async def live_results(pool: asyncpg.Pool, fingerprints: Sequence[str], timeout_s: float) -> dict[str, LiveResult]:
    """Of ``fingerprints``, those with a live result."""
    rows = await pool.fetch(_LIVE, list(set(fingerprints)), timeout=timeout_s)
    return {row["fingerprint"]: _result(row) for row in rows}


async def live_results_placed(
    pool: asyncpg.Pool,
    fingerprints: Sequence[str],
    proposed: Sequence[int],
    ttl_s: float,
    partitions: int,
    timeout_s: float,
    keys: Sequence[str] = (),
) -> tuple[dict[str, LiveResult], dict[str, int], dict[str, JobRecord]]:
    """Of ``fingerprints`` (distinct), those with a live result, and the partition of each: the one it was placed
    in, or ``proposed`` (in the same order) for one placed now; with ``keys`` (idempotency keys, scoped), in the
    same statement the first job each named (a client that sends a key costs no round trip more)."""
    if not keys:
        rows = await pool.fetch(
            _LIVE_AND_PLACED, list(fingerprints), list(proposed), ttl_s, partitions, timeout=timeout_s
        )
        live = {row["fingerprint"]: _result(row) for row in rows if row["job_id"] is not None}
        return live, {row["fingerprint"]: row["kafka_partition"] for row in rows}, {}
    rows = await pool.fetch(
        _LIVE_PLACED_AND_KNOWN, list(fingerprints), list(proposed), ttl_s, partitions, list(keys), timeout=timeout_s
    )
    placed_rows = [row for row in rows if row["placed_fingerprint"] is not None]
    live = {row["placed_fingerprint"]: _result(row, "live_") for row in placed_rows if row["live_job_id"] is not None}
    placed = {row["placed_fingerprint"]: row["placed_partition"] for row in placed_rows}
    known = {row["idempotency_key"]: JobRecord.from_mapping(row) for row in rows if row["placed_fingerprint"] is None}
    return live, placed, known
