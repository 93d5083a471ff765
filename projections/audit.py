"""A job's history as the log tells it: every event, whether it was applied or fenced and why, and its attempts.

The fold is the state machine every reader shares (``contracts.job_state.transition``)
and the same deduplication by event id as the projector, so an audit says what the
projection did with each event without asking the projection. Time in each state
comes from the events' own clocks (``occurred_at``); where each event lies in the log
(partition, offset, the record's timestamp) comes from the log, and so does the job's trace id (its
``JobQueued``'s ``traceparent``, else a record's ``traceparent`` header, else the one its id gives:
``contracts.job_trace``). The one thing an audit shows that is not the log's is the job's webhook deliveries
(:func:`deliveries_json`): the projection's ``webhook_deliveries``, each delivery as its latest record says.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from contracts import (
    CacheEvicted,
    DegradedFrom,
    JobCancelled,
    JobClaimed,
    JobCompleted,
    JobEvent,
    JobFailed,
    JobQueued,
    JobReleased,
    JobState,
    JobStatus,
    SegmentProduced,
    SynthesisRequest,
    job_trace,
    job_trace_of_record,
)
from contracts.job_state import Fenced, event_attempt, transition
from contracts.scheduling import WaitedBehind
from foundation.kafka import RecordPosition
from projections.reducer import Outcome
from projections.rows import WebhookDeliveryRow


@dataclass(frozen=True)
class LoggedEvent:
    """A job event where the log holds it."""

    position: RecordPosition
    appended_at: datetime  # the record's timestamp
    event: JobEvent
    traceparent: str | None = None  # the record's traceparent header


@dataclass(frozen=True)
class AuditEntry:
    logged: LoggedEvent
    outcome: Outcome
    reason: str  # why it was fenced, or which copy it repeats; empty when applied
    state: JobState | None  # the job's state after it


@dataclass
class AttemptRecord:
    attempt: int
    worker_id: str
    host: str | None  # None: a claim recorded before JobClaimed version 2
    device: str
    engine: str
    model_version: str
    claimed_at: datetime
    ended_at: datetime | None = None
    ended_by: str = (
        ""  # "completed", "failed: CODE", "released: REASON", "cancelled (REASON)", "taken over by attempt N"
    )
    segments: int = 0
    fenced: int = 0  # events of this attempt that were fenced (a stalled worker's late work)

    @property
    def seconds(self) -> float | None:
        return None if self.ended_at is None else (self.ended_at - self.claimed_at).total_seconds()


@dataclass(frozen=True)
class StateSpan:
    state: JobState
    attempt: int
    since: datetime
    until: datetime | None  # None: still in it

    @property
    def seconds(self) -> float | None:
        return None if self.until is None else (self.until - self.since).total_seconds()


@dataclass(frozen=True)
class WaitedStretch:
    """What the job waited behind on its worker over one stretch of an attempt, as the worker recorded it:
    ``queued`` before the claim (``JobClaimed``'s ``waited``), ``claimed`` between the claim and the
    completion (``JobCompleted``'s: other jobs' segments between its own)."""

    attempt: int
    stretch: Literal["queued", "claimed"]
    waited: WaitedBehind


@dataclass
class JobHistory:
    job_id: uuid.UUID
    fingerprint: str = ""
    request: SynthesisRequest | None = None
    status: JobStatus | None = None
    entries: list[AuditEntry] = field(default_factory=list)
    attempts: dict[int, AttemptRecord] = field(default_factory=dict)
    spans: list[StateSpan] = field(default_factory=list)
    reused_from: uuid.UUID | None = None  # the job whose synthesis a cache hit or coalesced duplicate served
    evicted: str | None = None  # why its result left the result cache (CacheEvicted), if it did
    cancelled: str | None = None  # why it was cancelled (JobCancelled's reason and message), if it was
    tenant: str | None = None  # who owns it (its JobQueued's tenant)
    degraded_from: DegradedFrom | None = None  # what degraded mode changed in its request, if it did
    waited: list[WaitedStretch] = field(default_factory=list)  # what it waited behind, by its applied events
    trace_id: str | None = None  # its trace (32 hex digits): its JobQueued's, else its first record's

    @property
    def found(self) -> bool:
        return bool(self.entries)


def history_of(job_id: uuid.UUID, logged: Iterable[LoggedEvent]) -> JobHistory:
    """Fold the log's events of ``job_id`` (others are skipped), in log order."""
    history = JobHistory(job_id)
    first_copy: dict[uuid.UUID, RecordPosition] = {}
    for item in logged:
        event = item.event
        if event.job_id != job_id:
            continue
        history.fingerprint = event.fingerprint
        if history.trace_id is None or isinstance(event, JobQueued):
            trace = job_trace(event) if isinstance(event, JobQueued) else job_trace_of_record(event, item.traceparent)
            history.trace_id = trace.trace_id
        seen = first_copy.get(event.event_id)
        if seen is not None:
            repeats = f"repeats {seen.partition}:{seen.offset}"
            history.entries.append(AuditEntry(item, Outcome.DUPLICATE, repeats, _state(history)))
            continue
        first_copy[event.event_id] = item.position
        outcome = transition(history.status, event)
        if isinstance(outcome, Fenced):
            attempt = history.attempts.get(event_attempt(event))
            if attempt is not None:
                attempt.fenced += 1
            reason = f"{outcome.reason}: {outcome.detail}"
            history.entries.append(AuditEntry(item, Outcome.FENCED, reason, _state(history)))
            continue
        _applied(history, event, outcome)
        history.entries.append(AuditEntry(item, Outcome.APPLIED, "", outcome.state))
    return history


def _state(history: JobHistory) -> JobState | None:
    return history.status.state if history.status else None


def _applied(history: JobHistory, event: JobEvent, outcome: JobStatus) -> None:
    before, history.status = history.status, outcome
    if before is None or before.state != outcome.state or isinstance(event, JobClaimed):
        if history.spans:
            last = history.spans[-1]
            history.spans[-1] = StateSpan(last.state, last.attempt, last.since, event.occurred_at)
        history.spans.append(StateSpan(outcome.state, outcome.attempt, event.occurred_at, None))
    _record(history, event, before, history.attempts.get(outcome.attempt))
    if outcome.terminal:
        last = history.spans[-1]
        history.spans[-1] = StateSpan(last.state, last.attempt, last.since, last.since)


def _record(history: JobHistory, event: JobEvent, before: JobStatus | None, current: AttemptRecord | None) -> None:  # noqa: C901 - listed in pyproject.toml
    """What an applied event tells of the job and of its attempt ``current``."""
    match event:
        case JobQueued():
            history.request, history.tenant = event.payload.request, event.payload.tenant
            history.degraded_from = event.payload.degraded_from
        case JobClaimed():
            if before is not None and before.state is JobState.CLAIMED:
                _end(history.attempts.get(before.attempt), event, f"taken over by attempt {event.attempt}")
            claim = event.payload
            if claim.waited is not None:
                history.waited.append(WaitedStretch(event.attempt, "queued", claim.waited))
            history.attempts[event.attempt] = AttemptRecord(
                event.attempt,
                claim.worker_id,
                claim.host,
                claim.device,
                claim.engine,
                claim.model_version,
                event.occurred_at,
            )
        case SegmentProduced():
            if current is not None:
                current.segments += 1
        case JobCompleted():
            if event.payload.segment is not None and current is not None:  # its last segment (version 3)
                current.segments += 1
            if event.payload.waited is not None:
                history.waited.append(WaitedStretch(event.attempt, "claimed", event.payload.waited))
            history.reused_from = event.payload.source_job_id if event.payload.cache_hit else None
            _end(current, event, "completed from a cached result" if event.payload.cache_hit else "completed")
        case JobReleased():
            _end(current, event, f"released: {event.payload.reason}")
        case JobFailed():
            _end(current, event, f"failed: {event.payload.reason_code}")
        case CacheEvicted():
            history.evicted = event.payload.reason
        case JobCancelled():
            cancel = event.payload
            history.cancelled = cancel.reason + (f": {cancel.message}" if cancel.message else "")
            _end(current, event, f"cancelled ({cancel.reason})")


def _end(attempt: AttemptRecord | None, event: JobEvent, how: str) -> None:
    if attempt is not None and attempt.ended_at is None:
        attempt.ended_at, attempt.ended_by = event.occurred_at, how


def _iso(moment: datetime) -> str:
    """RFC 3339 in UTC with ``Z``, as the API's JSON writes times, so that the CLI prints what the API answers."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def as_json(history: JobHistory) -> dict[str, Any]:
    """The history as JSON-ready values: what ``voxlog audit --json`` prints and the API returns."""
    return {
        "job_id": str(history.job_id),
        "trace_id": history.trace_id,
        "tenant": history.tenant,
        "fingerprint": history.fingerprint,
        "state": history.status.state.value if history.status else None,
        "attempt": history.status.attempt if history.status else None,
        "request": history.request.model_dump(mode="json") if history.request else None,
        "degraded_from": history.degraded_from.model_dump(mode="json") if history.degraded_from else None,
        "reused_from": str(history.reused_from) if history.reused_from else None,
        "result_evicted": history.evicted,
        "cancelled": history.cancelled,
        "waited": [
            {"attempt": w.attempt, "stretch": w.stretch, **w.waited.model_dump(mode="json")} for w in history.waited
        ],
        "events": [_entry_json(entry, history.attempts) for entry in history.entries],
        "attempts": [
            {
                "attempt": a.attempt,
                "worker_id": a.worker_id,
                "host": a.host,
                "device": a.device,
                "engine": a.engine,
                "model_version": a.model_version,
                "claimed_at": _iso(a.claimed_at),
                "ended_at": _iso(a.ended_at) if a.ended_at else None,
                "ended_by": a.ended_by or None,
                "seconds": a.seconds,
                "segments": a.segments,
                "fenced_events": a.fenced,
            }
            for a in sorted(history.attempts.values(), key=lambda a: a.attempt)
        ],
        "time_in_state": [
            {
                "state": s.state.value,
                "attempt": s.attempt,
                "since": _iso(s.since),
                "until": _iso(s.until) if s.until else None,
                "seconds": s.seconds,
            }
            for s in history.spans
        ],
    }


def _entry_json(entry: AuditEntry, claims: dict[int, AttemptRecord]) -> dict[str, Any]:
    event, at = entry.logged.event, entry.logged.position
    claim = claims.get(event_attempt(event))
    return {
        "partition": at.partition,
        "offset": at.offset,
        "appended_at": _iso(entry.logged.appended_at),
        "occurred_at": _iso(event.occurred_at),
        "type": event.type,
        "schema_version": event.schema_version,
        "event_id": str(event.event_id),
        "attempt": event_attempt(event),
        "producer": {
            "service": event.producer.service,
            "instance": event.producer.instance,
            "host": claim.host if claim and event.producer.service == "worker" else None,
            "engine": claim.engine if claim else None,
            "model_version": claim.model_version if claim else None,
            "device": claim.device if claim else None,
        },
        "outcome": entry.outcome.value,
        "reason": entry.reason or None,
        "state_after": entry.state.value if entry.state else None,
        "payload": event.payload.model_dump(mode="json"),
    }


DELIVERIES_SOURCE = "the projection's webhook_deliveries (each delivery's latest record), not the log"


def deliveries_json(rows: Sequence[WebhookDeliveryRow] | None) -> dict[str, Any]:
    """A job's webhook deliveries as JSON-ready values (``voxlog audit --json``), oldest first; ``deliveries``
    is null when the projection could not be read. Said to be the projection's: the rest of an audit is the
    log's."""
    listed = None if rows is None else sorted(rows, key=lambda r: (r.created_at, r.delivery_id.bytes))
    return {
        "source": DELIVERIES_SOURCE,
        "deliveries": None
        if listed is None
        else [
            {
                "delivery_id": str(r.delivery_id),
                "endpoint_id": str(r.endpoint_id),
                "event_type": r.event_type,
                "state": r.state,
                "attempts": r.attempts,
                "next_attempt_at": _iso(r.next_attempt_at) if r.next_attempt_at else None,
                "last_status": r.last_status,
                "last_error": r.last_error or None,
                "last_duration_ms": r.last_duration_ms,
                "created_at": _iso(r.created_at),
                "updated_at": _iso(r.updated_at),
            }
            for r in listed
        ],
    }
