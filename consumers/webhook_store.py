"""The delivery process's reads of the projection: jobs' outcomes, documents' parts, tenants' endpoints, deliveries due.

Driver errors become :class:`consumers.errors.LookupUnavailable`; the reader and the dispatcher wait them out.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Final

import asyncpg

from consumers.errors import LookupUnavailable
from consumers.webhook_dispatch import Due, EndpointNow
from consumers.webhook_outcomes import DocumentFacts, EndpointFacts, JobFacts, PartFacts
from contracts import JobState, document_part_job_id
from foundation.db import reading

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
        async with reading(f"job {job_id}", LookupUnavailable):
            row = await self._pool.fetchrow(_JOB, job_id, timeout=QUERY_TIMEOUT_S)
        return None if row is None else JobFacts(**dict(row))

    async def endpoints(self, tenant: str) -> list[EndpointFacts]:
        async with reading("the webhook endpoints", LookupUnavailable):
            rows = await self._pool.fetch(_ENDPOINTS, tenant, timeout=QUERY_TIMEOUT_S)
        return [EndpointFacts(row["endpoint_id"], tuple(row["event_types"]), row["created_at"]) for row in rows]

    async def first_endpoint_at(self) -> datetime | None:
        async with reading("the webhook endpoints", LookupUnavailable):
            first = await self._pool.fetchval(_FIRST, timeout=QUERY_TIMEOUT_S)
        return first if isinstance(first, datetime) else None

    async def document(self, document_id: uuid.UUID) -> DocumentFacts | None:
        async with reading(f"document {document_id}", LookupUnavailable):
            row = await self._pool.fetchrow(_DOCUMENT, document_id, timeout=QUERY_TIMEOUT_S)
        return None if row is None else DocumentFacts(**dict(row))

    async def parts(self, document_id: uuid.UUID, count: int) -> list[PartFacts | None]:
        ids = [document_part_job_id(document_id, index) for index in range(count)]
        async with reading(f"the parts of document {document_id}", LookupUnavailable):
            rows = await self._pool.fetch(_PARTS, ids, timeout=QUERY_TIMEOUT_S)
        found = {row["job_id"]: PartFacts(JobState(row["state"]), row["error_code"], row["ended_at"]) for row in rows}
        return [found.get(job_id) for job_id in ids]

    async def due(self, now: datetime, limit: int) -> list[Due]:
        async with reading("the webhook deliveries due", LookupUnavailable):
            rows = await self._pool.fetch(_DUE, now, limit, timeout=QUERY_TIMEOUT_S)
        return [Due(**dict(row)) for row in rows]  # the row's columns are the latest record's payload

    async def endpoint(self, endpoint_id: uuid.UUID) -> EndpointNow | None:
        async with reading(f"webhook endpoint {endpoint_id}", LookupUnavailable):
            row = await self._pool.fetchrow(_ENDPOINT, endpoint_id, timeout=QUERY_TIMEOUT_S)
        if row is None:
            return None
        return EndpointNow(**{**dict(row), "event_types": tuple(row["event_types"])})

    async def delivered_since(self, endpoint_id: uuid.UUID, since: datetime) -> bool:
        async with reading(f"webhook endpoint {endpoint_id}'s deliveries", LookupUnavailable):
            return bool(await self._pool.fetchval(_DELIVERED_SINCE, endpoint_id, since, timeout=QUERY_TIMEOUT_S))
