"""What every event does to the projection tables: the one definition, as a fold of rows in memory.

:class:`Projection` holds the tables' rows (:mod:`projections.rows`) and
applies events to them in log order: job events through the state machine
(``contracts.job_state.transition``) and deduplicated by event id, node events
by their own clocks. Every writer of the tables folds with it: the live
projector folds each batch onto the rows the batch builds on and writes what
changed (:mod:`projections.batch_apply`), replay folds the whole log and
copies the result in (:mod:`projections.rebuild`), and the audit's
as-of view folds a fingerprint's events. Property tests check the projector's
tables against the pure fold (``contracts.fold``) and against this one.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import date, timedelta
from enum import StrEnum
from typing import Any, Final, TypeGuard, cast

from pydantic_core import to_json

from contracts import (
    ApiKeyIssued,
    ApiKeyRevoked,
    CacheEvicted,
    DocumentSubmitted,
    JobCancelled,
    JobClaimed,
    JobCompleted,
    JobEvent,
    JobFailed,
    JobQueued,
    JobReleased,
    JobState,
    JobStatus,
    LexiconEntryRemoved,
    LexiconEntrySet,
    NodeAnnounced,
    NodeEvent,
    NodeHeartbeat,
    SegmentProduced,
    SegmentProducedPayload,
    ServiceModeSet,
    WebhookDeliveryRecorded,
    WebhookEndpointRemoved,
    WebhookEndpointSet,
)
from contracts.audio_estimate import expected_audio_ms
from contracts.job_state import Fenced, transition
from contracts.word_timings import words_json
from foundation.kafka import RecordPosition
from projections import accounts
from projections.rows import (
    ApiKeyRow,
    CacheRow,
    DocumentRow,
    EventRow,
    HeartbeatRow,
    JobRow,
    LexiconRow,
    ModeRow,
    NodeRow,
    SegmentRow,
    UsageRow,
    WebhookDeliveryRow,
    WebhookEndpointRow,
    document_row,
    event_row,
)


class Outcome(StrEnum):
    """What became of a job event."""

    APPLIED = "applied"
    FENCED = "fenced"  # recorded in job_events, changing nothing else (contracts.job_state)
    DUPLICATE = "duplicate"  # a copy of an event id applied before (a producer's retry): changes nothing


Lookup = tuple[str, object]
"""A table (by name) and the value of its lookup column, or a tuple of values where it has several
(``projections.rows.Table.lookup``)."""

# By the event's class, not isinstance: pydantic's classes answer isinstance through ABCMeta (a negative
# answer costs about 0.1 us per class), a writer asks for every event of every batch, and no event class has
# subclasses.
_NODE_ROWS: Final[dict[type, Callable[[Any], Lookup]]] = {
    NodeAnnounced: lambda e: ("nodes", e.payload.worker_id),
    NodeHeartbeat: lambda e: ("node_heartbeats", e.payload.worker_id),
    ServiceModeSet: lambda e: ("service_modes", (e.payload.mode, e.payload.source)),
    DocumentSubmitted: lambda e: ("documents", e.payload.document_id),
    ApiKeyIssued: lambda e: ("api_keys", e.payload.key_id),
    ApiKeyRevoked: lambda e: ("api_keys", e.payload.key_id),
    LexiconEntrySet: lambda e: ("lexicon", e.payload.word),
    LexiconEntryRemoved: lambda e: ("lexicon", e.payload.word),
    WebhookEndpointSet: lambda e: ("webhook_endpoints", e.payload.endpoint_id),
    WebhookEndpointRemoved: lambda e: ("webhook_endpoints", e.payload.endpoint_id),
    WebhookDeliveryRecorded: lambda e: ("webhook_deliveries", e.payload.delivery_id),
}
_READ_SEGMENTS: Final = frozenset({JobClaimed, SegmentProduced, JobCompleted, JobReleased})  # drop, replace, sum
_READ_CACHE: Final = frozenset({JobCompleted, CacheEvicted})


def builds_on(event: JobEvent | NodeEvent) -> list[Lookup]:
    """The rows the fold of ``event`` reads or replaces: a writer seeds a :class:`Projection` with them."""
    kind = type(event)
    node_row = _NODE_ROWS.get(kind)
    if node_row is not None:
        return [node_row(event)]
    job = cast("JobEvent", event)
    found: list[Lookup] = [("job_events", job.event_id), ("jobs", job.job_id)]
    if kind in _READ_SEGMENTS:
        found.append(("segments", job.job_id))
    if kind in _READ_CACHE:
        found.append(("result_cache", job.fingerprint))
    return found


def is_node_event(event: JobEvent | NodeEvent) -> TypeGuard[NodeEvent]:
    """Whether ``event`` came from the control topic (by its class, as :func:`builds_on` tells)."""
    return type(event) in _NODE_ROWS


def _hold_segment(projection: Projection, row: SegmentRow) -> None:
    projection.segments.setdefault(row.job_id, {})[row.segment_index] = row


_HOLD: Final[dict[type, Callable[[Any, Any], None]]] = {
    JobRow: lambda p, r: p.jobs.__setitem__(r.job_id, r),
    SegmentRow: _hold_segment,
    EventRow: lambda p, r: p.events.__setitem__(r.event_id, r),
    CacheRow: lambda p, r: p.cache.__setitem__(r.fingerprint, r),
    NodeRow: lambda p, r: p.nodes.__setitem__(r.worker_id, r),
    HeartbeatRow: lambda p, r: p.heartbeats.__setitem__(r.worker_id, r),
    ModeRow: lambda p, r: p.modes.__setitem__((r.mode, r.source), r),
    DocumentRow: lambda p, r: p.documents.__setitem__(r.document_id, r),
    ApiKeyRow: lambda p, r: p.api_keys.__setitem__(r.key_id, r),
    UsageRow: lambda p, r: p.usage.__setitem__((r.tenant, r.day), r),
    LexiconRow: lambda p, r: p.lexicon.__setitem__(r.word, r),
    WebhookEndpointRow: lambda p, r: p.webhooks.__setitem__(r.endpoint_id, r),
    WebhookDeliveryRow: lambda p, r: p.deliveries.__setitem__(r.delivery_id, r),
}
"""How a :class:`Projection` holds a row of each table, by the row's class."""


class Projection:
    """Every projected table, as rows in memory."""

    def __init__(self, cache_ttl: timedelta) -> None:
        self._ttl = cache_ttl
        self.jobs: dict[uuid.UUID, JobRow] = {}
        self.segments: dict[uuid.UUID, dict[int, SegmentRow]] = {}  # job -> index -> row
        self.events: dict[uuid.UUID, EventRow] = {}
        self.cache: dict[str, CacheRow] = {}
        self.nodes: dict[str, NodeRow] = {}
        self.heartbeats: dict[str, HeartbeatRow] = {}
        self.modes: dict[tuple[str, str], ModeRow] = {}
        self.documents: dict[uuid.UUID, DocumentRow] = {}
        self.api_keys: dict[str, ApiKeyRow] = {}
        self.usage: dict[tuple[str, date], UsageRow] = {}  # only what this fold counted (Table.counters)
        self.lexicon: dict[str, LexiconRow] = {}
        self.webhooks: dict[uuid.UUID, WebhookEndpointRow] = {}
        self.deliveries: dict[uuid.UUID, WebhookDeliveryRow] = {}
        self.offsets: dict[tuple[str, int], int] = {}

    def segments_of(self, job_id: uuid.UUID) -> Iterator[SegmentRow]:
        return iter(self.segments.get(job_id, {}).values())

    def all_segments(self) -> Iterator[SegmentRow]:
        return (row for rows in self.segments.values() for row in rows.values())

    def rows(self, table: str) -> Iterable[object]:
        """Every row of ``table`` (a name in ``projections.rows.TABLES``)."""
        tables: dict[str, Callable[[], Iterable[object]]] = {
            "jobs": self.jobs.values,
            "segments": self.all_segments,
            "job_events": self.events.values,
            "result_cache": self.cache.values,
            "nodes": self.nodes.values,
            "node_heartbeats": self.heartbeats.values,
            "service_modes": self.modes.values,
            "documents": self.documents.values,
            "api_keys": self.api_keys.values,
            "usage_daily": self.usage.values,
            "lexicon": self.lexicon.values,
            "webhook_endpoints": self.webhooks.values,
            "webhook_deliveries": self.deliveries.values,
        }
        return tables[table]()

    def keep(self, row: object) -> None:
        """Hold ``row``, as the tables hold it, for the events that follow to build on."""
        hold = _HOLD.get(type(row))
        if hold is None:
            raise TypeError(f"not a projection row: {row!r}")
        hold(self, row)

    def apply(self, event: JobEvent, at: RecordPosition) -> Outcome:
        """Apply one job event read at ``at``: recorded once in ``job_events``, and folded."""
        self.offsets[(at.topic, at.partition)] = at.offset + 1
        if event.event_id in self.events:
            return Outcome.DUPLICATE
        self.events[event.event_id] = event_row(event, at)
        return self._fold(event)

    def _fold(self, event: JobEvent) -> Outcome:
        row = self.jobs.get(event.job_id)
        outcome = transition(JobStatus(JobState(row.state), row.attempt) if row else None, event)
        if isinstance(outcome, Fenced):
            return Outcome.FENCED  # recorded in job_events, and nothing else (a second JobQueued included)
        self._change(row, outcome, event)
        return Outcome.APPLIED

    def _change(self, row: JobRow | None, outcome: JobStatus, event: JobEvent) -> None:
        """What ``event``, which the state machine applies (taking the job to ``outcome``), does to the rows."""
        match event:
            case JobQueued():
                queued = event.payload
                self.jobs[event.job_id] = JobRow(
                    event.job_id, event.fingerprint, outcome.state.value, event.attempt,
                    queued.request.model_dump_json(), queued.idempotency_key, None, False, None, None, None, None,
                    None, None, None, queued.submitted_at, None, None, None, event.occurred_at, event.event_id,
                    tenant=queued.tenant, key_id=queued.key_id,
                    degraded_from=queued.degraded_from.model_dump_json() if queued.degraded_from else None,
                    expected_audio_ms=expected_audio_ms(queued.request),
                    document_id=queued.document_id,
                )  # fmt: skip
                accounts.submitted(self.usage, event)
            case JobClaimed():
                assert row is not None
                row.state, row.attempt, row.worker_id = outcome.state.value, outcome.attempt, event.payload.worker_id
                row.claimed_at = row.updated_at = event.occurred_at
                row.last_event_id, row.release_reason, row.not_before = event.event_id, None, None
                self._drop_segments(event.job_id, lambda attempt: attempt < event.attempt)
            case SegmentProduced():
                self._segment(event, event.payload)
            case JobCompleted():
                assert row is not None
                self._completed(row, event)
            case JobReleased():
                assert row is not None
                release = event.payload
                row.state, row.release_reason, row.not_before = outcome.state.value, release.reason, release.not_before
                row.updated_at, row.last_event_id = event.occurred_at, event.event_id
                # The released attempt's partial segments are discarded.
                self._drop_segments(event.job_id, lambda attempt: attempt <= release.failed_attempt)
            case JobFailed():
                assert row is not None
                row.state = outcome.state.value
                row.error_code, row.error_message = event.payload.reason_code, event.payload.message
                row.failed_at = row.updated_at = event.occurred_at
                row.last_event_id = event.event_id
            case JobCancelled():
                assert row is not None
                row.state, row.cancel_reason = outcome.state.value, event.payload.reason
                row.cancelled_at = row.updated_at = event.occurred_at
                row.last_event_id = event.event_id
            case CacheEvicted():
                # Only the entry it names: a newer result of the fingerprint may have replaced it since.
                cached = self.cache.get(event.fingerprint)
                if cached is not None and cached.job_id == event.job_id:
                    del self.cache[event.fingerprint]

    def _segment(self, e: SegmentProduced | JobCompleted, p: SegmentProducedPayload) -> None:
        rows = self.segments.setdefault(e.job_id, {})
        known = rows.get(p.index)
        if known is None or known.attempt < e.attempt:
            rows[p.index] = SegmentRow(
                e.job_id, p.index, e.attempt, p.span.start, p.span.end, p.span.text, p.audio.sha256, p.audio.uri,
                p.duration_ms, p.sample_rate, p.byte_length, e.occurred_at, p.segment_key, p.reused,
                words_json(p.words),
            )  # fmt: skip

    def _completed(self, row: JobRow, e: JobCompleted) -> None:
        p = e.payload
        if p.segment is not None:  # the attempt's last segment rides in its completion (version 3)
            self._segment(e, p.segment)
        accounts.completed(self.usage, row, e)
        row.state = JobState.COMPLETED.value
        row.segment_count, row.total_duration_ms = p.segment_count, p.total_duration_ms
        row.cache_hit, row.source_job_id = p.cache_hit, p.source_job_id
        row.completed_at = row.updated_at = e.occurred_at
        row.last_event_id = e.event_id
        cached = self.cache.get(e.fingerprint)
        if p.cache_hit:
            if cached is not None:
                cached.last_hit_at = max(cached.last_hit_at, e.occurred_at)
            return
        if cached is None or cached.created_at < e.occurred_at:
            total_bytes = sum(s.byte_length for s in self.segments_of(e.job_id))
            self.cache[e.fingerprint] = CacheRow(
                e.fingerprint, e.job_id, p.segment_count, p.total_duration_ms, total_bytes,
                e.occurred_at, e.occurred_at + self._ttl, e.occurred_at,
            )  # fmt: skip

    def _drop_segments(self, job_id: uuid.UUID, doomed: Callable[[int], bool]) -> None:
        rows = self.segments.get(job_id, {})
        for index in [index for index, row in rows.items() if doomed(row.attempt)]:
            del rows[index]

    def _lexicon(self, event: LexiconEntrySet | LexiconEntryRemoved) -> None:
        """A word's entry set or removed, by the record's clock: an older record never replaces a newer one (a
        removal stays a row without phonemes, for that), and a second copy of the one it holds changes nothing."""
        word = event.payload.word
        known = self.lexicon.get(word)
        if known is not None and (known.set_at > event.occurred_at or known.last_event_id == event.event_id):
            return
        phonemes = event.payload.phonemes if isinstance(event, LexiconEntrySet) else None
        self.lexicon[word] = LexiconRow(word, phonemes, event.payload.reason, event.occurred_at, event.event_id)

    def skip(self, at: RecordPosition) -> None:
        """A record that cannot be decoded: the live projector sends it to the DLQ and moves past it."""
        self.offsets[(at.topic, at.partition)] = at.offset + 1

    def apply_node(self, event: NodeEvent, at: RecordPosition) -> None:
        """Apply one node event read at ``at``. Each row keeps its latest record by the record's own clock
        (an older announcement, heartbeat, switch or lexicon entry never replaces a newer one); a document is kept
        once."""
        self.offsets[(at.topic, at.partition)] = at.offset + 1
        match event:
            case DocumentSubmitted():
                # A document is submitted once; a second record of it (a retry) changes nothing.
                self.documents.setdefault(event.payload.document_id, document_row(event))
            case ServiceModeSet():
                m = event.payload
                known_mode = self.modes.get((m.mode, m.source))
                if known_mode is None or known_mode.set_at <= event.occurred_at:
                    self.modes[(m.mode, m.source)] = ModeRow(
                        m.mode, m.source, m.enabled, m.reason, event.occurred_at, event.event_id
                    )
            case NodeHeartbeat():
                b = event.payload
                known_beat = self.heartbeats.get(b.worker_id)
                if known_beat is None or known_beat.sent_at <= b.sent_at:
                    self.heartbeats[b.worker_id] = HeartbeatRow(
                        b.worker_id, b.engine, b.model_version, b.device, b.started_at, b.sent_at, b.job_id,
                        b.fingerprint, b.attempt, b.segments_done, b.segments_total, b.text_chars, b.progress_at,
                        b.chars_per_s, b.busy_s, event.event_id, to_json(b.claims).decode(), to_json(b.queue).decode(),
                        to_json(b.queue_counts).decode(),
                    )  # fmt: skip
            case (
                ApiKeyIssued() | ApiKeyRevoked() | WebhookEndpointSet() | WebhookEndpointRemoved()
                | WebhookDeliveryRecorded()
            ):  # fmt: skip
                accounts.account_event(self.api_keys, self.webhooks, self.deliveries, event)
            case LexiconEntrySet() | LexiconEntryRemoved():
                self._lexicon(event)
            case NodeAnnounced():
                a = event.payload
                known = self.nodes.get(a.worker_id)
                # Not a second copy of the announcement it holds (the same event id: a producer's retry).
                if known is None or (known.announced_at <= event.occurred_at and known.last_event_id != event.event_id):
                    self.nodes[a.worker_id] = NodeRow(
                        a.worker_id, a.engine, a.model_version, a.device, a.sample_rate, list(a.voices),
                        list(a.languages), a.started_at, event.occurred_at, event.event_id,
                    )  # fmt: skip
