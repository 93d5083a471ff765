"""`voxlog cache stats` and `voxlog cache purge`: what the result cache holds, how often it spares a
synthesis, and evicting results by hand.

The figures come from the projection (``result_cache`` and ``jobs``, read
through :mod:`projections.reads.operator`) and from the blob store's
directory. Submissions the API answers from the cache without creating a job
are not in the projection; the API counts them
(``voxlog_submissions_total{answer="cached"}``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from contracts import Producer
from foundation.db import DATABASE_OUTAGES, open_pool
from foundation.errors import BrokerUnavailable
from foundation.kafka import ReconnectingPublisher
from foundation.settings import CacheStatsSettings
from projections.reads.operator import cache_entries, cache_reuse
from voxlog.instance import instance_name
from voxlog.operations import purge_cache


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cache = commands.add_parser("cache", help="the result cache")
    cache_commands = cache.add_subparsers(dest="cache_command", required=True)
    purge = cache_commands.add_parser(
        "purge",
        help="evict results from the cache (CacheEvicted on the log); their audio goes once no job keeps it",
    )
    which = purge.add_mutually_exclusive_group(required=True)
    which.add_argument("--older-than", type=float, metavar="SECONDS", help="only results completed before then")
    which.add_argument("--all", action="store_true", help="every result")
    stats = cache_commands.add_parser("stats", help="entries, bytes, reuse ratio and the oldest entry")
    stats.add_argument("--json", action="store_true", help="one JSON document instead of lines")
    stats.add_argument(
        "--window", type=float, default=None, help="reuse ratio over the last SECONDS of completions (default: all)"
    )


def run(args: argparse.Namespace) -> int:
    settings = CacheStatsSettings()
    try:
        if args.cache_command == "purge":
            evicted, freed = asyncio.run(purge(settings, None if args.all else args.older_than))
            print(
                f"evicted {evicted} results ({freed:,} bytes) with CacheEvicted events; their blobs go at the"
                f" sweeper's next rounds, once no job within VOXLOG_JOB_RETENTION_S"
                f" ({settings.job_retention_s:g} s) and no attempt in flight keeps them"
            )
            return 0
        stats = asyncio.run(cache_stats(settings, args.window))
    except DATABASE_OUTAGES as exc:
        print(f"voxlog cache: PostgreSQL cannot be read ({type(exc).__name__}: {exc})")
        return 2
    except BrokerUnavailable as exc:
        print(f"voxlog cache: Kafka did not take the evictions ({exc}); nothing or part was purged, run it again")
        return 2
    print(json.dumps(stats, indent=2, default=str) if args.json else "\n".join(lines(stats)))
    return 0


async def purge(settings: CacheStatsSettings, older_than_s: float | None) -> tuple[int, int]:
    """Evict the results completed more than ``older_than_s`` ago (``None``: all): see
    :func:`voxlog.operations.purge_cache`."""
    pool = await open_pool(settings.database_url.get_secret_value(), settings.database_schema, min_size=0, max_size=1)
    jobs = ReconnectingPublisher(
        settings.kafka_access(), settings.jobs_topic, client_id="voxlog-cache-purge", deadline_ms=30_000
    )
    try:
        return await purge_cache(pool, jobs, older_than_s, Producer(service="cache-purge", instance=instance_name()))
    finally:
        await jobs.stop()
        await pool.close()


async def cache_stats(settings: CacheStatsSettings, window_s: float | None) -> dict[str, Any]:
    pool = await open_pool(settings.database_url.get_secret_value(), settings.database_schema, min_size=0, max_size=1)
    try:
        entries = await cache_entries(pool, 30.0)
        reuse = await cache_reuse(pool, window_s, 30.0)
    finally:
        await pool.close()
    blob_files, blob_bytes = await asyncio.to_thread(_blob_usage, settings.blob_dir)
    completed, reused = int(reuse["completed"]), int(reuse["reused"])
    return {
        "entries": int(entries["entries"]),
        "live_entries": int(entries["live"]),
        "entry_bytes": int(entries["bytes"]),
        "live_entry_bytes": int(entries["live_bytes"]),
        "oldest_entry": entries["oldest"],
        "last_hit": entries["last_hit"],
        "completed_jobs": completed,
        "reused_jobs": reused,
        "reuse_ratio": reused / completed if completed else None,
        "window_s": window_s,
        "ttl_s": settings.cache_ttl,
        "max_bytes": settings.cache_max_bytes,
        "job_retention_s": settings.job_retention_s,
        "blob_dir": str(settings.blob_dir),
        "blob_files": blob_files,
        "blob_bytes": blob_bytes,
    }


def _blob_usage(root: Path) -> tuple[int, int]:
    """Files and bytes under the blob store's directory (temporary files of writes in progress included)."""
    files = size = 0
    for directory, _, names in os.walk(root):
        for name in names:
            try:
                size += os.stat(os.path.join(directory, name)).st_size
            except FileNotFoundError:  # removed meanwhile (the sweeper deletes released attempts' blobs)
                continue
            files += 1
    return files, size


def _when(value: datetime | None) -> str:
    return value.isoformat(timespec="seconds") if value is not None else "none"


def lines(stats: dict[str, Any]) -> list[str]:
    ratio = stats["reuse_ratio"]
    scope = f"over the last {stats['window_s']:g} s" if stats["window_s"] is not None else "over every completion"
    return [
        f"entries        {stats['live_entries']} live of {stats['entries']} (TTL {stats['ttl_s']:g} s)",
        f"entry bytes    {stats['live_entry_bytes']:,} live of {stats['entry_bytes']:,}",
        f"blob store     {stats['blob_files']} files, {stats['blob_bytes']:,} bytes in {stats['blob_dir']}"
        f" (cap {'none' if not stats['max_bytes'] else format(stats['max_bytes'], ',')},"
        f" jobs keep audio {stats['job_retention_s']:g} s)",
        f"oldest entry   {_when(stats['oldest_entry'])}",
        f"last hit       {_when(stats['last_hit'])}",
        f"reuse          {'n/a' if ratio is None else f'{ratio:.1%}'} of {stats['completed_jobs']} completed jobs "
        f"came from the cache or a duplicate, {scope}",
    ]
