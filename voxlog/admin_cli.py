"""`voxlog admin cache-only on|off|status`: the operator's switch of cache-only mode.

The switch is a ``ServiceModeSet`` event (source ``operator``) on the nodes
topic, not a row written by hand: every API instance follows the projection of
it, replay rebuilds it, and it sits beside the sweeper's own switch (source
``backlog``), which it neither sets nor clears. ``status`` shows both as the
projection has them, with the backlog they are judged by.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
from typing import Any

from contracts import Producer
from foundation.db import DATABASE_OUTAGES, open_pool
from foundation.errors import BrokerUnavailable
from foundation.kafka import ReconnectingPublisher
from foundation.settings import ModeSettings
from voxlog.composition.resources import instance_name
from voxlog.operations import cache_only_status, switch_cache_only


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    admin = commands.add_parser("admin", help="operator switches, recorded on the log")
    admin_commands = admin.add_subparsers(dest="admin_command", required=True)
    cache_only = admin_commands.add_parser(
        "cache-only", help="answer only cached (or in-flight) requests, refuse new syntheses with 503"
    )
    cache_only.add_argument("switch", choices=["on", "off", "status"])
    cache_only.add_argument("--reason", default="", help="why, shown to refused clients and in the log")
    cache_only.add_argument("--json", action="store_true", help="status as one JSON document")


def run(args: argparse.Namespace) -> int:
    settings = ModeSettings()
    try:
        if args.switch == "status":
            status = asyncio.run(_status(settings))
            print(json.dumps(status, indent=2, default=str) if args.json else "\n".join(_lines(status)))
            return 0
        enabled = args.switch == "on"
        reason = args.reason or f"set by {getpass.getuser()}"
        asyncio.run(_switch(settings, enabled, reason))
    except BrokerUnavailable as exc:
        print(f"voxlog admin: Kafka did not take the switch ({exc}); nothing changed, run it again")
        return 2
    except DATABASE_OUTAGES as exc:
        print(f"voxlog admin: PostgreSQL cannot be read ({type(exc).__name__}: {exc})")
        return 2
    print(f"cache-only mode {args.switch} (operator: {reason}); every API follows once the projector applies it")
    return 0


async def _switch(settings: ModeSettings, enabled: bool, reason: str) -> None:
    producer = Producer(service="admin", instance=instance_name())
    nodes = ReconnectingPublisher(
        settings.kafka_access(), settings.nodes_topic, client_id="voxlog-admin", deadline_ms=30_000
    )
    try:
        await switch_cache_only(nodes, enabled, reason, producer)
    finally:
        await nodes.stop()


async def _status(settings: ModeSettings) -> dict[str, Any]:
    pool = await open_pool(settings.database_url.get_secret_value(), settings.database_schema, min_size=0, max_size=1)
    try:
        return await cache_only_status(pool)
    finally:
        await pool.close()


def _lines(status: dict[str, Any]) -> list[str]:
    lines = [f"cache-only mode {'ON' if status['cache_only'] else 'off'}"]
    for source, switch in status["switches"].items():
        lines.append(
            f"  {source:9} {'on ' if switch['enabled'] else 'off'} since {switch['set_at']}: {switch['reason']}"
        )
    backlog = status["backlog"]
    work = "unknown (no worker has measured its speed)" if backlog["work_s"] is None else f"{backlog['work_s']:.0f} s"
    lines.append(f"backlog   {backlog['syntheses']} syntheses, {backlog['chars']:,} characters: {work} of work")
    return lines
