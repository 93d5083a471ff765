"""`voxlog replay`: its options, its progress line and its report (the work is projections.replay)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg

from foundation.settings import ReplaySettings
from projections.rebuild import NOT_FROM_THE_LOG
from projections.replay import replay_into, verify_against_live
from projections.replay_read import Limit, ReplayError, ReplayStats


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    replay = commands.add_parser("replay", help="rebuild the projection from the log into a fresh schema")
    replay.add_argument("--into", required=True, help="a fresh schema to rebuild into")
    replay.add_argument(
        "--archive", type=Path, help="read the jobs topic's archived records from this directory first (voxlog archive)"
    )
    until = replay.add_mutually_exclusive_group()
    until.add_argument("--until", type=moment, help="what the system believed at this time (ISO 8601, UTC if no zone)")
    until.add_argument("--offsets", type=_offsets, help="stop before these offsets of the jobs topic: P:O,P:O,...")
    until.add_argument(
        "--verify",
        action="store_true",
        help="rebuild up to where the live projector stands and compare; exit 1 on a difference",
    )


def moment(text: str) -> datetime:
    """An ISO 8601 time from the command line; UTC when it names no zone."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"expected an ISO 8601 time such as 2026-11-30T12:00:00, not {text!r}"
        ) from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _offsets(text: str) -> dict[int, int]:
    try:
        return {int(p): int(o) for p, o in (pair.split(":") for pair in text.split(","))}
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected PARTITION:OFFSET,... not {text!r}") from exc


class ProgressLine:
    """Events, events per second and the time left: redrawn in place on a terminal, a line every 2 s otherwise."""

    def __init__(self) -> None:
        self._tty = sys.stderr.isatty()
        self._last = 0.0

    def __call__(self, done: int, total: int, elapsed: float) -> None:
        if not self._tty and time.monotonic() - self._last < 2 and done < total:
            return
        self._last = time.monotonic()
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = (total - done) / rate if rate > 0 else 0.0
        if self._tty:
            filled = int(30 * done / total) if total else 30
            bar = "=" * filled + " " * (30 - filled)
            print(f"\r[{bar}] {done:,}/{total:,} events  {rate:,.0f}/s  ETA {eta:.0f}s", end="", file=sys.stderr)
            if done >= total:
                print(file=sys.stderr)
        else:
            print(f"replay: {done:,}/{total:,} events, {rate:,.0f}/s, ETA {eta:.0f}s", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    settings = ReplaySettings()
    topics = (settings.jobs_topic, settings.control_topic)
    ttl = timedelta(seconds=settings.cache_ttl)
    progress = ProgressLine()
    if args.verify:
        stats, differences = asyncio.run(
            verify_against_live(
                settings.database_url.get_secret_value(),
                settings.database_schema,
                settings.projector_name,
                args.into,
                settings.kafka_access(),
                topics,
                ttl,
                progress,
                args.archive,
            )
        )
        print(_summary(stats, args.into))
        ignored = "; ".join(f"{column} ({why})" for column, why in NOT_FROM_THE_LOG.items())
        print(f"compared with schema {settings.database_schema} on every column but: {ignored}")
        for difference in differences:
            print(f"  {difference.line()}")
        print(f"{len(differences)} difference(s)" if differences else "no difference")
        return 1 if differences else 0
    offsets = {(settings.jobs_topic, p): o for p, o in (args.offsets or {}).items()}
    limit = Limit(until=args.until, offsets=offsets)
    stats = asyncio.run(_replay(settings, args.into, topics, ttl, limit, progress, args.archive))
    print(_summary(stats, args.into))
    return 0


async def _replay(
    settings: ReplaySettings,
    into: str,
    topics: tuple[str, str],
    ttl: timedelta,
    limit: Limit,
    progress: ProgressLine,
    archive: Path | None,
) -> ReplayStats:
    try:
        conn = await asyncpg.connect(settings.database_url.get_secret_value(), timeout=10)
    except (OSError, asyncpg.PostgresError) as exc:
        raise ReplayError(f"cannot connect to PostgreSQL: {exc}") from exc
    try:
        return await replay_into(conn, into, settings.kafka_access(), topics, ttl, limit, progress, archive=archive)
    finally:
        await conn.close()


def _summary(stats: ReplayStats, into: str) -> str:
    return (
        f"replayed {stats.records:,} records ({stats.events:,} job events, {stats.jobs:,} jobs) into {into} in "
        f"{stats.read_s + stats.write_s:.1f}s: {stats.events_per_s:,.0f} records/s "
        f"(read and fold {stats.read_s:.1f}s, copy {stats.write_s:.1f}s)"
    )
