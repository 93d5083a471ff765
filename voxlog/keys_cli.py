"""`voxlog keys create|list|revoke`: API keys, issued and revoked as events on the log.

``create`` makes a key (``vxl_<id>_<secret>``) whose id no key issued or
revoked has (checked in the projection: it needs PostgreSQL), records
``ApiKeyIssued`` on the control topic (the secret's sha256, never the secret)
and prints the key: the only time it is shown. ``revoke`` records ``ApiKeyRevoked``: every API
instance refuses the key once the projector applied it and its cache of the
key expired (two seconds: ``voxlog.composition.api.AUTH_CACHE_S``). ``list`` reads the projection.

``voxlog dev up`` makes the development stack's key (see
:mod:`voxlog.client_key`), which ``voxlog demo`` and ``voxlog speak`` send.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, Final

from contracts import (
    ApiKeyIssued,
    ApiKeyIssuedPayload,
    ApiKeyRevoked,
    ApiKeyRevokedPayload,
    Producer,
    node_event,
    utc_now,
)
from foundation.db import DATABASE_OUTAGES, open_pool
from foundation.errors import BrokerUnavailable
from foundation.kafka import KafkaEventPublisher
from foundation.settings import ModeSettings
from producers.api_keys import ALL_SCOPES, NewKey, new_key
from projections.reads.operator import api_keys, key_id_known
from voxlog.errors import VoxlogError
from voxlog.instance import instance_name

_DURATION: Final = re.compile(r"(\d+)([dhm])")
MAKE_TRIES: Final = 8


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = commands.add_parser("keys", help="API keys: create (printed once), list, revoke; events on the log")
    keys_commands = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_commands.add_parser("create", help="make a key for a tenant, print it once")
    create.add_argument("--tenant", required=True, help="who the key speaks for (lower-case letters, digits, _.-)")
    create.add_argument("--scopes", default="submit,read", help=f"comma-separated, of {', '.join(sorted(ALL_SCOPES))}")
    create.add_argument("--name", default="", help="what the key is for, shown by `keys list`")
    create.add_argument("--expires", default=None, help="a duration (30d, 12h, 90m) or an ISO 8601 time")
    listing = keys_commands.add_parser("list", help="the keys as the projection shows them (never their secrets)")
    listing.add_argument("--tenant", default=None)
    listing.add_argument("--json", action="store_true")
    revoke = keys_commands.add_parser("revoke", help="revoke a key: every API refuses it within 2 s of its projection")
    revoke.add_argument("key_id", help="the key's id (the 12 hex digits after vxl_)")
    revoke.add_argument("--reason", default="", help="why, kept on the log")


def expiry(text: str | None) -> datetime | None:
    if text is None:
        return None
    if match := _DURATION.fullmatch(text.strip()):
        amount, unit = int(match.group(1)), match.group(2)
        return utc_now() + timedelta(**{{"d": "days", "h": "hours", "m": "minutes"}[unit]: amount})
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise VoxlogError(f"--expires {text!r}: give a duration (30d, 12h, 90m) or an ISO 8601 time") from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=utc_now().tzinfo)


def scopes_of(text: str) -> tuple[str, ...]:
    scopes = tuple(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    unknown = [s for s in scopes if s not in ALL_SCOPES]
    if unknown or not scopes:
        raise VoxlogError(f"--scopes {text!r}: give some of {', '.join(sorted(ALL_SCOPES))}")
    return scopes


async def issue(
    settings: ModeSettings,
    tenant: str,
    scopes: tuple[str, ...],
    name: str = "",
    expires_at: datetime | None = None,
) -> NewKey:
    """Record a new key on the log; the key, whose secret nothing else will ever show. Its id is one no key
    issued or revoked has (:func:`fresh_key`)."""
    key = await fresh_key(lambda key_id: key_id_taken(settings, key_id), new_key)
    payload = ApiKeyIssuedPayload(
        key_id=key.key_id,
        tenant=tenant,
        scopes=scopes,
        name=name,
        secret_sha256=key.secret_sha256,
        issued_at=utc_now(),
        expires_at=expires_at,
    )
    async with KafkaEventPublisher(settings.kafka_access(), settings.control_topic) as publisher:
        await publisher.publish(node_event(ApiKeyIssued, _producer(), payload))
    return key


async def fresh_key(
    taken: Callable[[str], Awaitable[bool]], make: Callable[[], NewKey] = new_key, tries: int = MAKE_TRIES
) -> NewKey:
    """A new key whose id ``taken`` says no key has: a second ``ApiKeyIssued`` of an id is ignored by the
    projection (the first stands), so the new key would never authenticate, and a revoked id must stay revoked.
    An id is 48 random bits, so a draw is taken with a chance of (keys there are) / 2^48 and drawn again; ``tries``
    draws all taken mean the ids are not random, and nothing is issued."""
    for _ in range(tries):
        key = make()
        if not await taken(key.key_id):
            return key
    raise VoxlogError(f"{tries} new key ids in a row were taken already: the ids drawn are not random; nothing issued")


async def key_id_taken(settings: ModeSettings, key_id: str) -> bool:
    """Whether the projection has ``key_id``, issued or revoked."""
    pool = await open_pool(settings.database_url.get_secret_value(), settings.database_schema, min_size=0, max_size=1)
    try:
        return await key_id_known(pool, key_id, 30.0)
    finally:
        await pool.close()


async def keys(settings: ModeSettings, tenant: str | None = None) -> list[dict[str, Any]]:
    pool = await open_pool(settings.database_url.get_secret_value(), settings.database_schema, min_size=0, max_size=1)
    try:
        return await api_keys(pool, tenant, 30.0)
    finally:
        await pool.close()


async def wait_projected(settings: ModeSettings, key_id: str, within_s: float) -> bool:
    """Whether the projection shows the key within ``within_s`` (the API judges keys by it)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if any(row["key_id"] == key_id for row in await keys(settings)):
            return True
        await asyncio.sleep(0.2)
    return False


async def revoke(settings: ModeSettings, key_id: str, reason: str) -> str:
    """Record the key's revocation; the tenant it belonged to."""
    known = [row for row in await keys(settings) if row["key_id"] == key_id]
    if not known:
        raise VoxlogError(f"no key {key_id} in the projection (`voxlog keys list` shows the keys)")
    payload = ApiKeyRevokedPayload(key_id=key_id, tenant=known[0]["tenant"], revoked_at=utc_now(), reason=reason)
    async with KafkaEventPublisher(settings.kafka_access(), settings.control_topic) as publisher:
        await publisher.publish(node_event(ApiKeyRevoked, _producer(), payload))
    return str(known[0]["tenant"])


def _producer() -> Producer:
    return Producer(service="keys", instance=instance_name())


def run(args: argparse.Namespace) -> int:
    settings = ModeSettings()
    try:
        if args.keys_command == "create":
            key = asyncio.run(issue(settings, args.tenant, scopes_of(args.scopes), args.name, expiry(args.expires)))
            print(key.token)
            print(f"(key {key.key_id} for tenant {args.tenant}: shown this once, store it now)", flush=True)
        elif args.keys_command == "revoke":
            tenant = asyncio.run(revoke(settings, args.key_id, args.reason))
            print(f"revoked key {args.key_id} of tenant {tenant}; every API refuses it within 2 s of its projection")
        else:
            rows = asyncio.run(keys(settings, args.tenant))
            print(json.dumps(rows, indent=2, default=str) if args.json else "\n".join(_lines(rows)))
    except BrokerUnavailable as exc:
        print(f"voxlog keys: Kafka did not take the event ({exc}); nothing changed, run it again")
        return 2
    except DATABASE_OUTAGES as exc:
        print(f"voxlog keys: PostgreSQL cannot be read ({type(exc).__name__}: {exc})")
        return 2
    return 0


def _lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = [f"{'key':12}  {'tenant':16} {'scopes':30} {'state':10} name"]
    for row in rows:
        expired = row["expires_at"] is not None and row["expires_at"] <= utc_now()
        state = "revoked" if row["revoked_at"] else "expired" if expired else "live"
        lines.append(f"{row['key_id']:12}  {row['tenant']:16} {','.join(row['scopes']):30} {state:10} {row['name']}")
    return lines
