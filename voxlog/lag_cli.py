"""`voxlog lag`: the synthesis groups' and the projector's lag on the jobs topic, as a live table or JSON.

The command alone: what it samples and the document it prints come from :mod:`voxlog.lag_monitor`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Callable

from foundation.db import open_pool
from foundation.kafka_lag import LagReader
from foundation.lag_rules import GroupLag, Status
from foundation.lifecycle import stop_on_signals
from foundation.settings import LagSettings
from voxlog.lag_monitor import STALL_AFTER_S, Consumers, Windows, dead_letters, document, sample_all


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    lag = commands.add_parser("lag", help="consumer lag of the synthesis groups and the projector, refreshed in place")
    lag.add_argument("--once", action="store_true", help="two samples --interval apart, one report, then exit")
    lag.add_argument("--json", action="store_true", help="JSON: one document with --once, else one line per sample")
    lag.add_argument("--interval", type=float, default=2.0, help="seconds between samples (default 2)")


def run(args: argparse.Namespace) -> int:
    settings = LagSettings()
    return asyncio.run(_watch(settings, args.interval, once=args.once, as_json_lines=args.json))


async def _watch(settings: LagSettings, interval: float, *, once: bool, as_json_lines: bool) -> int:
    stop = asyncio.Event()
    stop_on_signals(stop)
    windows = Windows(STALL_AFTER_S)
    consumers = Consumers(settings.jobs_topic, settings.synth_group, settings.projector_name, settings.dlq_topic)
    pool = await open_pool(settings.database_url.get_secret_value(), settings.database_schema, min_size=0, max_size=1)
    try:
        async with LagReader(settings.kafka_access(), settings.jobs_topic) as reader:
            rounds = 0
            while not stop.is_set():
                lags = windows.add(await sample_all(reader, pool, consumers))
                dead = await dead_letters(reader, settings.dlq_topic)
                rounds += 1
                if once and rounds == 2:
                    print(json.dumps(document(lags, dead), indent=2) if as_json_lines else table(lags, dead=dead))
                    return 0 if all(g.status is Status.OK for g in lags) else 1
                if not once:
                    _show(lags, dead, as_json_lines, interval)
                with contextlib.suppress(TimeoutError):  # the interval passed without a signal
                    await asyncio.wait_for(stop.wait(), interval)
            return 0
    finally:
        await pool.close()


def _show(lags: list[GroupLag], dead: int | None, as_json_lines: bool, interval: float) -> None:
    if as_json_lines:
        print(json.dumps(document(lags, dead)), flush=True)
        return
    clear = "\x1b[H\x1b[2J" if sys.stdout.isatty() else ""
    print(clear + table(lags, f"every {interval:g}s, Ctrl-C to stop", dead), flush=True)


def _num(value: float | None, unit: Callable[[float], str] = lambda v: f"{v:,.1f}") -> str:
    return "-" if value is None else unit(value)


def table(lags: list[GroupLag], note: str = "", dead: int | None = None) -> str:
    """Groups, then the partitions that are behind, like ``kafka-consumer-groups --describe``."""
    now = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    lines = [f"voxlog lag  {now}  {note}".rstrip(), ""]
    lines.append(
        f"{'GROUP':<44} {'STATUS':<6} {'MEMBERS':>7} {'LAG':>8} {'LAG s':>8} {'RATE/s':>8} {'DRAIN s':>8}  WHY"
    )
    for g in lags:
        members = "-" if g.members is None else str(g.members)
        lines.append(
            f"{g.group:<44} {g.status.value:<6} {members:>7} {g.records:>8,} {g.seconds:>8.1f} {_num(g.per_s):>8}"
            f" {_num(g.drain_s):>8}  {g.reason}"
        )
    behind = [(g, p) for g in lags for p in g.partitions if p.records]
    if behind:
        lines += [
            "",
            f"{'GROUP':<44} {'PARTITION':>9} {'POSITION':>9} {'END':>9} {'LAG':>8} {'LAG s':>8} {'DRAIN s':>8}",
        ]
        for g, p in behind:
            lines.append(
                f"{g.group:<44} {p.partition:>9} {p.position:>9,} {p.end:>9,} {p.records:>8,} {p.seconds:>8.1f}"
                f" {_num(p.drain_s):>8}"
            )
    elif lags:
        lines += ["", "every partition caught up"]
    else:
        lines += ["no synthesis group and no projector position found on this topic yet"]
    if dead is not None:
        lines += ["", f"dead-letter topic: {dead:,} record(s)"]
    return "\n".join(lines)
