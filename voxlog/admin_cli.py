"""`voxlog admin cache-only|degraded on|off|status`: the operator's switches of the service modes.

A switch is a ``ServiceModeSet`` event (source ``operator``) on the nodes
topic, not a row written by hand: every API instance follows the projection of
it, replay rebuilds it, and it sits beside the sweeper's own switch of the same
mode (source ``backlog``), which it neither sets nor clears. ``status`` shows
both as the projection has them, with the backlog they are judged by.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
from typing import Any, Final

from contracts import Producer, ServiceMode
from foundation.db import DATABASE_OUTAGES, open_pool
from foundation.errors import BrokerUnavailable
from foundation.kafka import ReconnectingPublisher
from foundation.settings import ModeSettings
from voxlog.instance import instance_name
from voxlog.operations import mode_status, switch_mode

MODES: Final[dict[str, tuple[ServiceMode, str]]] = {
    "cache-only": ("cache_only", "answer only cached (or in-flight) requests, refuse new syntheses with 503"),
    "degraded": (
        "degraded",
        "take new syntheses at the API's degraded settings (VOXLOG_DEGRADED_SPEED_FACTOR, _SAMPLE_RATE)"
        " instead of refusing them",
    ),
}


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    admin = commands.add_parser("admin", help="operator switches, recorded on the log")
    admin_commands = admin.add_subparsers(dest="admin_command", required=True)
    for name, (_, help_) in MODES.items():
        switch = admin_commands.add_parser(name, help=help_)
        switch.add_argument("switch", choices=["on", "off", "status"])
        switch.add_argument("--reason", default="", help="why, shown to clients and in the log")
        switch.add_argument("--json", action="store_true", help="status as one JSON document")


def run(args: argparse.Namespace) -> int:
    settings = ModeSettings()
    name = args.admin_command
    mode = MODES[name][0]
    try:
        if args.switch == "status":
            status = asyncio.run(_status(settings, mode))
            print(json.dumps(status, indent=2, default=str) if args.json else "\n".join(_lines(name, mode, status)))
            return 0
        enabled = args.switch == "on"
        reason = args.reason or f"set by {getpass.getuser()}"
        asyncio.run(_switch(settings, mode, enabled, reason))
    except BrokerUnavailable as exc:
        print(f"voxlog admin: Kafka did not take the switch ({exc}); nothing changed, run it again")
        return 2
    except DATABASE_OUTAGES as exc:
        print(f"voxlog admin: PostgreSQL cannot be read ({type(exc).__name__}: {exc})")
        return 2
    print(f"{name} mode {args.switch} (operator: {reason}); every API follows once the projector applies it")
    return 0


async def _switch(settings: ModeSettings, mode: ServiceMode, enabled: bool, reason: str) -> None:
    producer = Producer(service="admin", instance=instance_name())
    nodes = ReconnectingPublisher(
        settings.kafka_access(), settings.control_topic, client_id="voxlog-admin", deadline_ms=30_000
    )
    try:
        await switch_mode(nodes, mode, enabled, reason, producer)
    finally:
        await nodes.stop()


async def _status(settings: ModeSettings, mode: ServiceMode) -> dict[str, Any]:
    pool = await open_pool(settings.database_url.get_secret_value(), settings.database_schema, min_size=0, max_size=1)
    try:
        return await mode_status(pool, mode)
    finally:
        await pool.close()


def _lines(name: str, mode: ServiceMode, status: dict[str, Any]) -> list[str]:
    lines = [f"{name} mode {'ON' if status[mode] else 'off'}"]
    for source, switch in status["switches"].items():
        lines.append(
            f"  {source:9} {'on ' if switch['enabled'] else 'off'} since {switch['set_at']}: {switch['reason']}"
        )
    backlog = status["backlog"]
    work = "unknown (no worker has measured its speed)" if backlog["work_s"] is None else f"{backlog['work_s']:.0f} s"
    lines.append(f"backlog   {backlog['syntheses']} syntheses, {backlog['chars']:,} characters: {work} of work")
    return lines
