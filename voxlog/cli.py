"""The ``voxlog`` command line."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from infra.errors import InfraError
from projections.errors import ProjectionError
from projections.migrations import migrate_database
from voxlog import docs
from voxlog.config_docs import settings_table
from voxlog.errors import VoxlogError
from voxlog.logging import configure_logging
from voxlog.settings import AdminSettings, DevSettings
from voxlog.topics import ensure_topics, topic_specs
from voxlog.wiring import dev_stack


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="voxlog", description="Durable text-to-speech jobs on Kafka and Postgres.")
    parser.add_argument("--log-level", default="INFO", help="logging level (default: INFO)")
    commands = parser.add_subparsers(dest="command", required=True)

    dev = commands.add_parser("dev", help="the local Kafka broker and PostgreSQL cluster")
    dev_commands = dev.add_subparsers(dest="dev_command", required=True)
    dev_commands.add_parser("up", help="install what is missing, start both services, create topics and tables")
    down = dev_commands.add_parser("down", help="stop both services (data is kept)")
    down.add_argument("--purge", action="store_true", help="also delete the stack's data directory")
    dev_commands.add_parser("status", help="show each service; exit 1 when one is down")

    commands.add_parser("migrate", help="apply pending Postgres migrations (VOXLOG_DATABASE_URL)")
    commands.add_parser("topics", help="create missing Kafka topics (VOXLOG_KAFKA_BOOTSTRAP_SERVERS)")
    docs_cmd = commands.add_parser("docs", help="regenerate docs/events.schema.json and docs/asyncapi.json")
    docs_cmd.add_argument("--check", action="store_true", help="fail when the committed documents are stale")
    commands.add_parser("config", help="print every setting with its default, as a Markdown table")
    return parser


async def _dev_up(settings: DevSettings) -> int:
    stack = dev_stack(settings)
    await stack.up()
    created = await ensure_topics(stack.bootstrap_servers, topic_specs(settings))
    applied = await migrate_database(stack.database_url, settings.database_schema)
    for status in await stack.status():
        print(status.line())
    print("topics:     " + ", ".join(f"{name} ({state})" for name, state in created.items()))
    print(f"migrations: {len(applied)} applied")
    print(f"export VOXLOG_KAFKA_BOOTSTRAP_SERVERS={stack.bootstrap_servers}")
    print(f"export VOXLOG_DATABASE_URL={stack.database_url}")
    return 0


async def _dev_status(settings: DevSettings) -> int:
    statuses = await dev_stack(settings).status()
    for status in statuses:
        print(status.line())
    return 0 if all(s.up for s in statuses) else 1


async def _migrate() -> int:
    settings = AdminSettings()
    applied = await migrate_database(settings.database_url, settings.database_schema)
    names = ", ".join(f"{m.version:04d}_{m.name}" for m in applied) or "none pending"
    print(f"applied: {names}")
    return 0


async def _topics() -> int:
    settings = AdminSettings()
    for name, state in (await ensure_topics(settings.kafka_bootstrap_servers, topic_specs(settings))).items():
        print(f"{name}: {state}")
    return 0


def _docs(check: bool) -> int:
    if check:
        stale = docs.stale()
        for name in stale:
            print(f"docs/{name} is stale: run `voxlog docs`", file=sys.stderr)
        return 1 if stale else 0
    for path in docs.write():
        print(f"wrote {path}")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.command == "dev":
        settings = DevSettings()
        if args.dev_command == "up":
            return asyncio.run(_dev_up(settings))
        if args.dev_command == "down":
            dev_stack(settings).down(purge=args.purge)
            print("stopped" + (" and purged" if args.purge else ""))
            return 0
        return asyncio.run(_dev_status(settings))
    if args.command == "migrate":
        return asyncio.run(_migrate())
    if args.command == "topics":
        return asyncio.run(_topics())
    if args.command == "docs":
        return _docs(args.check)
    print(settings_table())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    configure_logging(args.log_level)
    try:
        return run(args)
    except (VoxlogError, InfraError, ProjectionError) as exc:
        print(f"voxlog: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
