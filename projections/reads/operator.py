"""The operator's reads of the projection: the result cache's figures and what a purge evicts, the service
modes' switches, the lexicon, the API keys, and the engines the workers announced.

``voxlog cache``, ``voxlog admin``, ``voxlog lexicon`` and ``voxlog keys``
read through these, and so do the API's admin routes (through
:class:`voxlog.operations.ApiOperations`) and a deployment under test waiting
for its workers (:mod:`voxlog.deployment`). They raise the driver's errors:
the CLI says PostgreSQL cannot be read, the API answers
:class:`projections.errors.ProjectionUnavailable`.
"""

from __future__ import annotations

from typing import Any, Final

import asyncpg

from projections.reads.live_jobs import job_partition_sql
from projections.reads.sweeper import Entry

_CACHE_ENTRIES: Final = (
    "SELECT count(*) AS entries, count(*) FILTER (WHERE expires_at > now()) AS live,"
    " coalesce(sum(total_bytes), 0) AS bytes, coalesce(sum(total_bytes) FILTER (WHERE expires_at > now()), 0)"
    " AS live_bytes, min(created_at) AS oldest, max(last_hit_at) AS last_hit FROM result_cache"
)
_CACHE_REUSE: Final = (
    "SELECT count(*) AS completed, count(*) FILTER (WHERE cache_hit) AS reused FROM jobs"
    " WHERE state = 'completed' AND ($1::float8 IS NULL OR completed_at > now() - make_interval(secs => $1))"
)
_PURGEABLE: Final = (
    f"SELECT fingerprint, job_id, expires_at, total_bytes, {job_partition_sql('result_cache')} AS kafka_partition"
    " FROM result_cache"
    " WHERE $1::float8 IS NULL OR created_at < now() - make_interval(secs => $1)"
)
_SWITCHES: Final = "SELECT source, enabled, reason, set_at FROM service_modes WHERE mode = $1 ORDER BY source"
_LEXICON: Final = "SELECT word, phonemes, reason, set_at FROM lexicon WHERE phonemes IS NOT NULL ORDER BY word"
_KNOWN_WORD: Final = "SELECT 1 FROM lexicon WHERE word = $1 AND phonemes IS NOT NULL"
_KNOWN_KEY: Final = "SELECT 1 FROM api_keys WHERE key_id = $1"
_KEYS: Final = (
    "SELECT key_id, tenant, name, scopes, issued_at, expires_at, revoked_at, revoke_reason FROM api_keys"
    " WHERE $1::text IS NULL OR tenant = $1 ORDER BY tenant, issued_at"
)
ANNOUNCED_ENGINES: Final = "SELECT DISTINCT engine, model_version FROM nodes"
"""The engines and model versions the workers announced, a row each (a deployment's synthesis group is named
by them)."""


async def cache_entries(pool: asyncpg.Pool, timeout_s: float) -> dict[str, Any]:
    """The result cache's entries and bytes, all and live (not expired), its oldest entry and its last hit."""
    return dict(await pool.fetchrow(_CACHE_ENTRIES, timeout=timeout_s))


async def cache_reuse(pool: asyncpg.Pool, window_s: float | None, timeout_s: float) -> dict[str, Any]:
    """The completed jobs, and those of them that were cache hits, over the last ``window_s`` (``None``: all)."""
    return dict(await pool.fetchrow(_CACHE_REUSE, window_s, timeout=timeout_s))


async def purgeable(pool: asyncpg.Pool, older_than_s: float | None, timeout_s: float) -> list[Entry]:
    """The result cache's entries made more than ``older_than_s`` ago (``None``: all), with their job's partition
    (their blobs are not read: an eviction does not name them)."""
    rows = await pool.fetch(_PURGEABLE, older_than_s, timeout=timeout_s)
    return [
        Entry(r["fingerprint"], r["job_id"], r["expires_at"], r["total_bytes"], frozenset(), r["kafka_partition"])
        for r in rows
    ]


async def mode_switches(pool: asyncpg.Pool, mode: str, timeout_s: float) -> dict[str, dict[str, Any]]:
    """The switches of ``mode`` as projected, by source (the operator's, the sweeper's backlog switch)."""
    rows = await pool.fetch(_SWITCHES, mode, timeout=timeout_s)
    return {r["source"]: {"enabled": r["enabled"], "reason": r["reason"], "set_at": r["set_at"]} for r in rows}


async def pronunciations(pool: asyncpg.Pool, timeout_s: float) -> list[dict[str, Any]]:
    """The lexicon as projected, by word."""
    return [dict(row) for row in await pool.fetch(_LEXICON, timeout=timeout_s)]


async def has_pronunciation(pool: asyncpg.Pool, word: str, timeout_s: float) -> bool:
    """Whether the lexicon has an entry for ``word`` (a removed one is none)."""
    return await pool.fetchval(_KNOWN_WORD, word, timeout=timeout_s) is not None


async def key_id_known(pool: asyncpg.Pool, key_id: str, timeout_s: float) -> bool:
    """Whether the projection has ``key_id``, issued or revoked."""
    return await pool.fetchval(_KNOWN_KEY, key_id, timeout=timeout_s) is not None


async def api_keys(pool: asyncpg.Pool, tenant: str | None, timeout_s: float) -> list[dict[str, Any]]:
    """The keys as projected (of ``tenant``; ``None``: every tenant's), never their secrets' hashes."""
    return [dict(row) for row in await pool.fetch(_KEYS, tenant, timeout=timeout_s)]
