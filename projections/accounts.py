"""The tenants' side of the projection: the API keys, and each tenant's usage by day.

A key's rows follow its two events: ``ApiKeyIssued`` makes the row (a second
copy of it, a producer's retry, changes nothing), ``ApiKeyRevoked`` revokes it
(the first revocation stands). The nodes topic is compacted on the key, so an
old key may be known only by its revocation: it is then a revoked row with no
secret, which nothing can authenticate with.

Usage is counted by the day (UTC) a job was submitted, for its tenant: a
submission adds a request and its characters; its completion adds a synthesis
and its audio, or, for a cache hit or a coalesced duplicate, reused audio. A
batch's counts are added to the stored ones (:attr:`projections.rows.Table.counters`),
so the fold needs no usage row read first; replay folds the whole log into the
totals.
"""

from __future__ import annotations

from datetime import date

from contracts import ApiKeyIssued, ApiKeyRevoked, JobCompleted, JobQueued
from projections.rows import ApiKeyRow, JobRow, UsageRow


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
