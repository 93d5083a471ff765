"""`voxlog usage`: each tenant's usage by day, read from the projection (what GET /v1/usage answers)."""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import date, timedelta

from contracts import utc_now
from foundation.db import DATABASE_OUTAGES, open_pool
from foundation.settings import ModeSettings
from producers.usage_views import UsageDayView, day_view, totals
from projections.errors import ProjectionUnavailable
from projections.reads.jobs import ProjectionReader
from projections.reads.rows import UsageRow


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    usage = commands.add_parser("usage", help="each tenant's usage by day (UTC), as the projection counts it")
    usage.add_argument("--tenant", default=None, help="one tenant (default: every tenant)")
    usage.add_argument("--since", type=date.fromisoformat, default=None, help="first day, YYYY-MM-DD (30 days ago)")
    usage.add_argument("--until", type=date.fromisoformat, default=None, help="last day, YYYY-MM-DD (today)")
    usage.add_argument("--json", action="store_true", help="print JSON: the days, then each tenant's totals")


async def read_usage(settings: ModeSettings, tenant: str | None, since: date, until: date) -> list[UsageRow]:
    pool = await open_pool(settings.database_url.get_secret_value(), settings.database_schema, min_size=0, max_size=1)
    try:
        return await ProjectionReader(pool).usage(tenant, since, until)
    finally:
        await pool.close()


def run(args: argparse.Namespace) -> int:
    today = utc_now().date()
    since, until = args.since or today - timedelta(days=30), args.until or today
    try:
        rows = asyncio.run(read_usage(ModeSettings(), args.tenant, since, until))
    except (ProjectionUnavailable, *DATABASE_OUTAGES) as exc:
        print(f"voxlog usage: PostgreSQL cannot be read ({exc})")
        return 2
    days = [day_view(row) for row in rows]
    sums = totals(rows, since)
    if args.json:
        body = {"days": [d.model_dump(mode="json") for d in days], "totals": [t.model_dump(mode="json") for t in sums]}
        print(json.dumps(body, indent=2))
        return 0
    header = f"{'tenant':16} {'day':10} {'requests':>9} {'chars':>11} {'syntheses':>9} {'audio s':>10} {'reused s':>10}"
    lines = [header] + [_line(d, d.day.isoformat()) for d in days]
    lines += [_line(t, "total") for t in sums]
    print("\n".join(lines))
    return 0


def _line(view: UsageDayView, day: str) -> str:
    return (
        f"{view.tenant:16} {day:10} {view.requests:>9} {view.chars:>11} {view.syntheses:>9}"
        f" {view.audio_s_synthesized:>10.1f} {view.audio_s_reused:>10.1f}"
    )
