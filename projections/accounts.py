"""The tenants' side of the projection: the API keys, and each tenant's usage by day.

A key's rows follow its two events: ``ApiKeyIssued`` makes the row (a second
copy of it, a producer's retry, changes nothing), ``ApiKeyRevoked`` revokes it
(the first revocation stands). The control topic is compacted on the key, so an
old key may be known only by its revocation: it is then a revoked row with no
secret, which nothing can authenticate with.

A webhook endpoint's row follows its records by their clock: a ``WebhookEndpointSet`` replaces an older one
(a rotation), a second copy of the one it holds changes nothing, and a ``WebhookEndpointRemoved`` removes it
for good (a later set of a removed endpoint changes nothing: its id is never reused).

A webhook delivery's row is its latest record, by the record's clock (each record holds the whole delivery,
so compaction, which keeps the latest, loses nothing a delivery needs); a second copy changes nothing.

Usage is counted by the day (UTC) a job was submitted, for its tenant: a
submission adds a request and its characters; its completion adds a synthesis
and its audio, or, for a cache hit or a coalesced duplicate, reused audio. A
batch's counts are added to the stored ones (:attr:`projections.rows.Table.counters`),
so the fold needs no usage row read first; replay folds the whole log into the
totals.
"""

from __future__ import annotations

import uuid
from datetime import date

from contracts import (
    ApiKeyIssued,
    ApiKeyRevoked,
    JobCompleted,
    JobQueued,
    WebhookDeliveryRecorded,
    WebhookEndpointRemoved,
    WebhookEndpointSet,
)
from projections.rows import ApiKeyRow, JobRow, UsageRow, WebhookDeliveryRow, WebhookEndpointRow


def key_issued(keys: dict[str, ApiKeyRow], event: ApiKeyIssued) -> None:
    k = event.payload
    keys.setdefault(
        k.key_id,
        ApiKeyRow(
            k.key_id, k.tenant, k.name, list(k.scopes), k.secret_sha256, k.issued_at, k.expires_at, None, None,
            event.event_id,
        ),
    )  # fmt: skip


def key_revoked(keys: dict[str, ApiKeyRow], event: ApiKeyRevoked) -> None:
    r = event.payload
    row = keys.get(r.key_id)
    if row is None:  # its issue was compacted away: a revoked key no secret matches
        keys[r.key_id] = ApiKeyRow(
            r.key_id, r.tenant, "", [], "", None, None, r.revoked_at, r.reason, event.event_id
        )  # fmt: skip
    elif row.revoked_at is None:
        row.revoked_at, row.revoke_reason, row.last_event_id = r.revoked_at, r.reason, event.event_id


def key_event(keys: dict[str, ApiKeyRow], event: ApiKeyIssued | ApiKeyRevoked) -> None:
    if isinstance(event, ApiKeyIssued):
        key_issued(keys, event)
    else:
        key_revoked(keys, event)


def webhook_event(
    endpoints: dict[uuid.UUID, WebhookEndpointRow], event: WebhookEndpointSet | WebhookEndpointRemoved
) -> None:
    known = endpoints.get(event.payload.endpoint_id)
    if known is not None and (known.removed_at is not None or known.last_event_id == event.event_id):
        return
    if isinstance(event, WebhookEndpointRemoved):
        r = event.payload
        if known is None:  # its registration was compacted away: a removed row, which delivers nothing
            endpoints[r.endpoint_id] = WebhookEndpointRow(
                r.endpoint_id, r.tenant, "", [], "", 0, None, event.occurred_at, event.occurred_at,
                event.occurred_at, r.reason, event.event_id,
            )  # fmt: skip
        else:
            known.removed_at, known.removed_reason = event.occurred_at, r.reason
            known.updated_at, known.last_event_id = event.occurred_at, event.event_id
        return
    if known is not None and known.updated_at > event.occurred_at:
        return  # an older record of it
    e = event.payload
    endpoints[e.endpoint_id] = WebhookEndpointRow(
        e.endpoint_id, e.tenant, e.url, list(e.event_types), e.description, e.secret_generation,
        e.previous_secret_until, e.created_at, event.occurred_at, None, None, event.event_id, e.disabled_reason,
    )  # fmt: skip


def account_event(
    keys: dict[str, ApiKeyRow],
    endpoints: dict[uuid.UUID, WebhookEndpointRow],
    deliveries: dict[uuid.UUID, WebhookDeliveryRow],
    event: ApiKeyIssued | ApiKeyRevoked | WebhookEndpointSet | WebhookEndpointRemoved | WebhookDeliveryRecorded,
) -> None:
    """A tenant's key, webhook endpoint or delivery changed."""
    if isinstance(event, ApiKeyIssued | ApiKeyRevoked):
        key_event(keys, event)
    elif isinstance(event, WebhookDeliveryRecorded):
        delivery_recorded(deliveries, event)
    else:
        webhook_event(endpoints, event)


def delivery_recorded(deliveries: dict[uuid.UUID, WebhookDeliveryRow], event: WebhookDeliveryRecorded) -> None:
    d = event.payload
    known = deliveries.get(d.delivery_id)
    if known is not None and (known.updated_at > event.occurred_at or known.last_event_id == event.event_id):
        return
    deliveries[d.delivery_id] = WebhookDeliveryRow(
        d.delivery_id, d.endpoint_id, d.tenant, d.event_type, d.job_id, d.document_id, d.body, d.traceparent,
        d.created_at, d.state, d.attempts, d.next_attempt_at, d.last_status, d.last_error, d.last_duration_ms,
        event.occurred_at, event.event_id,
    )  # fmt: skip


def _day(usage: dict[tuple[str, date], UsageRow], tenant: str, day: date) -> UsageRow:
    row = usage.get((tenant, day))
    if row is None:
        row = usage[(tenant, day)] = UsageRow(tenant, day, 0, 0, 0, 0, 0)
    return row


def submitted(usage: dict[tuple[str, date], UsageRow], event: JobQueued) -> None:
    queued = event.payload
    row = _day(usage, queued.tenant, queued.submitted_at.date())
    row.requests += 1
    row.chars += len(queued.request.text)


def completed(usage: dict[tuple[str, date], UsageRow], job: JobRow, event: JobCompleted) -> None:
    row = _day(usage, job.tenant, job.submitted_at.date())
    if event.payload.cache_hit:
        row.audio_ms_reused += event.payload.total_duration_ms
    else:
        row.syntheses += 1
        row.audio_ms_synthesized += event.payload.total_duration_ms
