"""The webhooks' reads of the projection: the API's (a tenant's endpoints and their deliveries) and the
delivery process's (jobs' and documents' outcomes, tenants' endpoints, deliveries due). Driver errors become
:class:`projections.errors.ProjectionUnavailable`: the API answers 503, the delivery process waits them out.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, NamedTuple

import asyncpg

from contracts import (
    JobState,
    WebhookDeliveryRecordedPayload,
    WebhookEndpointSetPayload,
    WebhookEventType,
    document_part_job_id,
)
from foundation.db import reading
from projections.errors import ProjectionUnavailable

Due = WebhookDeliveryRecordedPayload
"""A pending delivery: its latest record, as the projection has it; an attempt records it again, changed."""

_COLUMNS: Final = (
    "endpoint_id, tenant, url, event_types, description, secret_generation, previous_secret_until, created_at,"
    " updated_at, disabled_reason"
)
_LIVE: Final = f"SELECT {_COLUMNS} FROM webhook_endpoints WHERE tenant = $1 AND removed_at IS NULL ORDER BY created_at"
_ONE: Final = f"SELECT {_COLUMNS}, removed_at FROM webhook_endpoints WHERE endpoint_id = $1 AND tenant = $2"
_DELIVERY_COLUMNS: Final = (
    "delivery_id, endpoint_id, tenant, event_type, job_id, document_id, body, traceparent, created_at, state,"
    " attempts, next_attempt_at, last_status, last_error, last_duration_ms, updated_at"
)
_DELIVERY: Final = (
    f"SELECT {_DELIVERY_COLUMNS} FROM webhook_deliveries WHERE delivery_id = $1 AND endpoint_id = $2 AND tenant = $3"
)
_DELIVERIES: Final = (
    f"SELECT {_DELIVERY_COLUMNS} FROM webhook_deliveries WHERE endpoint_id = $1 AND tenant = $2"
    " AND ($3::timestamptz IS NULL OR (created_at, delivery_id) < ($3::timestamptz, $4::uuid))"
    " ORDER BY created_at DESC, delivery_id DESC LIMIT $5"
)


@dataclass(frozen=True)
class Endpoint:
    endpoint_id: uuid.UUID
    tenant: str
    url: str
    event_types: tuple[WebhookEventType, ...]
    description: str
    secret_generation: int
    previous_secret_until: datetime | None
    created_at: datetime
    updated_at: datetime
    disabled_reason: str = ""  # set by the delivery process: why it delivers nothing to it (enable() clears it)

    @classmethod
    def from_row(cls, row: Any) -> Endpoint:
        values = {name: row[name] for name in cls.__dataclass_fields__}
        return cls(**{**values, "event_types": tuple(values["event_types"])})

    @classmethod
    def of(cls, payload: WebhookEndpointSetPayload, at: datetime) -> Endpoint:
        return cls(
            payload.endpoint_id, payload.tenant, payload.url, payload.event_types, payload.description,
            payload.secret_generation, payload.previous_secret_until, payload.created_at, at, payload.disabled_reason,
        )  # fmt: skip


@dataclass(frozen=True)
class Delivery:
    """A delivery as its latest record says (``webhook_deliveries``): that record's payload, and when it was made."""

    record: WebhookDeliveryRecordedPayload
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Any) -> Delivery:
        fields = WebhookDeliveryRecordedPayload.model_fields
        return cls(WebhookDeliveryRecordedPayload(**{name: row[name] for name in fields}), row["updated_at"])


class DeliveryPage(NamedTuple):
    deliveries: list[Delivery]
    more: bool  # older deliveries follow the last one


@dataclass(frozen=True)
class JobFacts:
    """What the projection says of the job an outcome ends."""

    tenant: str
    state: str
    fingerprint: str
    ended_at: datetime | None = None  # when the event that ended it occurred (completed_at, failed_at...)
    total_duration_ms: int | None = None
    cache_hit: bool = False
    error_code: str | None = None
    error_message: str | None = None
    document_id: uuid.UUID | None = None  # the document it is a part of


@dataclass(frozen=True)
class DocumentFacts:
    """What the projection says of a document: its owner, and how many parts it has."""

    tenant: str
    part_count: int


@dataclass(frozen=True)
class PartFacts:
    """A document part's job, as the projection has it (:class:`contracts.document_state.PartState`)."""

    state: JobState
    error_code: str | None
    ended_at: datetime | None


@dataclass(frozen=True)
class EndpointFacts:
    endpoint_id: uuid.UUID
    event_types: tuple[str, ...]
    created_at: datetime


@dataclass(frozen=True)
class EndpointNow:
    tenant: str
    url: str
    event_types: tuple[str, ...]
    description: str
    secret_generation: int
    previous_secret_until: datetime | None
    created_at: datetime
    removed: bool
    disabled_reason: str = ""


class WebhookReads:
    """A tenant's endpoints and their deliveries, as the API shows them."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def endpoints(self, tenant: str) -> list[Endpoint]:
        async with reading("the webhook endpoints", ProjectionUnavailable):
            rows = await self._pool.fetch(_LIVE, tenant, timeout=QUERY_TIMEOUT_S)
        return [Endpoint.from_row(row) for row in rows]

    async def endpoint(self, tenant: str, endpoint_id: uuid.UUID) -> Endpoint | None:
        """The tenant's endpoint (another tenant's, or a removed one, is unknown)."""
        async with reading("the webhook endpoints", ProjectionUnavailable):
            row = await self._pool.fetchrow(_ONE, endpoint_id, tenant, timeout=QUERY_TIMEOUT_S)
        return None if row is None or row["removed_at"] is not None else Endpoint.from_row(row)

    async def deliveries(
        self, tenant: str, endpoint_id: uuid.UUID, after: Delivery | None, limit: int
    ) -> list[Delivery]:
        """Up to ``limit`` of the endpoint's deliveries, newest first, made before ``after`` when given."""
        at, after_id = (after.record.created_at, after.record.delivery_id) if after is not None else (None, None)
        async with reading("the webhook deliveries", ProjectionUnavailable):
            rows = await self._pool.fetch(
                _DELIVERIES, endpoint_id, tenant, at, after_id, limit, timeout=QUERY_TIMEOUT_S
            )
        return [Delivery.from_row(row) for row in rows]

    async def delivery(self, tenant: str, endpoint_id: uuid.UUID, delivery_id: uuid.UUID) -> Delivery | None:
        """One delivery of the tenant's endpoint (another endpoint's, or another tenant's, is unknown)."""
        async with reading("the webhook deliveries", ProjectionUnavailable):
            row = await self._pool.fetchrow(_DELIVERY, delivery_id, endpoint_id, tenant, timeout=QUERY_TIMEOUT_S)
        return None if row is None else Delivery.from_row(row)


QUERY_TIMEOUT_S: Final = 10.0
_JOB: Final = (
    "SELECT tenant, state, fingerprint, total_duration_ms, cache_hit, error_code, error_message,"
    " coalesce(completed_at, failed_at, cancelled_at) AS ended_at, document_id FROM jobs WHERE job_id = $1"
)
_DOCUMENT: Final = "SELECT tenant, part_count FROM documents WHERE document_id = $1"
_PARTS: Final = (
    "SELECT job_id, state, error_code, coalesce(completed_at, failed_at, cancelled_at) AS ended_at"
    " FROM jobs WHERE job_id = ANY($1::uuid[])"
)
_ENDPOINTS: Final = (
    "SELECT endpoint_id, event_types, created_at FROM webhook_endpoints"
    " WHERE tenant = $1 AND removed_at IS NULL AND disabled_reason = ''"
)
_FIRST: Final = "SELECT min(created_at) FROM webhook_endpoints WHERE removed_at IS NULL AND disabled_reason = ''"
_DUE: Final = (
    f"SELECT {', '.join(Due.model_fields)} FROM webhook_deliveries WHERE state = 'pending' AND next_attempt_at <= $1"
    " ORDER BY next_attempt_at LIMIT $2"
)
_ENDPOINT: Final = (
    "SELECT tenant, url, event_types, description, secret_generation, previous_secret_until, created_at,"
    " removed_at IS NOT NULL AS removed, disabled_reason FROM webhook_endpoints WHERE endpoint_id = $1"
)
_DELIVERED_SINCE: Final = (
    "SELECT EXISTS (SELECT 1 FROM webhook_deliveries"
    " WHERE endpoint_id = $1 AND state = 'delivered' AND updated_at >= $2)"
)


class PgWebhookStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def job(self, job_id: uuid.UUID) -> JobFacts | None:
        async with reading(f"job {job_id}", ProjectionUnavailable):
            row = await self._pool.fetchrow(_JOB, job_id, timeout=QUERY_TIMEOUT_S)
        return None if row is None else JobFacts(**dict(row))

    async def endpoints(self, tenant: str) -> list[EndpointFacts]:
        async with reading("the webhook endpoints", ProjectionUnavailable):
            rows = await self._pool.fetch(_ENDPOINTS, tenant, timeout=QUERY_TIMEOUT_S)
        return [EndpointFacts(row["endpoint_id"], tuple(row["event_types"]), row["created_at"]) for row in rows]

    async def first_endpoint_at(self) -> datetime | None:
        async with reading("the webhook endpoints", ProjectionUnavailable):
            first = await self._pool.fetchval(_FIRST, timeout=QUERY_TIMEOUT_S)
        return first if isinstance(first, datetime) else None

    async def document(self, document_id: uuid.UUID) -> DocumentFacts | None:
        async with reading(f"document {document_id}", ProjectionUnavailable):
            row = await self._pool.fetchrow(_DOCUMENT, document_id, timeout=QUERY_TIMEOUT_S)
        return None if row is None else DocumentFacts(**dict(row))

    async def parts(self, document_id: uuid.UUID, count: int) -> list[PartFacts | None]:
        ids = [document_part_job_id(document_id, index) for index in range(count)]
        async with reading(f"the parts of document {document_id}", ProjectionUnavailable):
            rows = await self._pool.fetch(_PARTS, ids, timeout=QUERY_TIMEOUT_S)
        found = {row["job_id"]: PartFacts(JobState(row["state"]), row["error_code"], row["ended_at"]) for row in rows}
        return [found.get(job_id) for job_id in ids]

    async def due(self, now: datetime, limit: int) -> list[Due]:
        async with reading("the webhook deliveries due", ProjectionUnavailable):
            rows = await self._pool.fetch(_DUE, now, limit, timeout=QUERY_TIMEOUT_S)
        return [Due(**dict(row)) for row in rows]  # the row's columns are the latest record's payload

    async def endpoint(self, endpoint_id: uuid.UUID) -> EndpointNow | None:
        async with reading(f"webhook endpoint {endpoint_id}", ProjectionUnavailable):
            row = await self._pool.fetchrow(_ENDPOINT, endpoint_id, timeout=QUERY_TIMEOUT_S)
        if row is None:
            return None
        return EndpointNow(**{**dict(row), "event_types": tuple(row["event_types"])})

    async def delivered_since(self, endpoint_id: uuid.UUID, since: datetime) -> bool:
        async with reading(f"webhook endpoint {endpoint_id}'s deliveries", ProjectionUnavailable):
            return bool(await self._pool.fetchval(_DELIVERED_SINCE, endpoint_id, since, timeout=QUERY_TIMEOUT_S))
