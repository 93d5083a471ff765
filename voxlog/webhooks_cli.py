"""`voxlog webhooks add|list|remove|rotate --tenant T`: a tenant's webhook endpoints, as the operator sees them.

The same actions as ``POST``/``GET``/``DELETE /v1/webhooks`` (:class:`producers.webhooks.WebhookRegistry`):
each is an event on the control topic, the URL judged as the API judges it, and a secret shown once.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import uuid
from dataclasses import asdict
from typing import Any

from contracts import DEFAULT_TENANT, WEBHOOK_EVENT_TYPES, Producer
from foundation.db import DATABASE_OUTAGES, open_pool
from foundation.errors import BrokerUnavailable
from foundation.kafka import ReconnectingPublisher
from foundation.outbound import parse_networks
from foundation.settings import WebhookCliSettings
from producers.errors import Rejected
from producers.webhooks import Shown, WebhookRegistry
from projections.errors import ProjectionUnavailable
from projections.reads.webhooks import Endpoint
from voxlog.instance import instance_name


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    webhooks = commands.add_parser("webhooks", help="a tenant's webhook endpoints, recorded on the log")
    each = webhooks.add_subparsers(dest="webhooks_command", required=True)
    add = each.add_parser("add", help="register URL for some outcomes; prints its signing secret, once")
    add.add_argument("url")
    add.add_argument(
        "--events", default="job.completed,job.failed", help=f"comma-separated, of: {', '.join(WEBHOOK_EVENT_TYPES)}"
    )
    add.add_argument("--description", default="")
    listing = each.add_parser("list", help="the tenant's endpoints, as projected")
    listing.add_argument("--json", action="store_true", help="one JSON document")
    for name, says in (("remove", "nothing is delivered to it again"), ("rotate", "a new secret, printed once")):
        command = each.add_parser(name, help=says)
        command.add_argument("endpoint_id", type=uuid.UUID)
    for command in (add, listing, *each.choices.values()):
        if not any(a.dest == "tenant" for a in command._actions):
            command.add_argument("--tenant", default=DEFAULT_TENANT, help="whose endpoints (default: default)")


def run(args: argparse.Namespace) -> int:
    settings = WebhookCliSettings()
    try:
        return asyncio.run(_run(settings, args))
    except Rejected as exc:
        print(f"voxlog webhooks: {exc}")
        return 2
    except BrokerUnavailable as exc:
        print(f"voxlog webhooks: Kafka did not take the change ({exc}); nothing changed, run it again")
        return 2
    except (ProjectionUnavailable, *DATABASE_OUTAGES) as exc:
        print(f"voxlog webhooks: PostgreSQL cannot be read ({type(exc).__name__}: {exc})")
        return 2


async def _run(settings: WebhookCliSettings, args: argparse.Namespace) -> int:
    pool = await open_pool(settings.database_url.get_secret_value(), settings.database_schema, min_size=0, max_size=1)
    nodes = ReconnectingPublisher(
        settings.kafka_access(), settings.control_topic, client_id="voxlog-webhooks", deadline_ms=30_000
    )
    registry = WebhookRegistry(
        pool,
        nodes,
        Producer(service="webhooks", instance=instance_name()),
        settings.webhook_signing_key.get_secret_value().encode(),
        parse_networks(settings.webhook_allowed_networks),
    )
    try:
        return await _command(registry, args)
    finally:
        await nodes.stop()
        await pool.close()


async def _command(registry: WebhookRegistry, args: argparse.Namespace) -> int:
    tenant = args.tenant
    match args.webhooks_command:
        case "add":
            events = [e.strip() for e in args.events.split(",") if e.strip()]
            unknown = sorted(set(events) - set(WEBHOOK_EVENT_TYPES))
            if unknown or not events:
                print(f"voxlog webhooks: unknown event types {unknown}; use some of: {', '.join(WEBHOOK_EVENT_TYPES)}")
                return 2
            _show(await registry.add(tenant, args.url, events, args.description))
        case "list":
            endpoints = await registry.list(tenant)
            print(json.dumps([_json(e) for e in endpoints], indent=2, default=str) if args.json else _lines(endpoints))
        case "rotate":
            shown = await registry.rotate(tenant, args.endpoint_id)
            if shown is None:
                print(f"voxlog webhooks: tenant {tenant} has no endpoint {args.endpoint_id}")
                return 1
            _show(shown)
        case _:
            reason = f"removed by {getpass.getuser()}"
            if not await registry.remove(tenant, args.endpoint_id, reason):
                print(f"voxlog webhooks: tenant {tenant} has no endpoint {args.endpoint_id}")
                return 1
            print(f"endpoint {args.endpoint_id} removed ({reason})")
    return 0


def _show(shown: Shown) -> None:
    e = shown.endpoint
    print(f"endpoint {e.endpoint_id} of tenant {e.tenant}: {e.url} ({', '.join(e.event_types)})")
    print(f"signing secret (shown once; verify each delivery with it): {shown.secret}")


def _json(endpoint: Endpoint) -> dict[str, Any]:
    return {**asdict(endpoint), "event_types": list(endpoint.event_types)}


def _lines(endpoints: list[Endpoint]) -> str:
    if not endpoints:
        return "no webhook endpoint (voxlog webhooks add URL)"
    return "\n".join(
        f"{e.endpoint_id}  {e.url}  {','.join(e.event_types)}  secret #{e.secret_generation}  {e.description}"
        for e in endpoints
    )
