"""The projection tables as a fold of the log, in memory: what replay builds and then copies in whole.

The rows are :mod:`projections.rows`'s dataclasses. :meth:`Projection.apply`
does to them what the live projector's SQL (:mod:`projections.apply`) does to
the tables, event by event: the same state machine
(``contracts.job_state.transition``), the same columns, the same
deduplication by event id. A property test keeps the two equal on generated
logs, and ``voxlog replay --verify`` compares them on a real one.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from enum import StrEnum

from contracts import (
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
    NodeAnnounced,
    NodeEvent,
    NodeHeartbeat,
    SegmentProduced,
    ServiceModeSet,
)
from contracts.job_state import Fenced, transition
from foundation.kafka import RecordPosition
from projections.rows import (
    CacheRow,
    DocumentRow,
    EventRow,
    HeartbeatRow,
    JobRow,
    ModeRow,
    NodeRow,
    SegmentRow,
    document_row,
    event_row,
)


class Applied(StrEnum):
    APPLIED = "applied"
    DUPLICATE = "duplicate"  # this event id was applied before: nothing happens


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
        self.offsets: dict[tuple[str, int], int] = {}

    def segments_of(self, job_id: uuid.UUID) -> Iterator[SegmentRow]:
        return iter(self.segments.get(job_id, {}).values())

    def all_segments(self) -> Iterator[SegmentRow]:
        return (row for rows in self.segments.values() for row in rows.values())

    def apply(self, event: JobEvent, at: RecordPosition) -> Applied | Fenced:
        """Apply one job event read at ``at``; what the projector's statements would do."""
        self.offsets[(at.topic, at.partition)] = at.offset + 1
        if event.event_id in self.events:
            return Applied.DUPLICATE
        self.events[event.event_id] = event_row(event, at)
        return self.fold(event)

    def fold(self, event: JobEvent) -> Applied | Fenced:
        """Change the tables as ``event``, an event not seen before, does (its ``job_events`` row aside)."""
        row = self.jobs.get(event.job_id)
        outcome = transition(JobStatus(JobState(row.state), row.attempt) if row else None, event)
        if isinstance(outcome, Fenced):
            return outcome  # recorded in job_events, and nothing else (a second JobQueued included)
        match event:
            case JobQueued():
                queued = event.payload
                self.jobs[event.job_id] = JobRow(
                    event.job_id, event.fingerprint, outcome.state.value, event.attempt,
                    queued.request.model_dump_json(), queued.idempotency_key, None, False, None, None, None, None,
                    None, None, None, queued.submitted_at, None, None, None, event.occurred_at, event.event_id,
                )  # fmt: skip
            case JobClaimed():
                assert row is not None
                row.state, row.attempt, row.worker_id = outcome.state.value, outcome.attempt, event.payload.worker_id
                row.claimed_at = row.updated_at = event.occurred_at
                row.last_event_id, row.release_reason, row.not_before = event.event_id, None, None
                self._drop_segments(event.job_id, lambda attempt: attempt < event.attempt)
            case SegmentProduced():
                self._segment(event)
            case JobCompleted():
                assert row is not None
                self._completed(row, event)
            case JobReleased():
                assert row is not None
                release = event.payload
                row.state, row.release_reason, row.not_before = outcome.state.value, release.reason, release.not_before
                row.updated_at, row.last_event_id = event.occurred_at, event.event_id
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
        return Applied.APPLIED

    def _segment(self, e: SegmentProduced) -> None:
        p = e.payload
        rows = self.segments.setdefault(e.job_id, {})
        known = rows.get(p.index)
        if known is None or known.attempt < e.attempt:
            rows[p.index] = SegmentRow(
                e.job_id, p.index, e.attempt, p.span.start, p.span.end, p.span.text, p.audio.sha256, p.audio.uri,
                p.duration_ms, p.sample_rate, p.byte_length, e.occurred_at, p.segment_key, p.reused,
            )  # fmt: skip

    def _completed(self, row: JobRow, e: JobCompleted) -> None:
        p = e.payload
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

    def skip(self, at: RecordPosition) -> None:
        """A record that cannot be decoded: the live projector sends it to the DLQ and moves past it."""
        self.offsets[(at.topic, at.partition)] = at.offset + 1

    def apply_node(self, event: NodeEvent, at: RecordPosition) -> None:
        self.offsets[(at.topic, at.partition)] = at.offset + 1
        if isinstance(event, DocumentSubmitted):
            # A document is submitted once; a second record of it (a retry) changes nothing.
            self.documents.setdefault(event.payload.document_id, document_row(event))
            return
        if isinstance(event, ServiceModeSet):
            m = event.payload
            known_mode = self.modes.get((m.mode, m.source))
            if known_mode is None or known_mode.set_at <= event.occurred_at:
                self.modes[(m.mode, m.source)] = ModeRow(
                    m.mode, m.source, m.enabled, m.reason, event.occurred_at, event.event_id
                )
            return
        p = event.payload
        if isinstance(event, NodeHeartbeat):
            known_beat = self.heartbeats.get(p.worker_id)
            if known_beat is None or known_beat.sent_at <= event.payload.sent_at:
                b = event.payload
                self.heartbeats[b.worker_id] = HeartbeatRow(
                    b.worker_id, b.engine, b.model_version, b.device, b.started_at, b.sent_at, b.job_id,
                    b.fingerprint, b.attempt, b.segments_done, b.segments_total, b.text_chars, b.progress_at,
                    b.chars_per_s, b.busy_s, event.event_id,
                )  # fmt: skip
            return
        assert isinstance(event, NodeAnnounced)
        a = event.payload
        known = self.nodes.get(a.worker_id)
        if known is None or (known.announced_at <= event.occurred_at and known.last_event_id != event.event_id):
            self.nodes[a.worker_id] = NodeRow(
                a.worker_id, a.engine, a.model_version, a.device, a.sample_rate, list(a.voices), list(a.languages),
                a.started_at, event.occurred_at, event.event_id,
            )  # fmt: skip
