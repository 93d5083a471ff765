"""Pending webhook deliveries tried, each endpoint on its own, by the one delivery process that leads.

The leader (a PostgreSQL advisory lock of its own: one at a time, another takes over when it goes) reads the
deliveries due from the projection and gives each to its endpoint's queue: an endpoint's deliveries are
tried one after another by a task of its own, at most ``concurrency`` endpoints at once, so a slow or dead
endpoint holds only its own queue, never another endpoint's or another tenant's. Each attempt is recorded
whole (:class:`contracts.WebhookDeliveryRecorded`): delivered, pending again at the retry schedule's next
time, or given up past the retry window or once its endpoint was removed. A delivery whose attempt was
not recorded (the process killed mid-attempt) is still pending in the projection and is tried again, with
the same ``webhook-id``: at least once, receivers de-duplicate.

The projection shows an attempt's record a moment after it is made: until it does, this process remembers
how many attempts it recorded, and does not take the delivery again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Final, Protocol, cast

import structlog

from consumers.webhook_retries import RetrySchedule
from consumers.webhook_sender import Attempted, signed_headers
from contracts import (
    AnyEvent,
    DeliveryState,
    Producer,
    WebhookDeliveryRecorded,
    WebhookEndpointSet,
    WebhookEndpointSetPayload,
    WebhookEventType,
    node_event,
    utc_now,
)
from contracts.webhook_signatures import endpoint_secret
from foundation.errors import FoundationError
from foundation.lifecycle import OwnedTasks
from projections.errors import ProjectionUnavailable
from projections.reads.webhooks import Due, EndpointNow

log = structlog.get_logger("voxlog.webhooks")
BATCH: Final = 500
REMEMBERED_S: Final = 600.0  # how long an attempt recorded here is remembered while the projection catches up


class DispatchStore(Protocol):
    async def due(self, now: datetime, limit: int) -> Sequence[Due]: ...

    async def endpoint(self, endpoint_id: uuid.UUID) -> EndpointNow | None: ...

    async def delivered_since(self, endpoint_id: uuid.UUID, since: datetime) -> bool:
        """Whether a delivery to the endpoint succeeded since ``since``."""
        ...


class Send(Protocol):
    async def send(self, url: str, body: bytes, headers: dict[str, str]) -> Attempted: ...


class NodesLog(Protocol):
    async def publish_all(
        self, events: Sequence[AnyEvent], partitions: Sequence[int | None] | None = None
    ) -> object: ...


class Leadership(Protocol):
    async def hold(self) -> bool: ...

    async def resign(self) -> None: ...


class Dispatcher:
    def __init__(
        self,
        store: DispatchStore,
        sender: Send,
        nodes: NodesLog,
        producer: Producer,
        signing_key: bytes,
        schedule: RetrySchedule,
        leadership: Leadership,
        *,
        concurrency: int = 32,
        poll_s: float = 1.0,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._store, self._sender, self._nodes, self._producer = store, sender, nodes, producer
        self._key, self._schedule, self._leadership = signing_key, schedule, leadership
        self._slots = asyncio.Semaphore(concurrency)
        self._poll_s, self._clock = poll_s, clock
        self._queues: dict[uuid.UUID, asyncio.Queue[Due]] = {}
        self._taken: set[uuid.UUID] = set()  # queued or being tried
        # Attempts recorded here that the projection may not show yet: how many, and when (monotonic).
        self._recorded: dict[uuid.UUID, tuple[int, float]] = {}
        self._tasks = OwnedTasks()

    async def run(self, stop: asyncio.Event) -> None:
        try:
            while not stop.is_set():
                try:
                    if await self._leadership.hold():
                        await self.look()
                except (ProjectionUnavailable, FoundationError) as exc:  # PostgreSQL or Kafka, as their adapters say
                    log.warning("webhook deliveries not read", error=str(exc))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self._poll_s)
        finally:
            await self._tasks.close()
            await self._leadership.resign()

    async def look(self) -> int:
        """Queue every delivery due now that is not queued or tried already; how many were queued."""
        queued, now = 0, time.monotonic()
        for gone in [d for d, (_, at) in self._recorded.items() if now - at > REMEMBERED_S]:
            del self._recorded[gone]
        for due in await self._store.due(self._clock(), BATCH):
            if due.delivery_id in self._taken or due.attempts < self._recorded.get(due.delivery_id, (0, 0.0))[0]:
                continue
            self._recorded.pop(due.delivery_id, None)  # the projection shows what was recorded here
            self._taken.add(due.delivery_id)
            queue = self._queues.get(due.endpoint_id)
            if queue is None:
                queue = self._queues[due.endpoint_id] = asyncio.Queue()
                self._tasks.start(self._drain(due.endpoint_id, queue), f"webhook endpoint {due.endpoint_id}")
            queue.put_nowait(due)
            queued += 1
        return queued

    async def _drain(self, endpoint_id: uuid.UUID, queue: asyncio.Queue[Due]) -> None:
        """One endpoint's deliveries, one after another; the task ends when its queue is empty."""
        try:
            while not queue.empty():
                due = queue.get_nowait()
                try:
                    async with self._slots:
                        await self.attempt(due)
                finally:
                    self._taken.discard(due.delivery_id)
        finally:
            if self._queues.get(endpoint_id) is queue:
                del self._queues[endpoint_id]
            for left in _drained(queue):  # queued while this task was ending: taken again at the next look
                self._taken.discard(left.delivery_id)

    async def attempt(self, due: Due) -> WebhookDeliveryRecorded:
        """Try ``due`` once and record what came of it."""
        endpoint = await self._store.endpoint(due.endpoint_id)
        now = self._clock()
        if endpoint is None or endpoint.removed or endpoint.disabled_reason:
            why = "disabled" if endpoint is not None and not endpoint.removed else "removed"
            return await self._record(due, due.attempts, now, "given_up", None, None, f"its endpoint was {why}")
        secrets = [endpoint_secret(self._key, due.endpoint_id, endpoint.secret_generation)]
        if endpoint.previous_secret_until is not None and endpoint.previous_secret_until > now:
            secrets.append(endpoint_secret(self._key, due.endpoint_id, endpoint.secret_generation - 1))
        body = due.body.encode()
        headers = signed_headers(secrets, str(due.delivery_id), int(now.timestamp()), body, due.traceparent)
        attempted = await self._sender.send(endpoint.url, body, headers)
        attempts, now = due.attempts + 1, self._clock()
        if attempted.delivered:
            return await self._record(due, attempts, now, "delivered", None, attempted)
        next_at = self._schedule.next_attempt(due.created_at, attempts, now, attempted.retry_after_s)
        state: DeliveryState = "pending" if next_at is not None else "given_up"
        log.info("webhook not delivered", delivery=str(due.delivery_id), attempts=attempts, error=attempted.error)
        record = await self._record(due, attempts, now, state, next_at, attempted)
        if next_at is None:
            await self._disable_if_failing(due.endpoint_id, endpoint, now, attempted.error)
        return record

    async def _disable_if_failing(
        self, endpoint_id: uuid.UUID, endpoint: EndpointNow, now: datetime, error: str
    ) -> None:
        """Disable the endpoint when no delivery to it succeeded for the whole retry window: recorded, with why,
        so its tenant sees it and enables it again once it answers."""
        since = now - self._schedule.retry_for
        if endpoint.created_at > since or await self._store.delivered_since(endpoint_id, since):
            return
        reason = f"disabled at {now:%Y-%m-%d %H:%M:%S} UTC: no delivery succeeded since {since:%Y-%m-%d %H:%M:%S} UTC"
        reason = f"{reason} (last: {error})"[:500]
        payload = WebhookEndpointSetPayload(
            endpoint_id=endpoint_id, tenant=endpoint.tenant, url=endpoint.url,
            event_types=cast(tuple[WebhookEventType, ...], endpoint.event_types), description=endpoint.description,
            secret_generation=endpoint.secret_generation, previous_secret_until=endpoint.previous_secret_until,
            created_at=endpoint.created_at, disabled_reason=reason,
        )  # fmt: skip
        await self._nodes.publish_all([node_event(WebhookEndpointSet, self._producer, payload, at=now)])
        log.warning("webhook endpoint disabled", endpoint=str(endpoint_id), reason=reason)

    async def _record(
        self,
        due: Due,
        attempts: int,
        now: datetime,
        state: DeliveryState,
        next_at: datetime | None,
        attempted: Attempted | None,
        error: str = "",
    ) -> WebhookDeliveryRecorded:
        outcome = {
            "state": state, "attempts": attempts, "next_attempt_at": next_at,
            "last_status": attempted.status if attempted else None,
            "last_error": attempted.error if attempted else error,
            "last_duration_ms": attempted.duration_ms if attempted else None,
        }  # fmt: skip
        payload = due.model_copy(update=outcome)
        record = node_event(WebhookDeliveryRecorded, self._producer, payload, at=now)
        await self._nodes.publish_all([record])
        self._recorded[due.delivery_id] = (max(attempts, due.attempts + 1), time.monotonic())
        return record


def _drained(queue: asyncio.Queue[Due]) -> list[Due]:
    left = []
    while not queue.empty():
        left.append(queue.get_nowait())
    return left
