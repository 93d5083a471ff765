"""A tenant's webhook endpoints: registered, listed, rotated and removed as events on the control topic.

An endpoint is a ``WebhookEndpointSet`` (registered, or its secret rotated) and, once removed, a
``WebhookEndpointRemoved``, keyed ``webhook/<id>`` so compaction keeps each endpoint's last word; the
projection's ``webhook_endpoints`` is what every API lists and the delivery process delivers to. Its URL is
judged before anything is recorded (:mod:`foundation.outbound`: https, public addresses only, every address
its host resolves to, unless the operator allows a network), and again before each delivery. Its signing
secret is shown once, when it is registered or rotated, and recorded nowhere
(:func:`contracts.webhook_signatures.endpoint_secret`): a registration retried with its Idempotency-Key
names the same endpoint and shows the same secret. After a rotation the previous secret still signs for
:data:`ROTATION_GRACE`, so receivers can switch without losing a delivery.

Reads are the projection's: an endpoint is listed once the projector applies its record (within a moment),
and the count a tenant may hold is judged from it. So are an endpoint's deliveries (``webhook_deliveries``, the
latest ``WebhookDeliveryRecorded`` of each), listed newest first a page at a time; a redelivery records the
delivery again, pending and due now, with its id, body and attempts kept (its receiver de-duplicates on
``webhook-id``), for the delivery process to try once more.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Final, Protocol

import asyncpg

from contracts import (
    DEFAULT_TENANT,
    AnyEvent,
    Producer,
    WebhookDeliveryRecorded,
    WebhookEndpointRemoved,
    WebhookEndpointRemovedPayload,
    WebhookEndpointSet,
    WebhookEndpointSetPayload,
    WebhookEventType,
    node_event,
    utc_now,
)
from contracts.webhook_signatures import endpoint_secret
from foundation.outbound import Network, UnsafeTarget, checked_url, resolve_public
from producers.errors import Rejected
from projections.reads.webhooks import Delivery, DeliveryPage, Endpoint, WebhookReads

MAX_PAGE: Final = 100
"""The most deliveries one page lists."""
MAX_ENDPOINTS: Final = 20
"""Endpoints one tenant may hold (each outcome is delivered to every endpoint that wants it)."""
ROTATION_GRACE: Final = timedelta(days=1)
ENDPOINT_NAMESPACE: Final = uuid.UUID("9a6f1f0e-4c1b-4f7e-8d2a-5b3c7e9d1a20")


class NodesLog(Protocol):
    async def publish_all(
        self, events: Sequence[AnyEvent], partitions: Sequence[int | None] | None = None
    ) -> object: ...


@dataclass(frozen=True)
class Shown:
    """An endpoint with the secret it signs with from now on: shown this once."""

    endpoint: Endpoint
    secret: str


class WebhookRegistry:
    """The endpoints' records (the control topic) and reads (the projection), for the API and ``voxlog webhooks``."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        nodes: NodesLog,
        producer: Producer,
        signing_key: bytes,
        allowed: Sequence[Network] = (),
    ) -> None:
        self._reads, self._nodes, self._producer = WebhookReads(pool), nodes, producer
        self._signing_key, self._allowed = signing_key, tuple(allowed)

    @property
    def enabled(self) -> bool:
        return bool(self._signing_key)

    async def add(
        self,
        tenant: str,
        url: str,
        event_types: Sequence[WebhookEventType],
        description: str = "",
        idempotency_key: str | None = None,
    ) -> Shown:
        """Register an endpoint (:class:`Rejected` 422 for a URL voxlog will not call, 409 past
        :data:`MAX_ENDPOINTS`). With ``idempotency_key``, the same endpoint and secret as the first call."""
        self._check_enabled()
        try:
            target = await resolve_public(checked_url(url, self._allowed), self._allowed)
        except UnsafeTarget as exc:
            raise Rejected(f"url: {exc}", 422, param="url") from exc
        endpoint_id = uuid.uuid5(ENDPOINT_NAMESPACE, f"{tenant}/{idempotency_key}") if idempotency_key else None
        live = await self.list(tenant)
        known = next((e for e in live if e.endpoint_id == endpoint_id), None)
        if known is not None:
            if (known.url, set(known.event_types)) != (target.url, set(event_types)):
                raise Rejected("this Idempotency-Key registered another endpoint: use a new key", 409)
            return Shown(known, self._secret(known.endpoint_id, 1))
        if len(live) >= MAX_ENDPOINTS:
            raise Rejected(
                f"tenant {tenant} has {len(live)} webhook endpoints, the most it may hold: remove one first", 409
            )
        now = utc_now()
        payload = WebhookEndpointSetPayload(
            endpoint_id=endpoint_id or uuid.uuid4(), tenant=tenant, url=target.url,
            event_types=tuple(dict.fromkeys(event_types)), description=description, created_at=now,
        )  # fmt: skip
        await self._nodes.publish_all([node_event(WebhookEndpointSet, self._producer, payload, at=now)])
        return Shown(Endpoint.of(payload, now), self._secret(payload.endpoint_id, 1))

    async def rotate(self, tenant: str, endpoint_id: uuid.UUID) -> Shown | None:
        """A new secret for the endpoint (the previous one signs too for :data:`ROTATION_GRACE`); ``None``:
        the tenant has no such endpoint."""
        self._check_enabled()
        known = await self.get(tenant, endpoint_id)
        if known is None:
            return None
        now = utc_now()
        payload = WebhookEndpointSetPayload(
            endpoint_id=known.endpoint_id, tenant=known.tenant, url=known.url, event_types=known.event_types,
            description=known.description, secret_generation=known.secret_generation + 1,
            previous_secret_until=now + ROTATION_GRACE, created_at=known.created_at,
            disabled_reason=known.disabled_reason,
        )  # fmt: skip
        await self._nodes.publish_all([node_event(WebhookEndpointSet, self._producer, payload, at=now)])
        return Shown(Endpoint.of(payload, now), self._secret(known.endpoint_id, payload.secret_generation))

    async def enable(self, tenant: str, endpoint_id: uuid.UUID) -> Endpoint | None:
        """The endpoint enabled again after the delivery process disabled it (its outcomes from now on are
        delivered; those given up stay so: redeliver them); ``None``: the tenant has no such endpoint."""
        known = await self.get(tenant, endpoint_id)
        if known is None or not known.disabled_reason:
            return known
        now = utc_now()
        payload = WebhookEndpointSetPayload(
            endpoint_id=known.endpoint_id, tenant=known.tenant, url=known.url, event_types=known.event_types,
            description=known.description, secret_generation=known.secret_generation,
            previous_secret_until=known.previous_secret_until, created_at=known.created_at,
        )  # fmt: skip
        await self._nodes.publish_all([node_event(WebhookEndpointSet, self._producer, payload, at=now)])
        return Endpoint.of(payload, now)

    async def remove(self, tenant: str, endpoint_id: uuid.UUID, reason: str) -> bool:
        """Record the endpoint's removal; ``False`` (nothing recorded) when the tenant has no such endpoint."""
        if await self.get(tenant, endpoint_id) is None:
            return False
        payload = WebhookEndpointRemovedPayload(endpoint_id=endpoint_id, tenant=tenant, reason=reason)
        await self._nodes.publish_all([node_event(WebhookEndpointRemoved, self._producer, payload)])
        return True

    async def list(self, tenant: str = DEFAULT_TENANT) -> list[Endpoint]:
        return await self._reads.endpoints(tenant)

    async def get(self, tenant: str, endpoint_id: uuid.UUID) -> Endpoint | None:
        """The tenant's endpoint (another tenant's, or a removed one, is unknown)."""
        return await self._reads.endpoint(tenant, endpoint_id)

    async def deliveries(
        self, tenant: str, endpoint_id: uuid.UUID, limit: int = 20, before: uuid.UUID | None = None
    ) -> DeliveryPage | None:
        """The endpoint's deliveries, newest first: ``limit`` of them (at most :data:`MAX_PAGE`), made before
        delivery ``before`` when given (the last of the previous page; :class:`Rejected` 400 when the endpoint
        has no such delivery). ``None``: the tenant has no such endpoint."""
        if await self.get(tenant, endpoint_id) is None:
            return None
        after: Delivery | None = None
        if before is not None:
            after = await self.delivery(tenant, endpoint_id, before)
            if after is None:
                raise Rejected(f"before: endpoint {endpoint_id} has no delivery {before}", 400, param="before")
        limit = max(1, min(limit, MAX_PAGE))
        rows = await self._reads.deliveries(tenant, endpoint_id, after, limit + 1)
        return DeliveryPage(rows[:limit], more=len(rows) > limit)

    async def delivery(self, tenant: str, endpoint_id: uuid.UUID, delivery_id: uuid.UUID) -> Delivery | None:
        """One delivery of the tenant's endpoint (another endpoint's, or another tenant's, is unknown)."""
        return await self._reads.delivery(tenant, endpoint_id, delivery_id)

    async def redeliver(self, tenant: str, endpoint_id: uuid.UUID, delivery_id: uuid.UUID) -> Delivery | None:
        """Record the delivery again, pending and due now, its id, body, trace and attempts kept (the receiver
        de-duplicates on its ``webhook-id``), for the delivery process to try again; :class:`Rejected` 409 when
        it is pending already (the delivery process will try it). ``None``: the tenant's endpoint (a live one)
        has no such delivery."""
        self._check_enabled()
        endpoint = await self.get(tenant, endpoint_id)
        if endpoint is None:
            return None
        if endpoint.disabled_reason:
            enable = f"POST /v1/webhooks/{endpoint_id}/enable"
            raise Rejected(f"endpoint {endpoint_id} is disabled ({endpoint.disabled_reason}): {enable} first", 409)
        known = await self.delivery(tenant, endpoint_id, delivery_id)
        if known is None:
            return None
        if known.record.state == "pending":
            due = known.record.next_attempt_at
            when = f" (next attempt {due.isoformat()})" if due is not None else ""
            raise Rejected(f"delivery {delivery_id} is pending already{when}: it will be tried", 409)
        now = utc_now()
        # Stamped after the record it follows, whatever this host's clock says: the projection keeps a delivery's
        # newest record by its time, and the delivery process's clock may be ahead of this one.
        at = max(now, known.updated_at + timedelta(microseconds=1))
        payload = known.record.model_copy(update={"state": "pending", "next_attempt_at": now})
        await self._nodes.publish_all([node_event(WebhookDeliveryRecorded, self._producer, payload, at=at)])
        return Delivery(payload, at)

    def _secret(self, endpoint_id: uuid.UUID, generation: int) -> str:
        return endpoint_secret(self._signing_key, endpoint_id, generation)

    def _check_enabled(self) -> None:
        if not self.enabled:
            # Not a 503: nothing will change by retrying; the server is configured without them.
            raise Rejected(
                "webhooks are off on this server: its operator sets VOXLOG_WEBHOOK_SIGNING_KEY to turn them on", 404
            )
