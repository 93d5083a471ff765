"""The projection tables, described once: a row dataclass per table and what the writers need to know of it.

Each row dataclass's fields follow its table's columns, in order (the
migrations in ``projections/migrations`` make the tables). :data:`TABLES`
names each table's key, the columns a batch's rows are read by, and the SQL
type of every column, taken from the field's Python type except where one
Python type maps to two SQL types (``jsonb`` beside ``text``, ``bigint`` beside
``integer``). The live projector's writer (:mod:`projections.batch_apply`) and
replay's (:mod:`projections.rebuild`) both build their statements from it; an
integration test keeps it equal to the migrated tables.
"""

from __future__ import annotations

import functools
import json
import operator
import types
import uuid
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import date, datetime
from typing import Final, get_args, get_type_hints

from contracts import DEFAULT_TENANT, DocumentSubmitted, JobEvent
from foundation.kafka import RecordPosition


@dataclass
class JobRow:
    job_id: uuid.UUID
    fingerprint: str
    state: str
    attempt: int
    request: str  # JSON
    idempotency_key: str | None
    worker_id: str | None
    cache_hit: bool
    source_job_id: uuid.UUID | None
    segment_count: int | None
    total_duration_ms: int | None
    release_reason: str | None
    not_before: datetime | None
    error_code: str | None
    error_message: str | None
    submitted_at: datetime
    claimed_at: datetime | None
    completed_at: datetime | None
    failed_at: datetime | None
    updated_at: datetime
    last_event_id: uuid.UUID
    cancelled_at: datetime | None = None
    cancel_reason: str | None = None
    tenant: str = DEFAULT_TENANT
    key_id: str | None = None
    degraded_from: str | None = None  # JSON: the speed and sample rate asked for, when degraded mode changed them
    expected_audio_ms: int = 0  # contracts.audio_estimate: the work the backlog counts
    document_id: uuid.UUID | None = None  # the document the job is a part of


@dataclass
class SegmentRow:
    job_id: uuid.UUID
    segment_index: int
    attempt: int
    span_start: int
    span_end: int
    span_text: str
    audio_sha256: str
    audio_uri: str
    duration_ms: int
    sample_rate: int
    byte_length: int
    produced_at: datetime
    segment_key: str | None
    reused: bool
    words: str | None = None  # JSON (SegmentProduced version 3): contracts.word_timings


@dataclass
class EventRow:
    event_id: uuid.UUID
    job_id: uuid.UUID
    fingerprint: str
    type: str
    schema_version: int
    attempt: int
    occurred_at: datetime
    producer: str
    topic: str
    kafka_partition: int
    kafka_offset: int
    payload: str  # JSON


@dataclass
class CacheRow:
    fingerprint: str
    job_id: uuid.UUID
    segment_count: int
    total_duration_ms: int
    total_bytes: int
    created_at: datetime
    expires_at: datetime
    last_hit_at: datetime


@dataclass
class NodeRow:
    worker_id: str
    engine: str
    model_version: str
    device: str
    sample_rate: int
    voices: list[str]
    languages: list[str]
    started_at: datetime
    announced_at: datetime
    last_event_id: uuid.UUID


@dataclass
class HeartbeatRow:
    worker_id: str
    engine: str
    model_version: str
    device: str
    started_at: datetime
    sent_at: datetime
    job_id: uuid.UUID | None
    fingerprint: str | None
    attempt: int | None
    segments_done: int
    segments_total: int | None
    text_chars: int | None
    progress_at: datetime | None
    chars_per_s: float | None
    busy_s: float
    last_event_id: uuid.UUID
    # JSON (NodeHeartbeat version 2, contracts.scheduling): every claim the worker holds, the first jobs waiting
    # on it in the order it would take them, and every waiting job counted by tenant and priority.
    claims: str = "[]"
    queue: str = "[]"
    queue_counts: str = "[]"


@dataclass
class ModeRow:
    mode: str
    source: str
    enabled: bool
    reason: str
    set_at: datetime
    last_event_id: uuid.UUID


@dataclass
class DocumentRow:
    document_id: uuid.UUID
    title: str
    markup: str
    chapters: str  # JSON
    breaks: str
    part_count: int
    total_chars: int
    request: str  # JSON
    priority: str
    idempotency_key: str | None
    submitted_at: datetime
    last_event_id: uuid.UUID
    tenant: str = DEFAULT_TENANT


@dataclass
class ApiKeyRow:
    key_id: str
    tenant: str
    name: str
    scopes: list[str]
    secret_sha256: str  # empty for a key known only by its revocation (compaction forgot its issue)
    issued_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None
    revoke_reason: str | None
    last_event_id: uuid.UUID


@dataclass
class LexiconRow:
    """A word's latest entry in the server's lexicon; ``phonemes`` is ``None`` once it was removed."""

    word: str
    phonemes: str | None
    reason: str
    set_at: datetime
    last_event_id: uuid.UUID


@dataclass
class WebhookEndpointRow:
    """A tenant's webhook endpoint, as its latest record says; ``removed_at`` is set once it was removed."""

    endpoint_id: uuid.UUID
    tenant: str
    url: str
    event_types: list[str]
    description: str
    secret_generation: int
    previous_secret_until: datetime | None
    created_at: datetime
    updated_at: datetime
    removed_at: datetime | None
    removed_reason: str | None
    last_event_id: uuid.UUID
    disabled_reason: str = ""


@dataclass
class WebhookDeliveryRow:
    """A webhook delivery, as its latest record says."""

    delivery_id: uuid.UUID
    endpoint_id: uuid.UUID
    tenant: str
    event_type: str
    job_id: uuid.UUID | None
    document_id: uuid.UUID | None
    body: str
    traceparent: str | None
    created_at: datetime
    state: str
    attempts: int
    next_attempt_at: datetime | None
    last_status: int | None
    last_error: str
    last_duration_ms: int | None
    updated_at: datetime
    last_event_id: uuid.UUID


@dataclass
class UsageRow:
    """A tenant's use of voxlog on one day (UTC), counted by the day its jobs were submitted."""

    tenant: str
    day: date
    requests: int  # jobs submitted
    chars: int  # their text
    syntheses: int  # of them, completed by a synthesis
    audio_ms_synthesized: int  # the audio those syntheses made
    audio_ms_reused: int  # the audio served from the cache or a coalesced duplicate's synthesis


def event_row(event: JobEvent, at: RecordPosition) -> EventRow:
    """The ``job_events`` row of ``event``, read at ``at``."""
    return EventRow(
        event.event_id,
        event.job_id,
        event.fingerprint,
        event.type,
        event.schema_version,
        event.attempt,
        event.occurred_at,
        f"{event.producer.service}/{event.producer.instance}",
        at.topic,
        at.partition,
        at.offset,
        event.payload.model_dump_json(),
    )


def document_row(event: DocumentSubmitted) -> DocumentRow:
    d = event.payload
    chapters = json.dumps([chapter.model_dump() for chapter in d.chapters])
    return DocumentRow(
        d.document_id, d.title, d.markup, chapters, d.breaks, len(d.breaks), d.total_chars,
        d.request.model_dump_json(), d.priority, d.idempotency_key, d.submitted_at, event.event_id, d.tenant,
    )  # fmt: skip


def columns(row_type: type) -> list[str]:
    return [f.name for f in fields(row_type)]


@functools.cache
def record_of(row_type: type) -> Callable[[object], tuple[object, ...]]:
    """What gives a row's values in column order (not ``dataclasses.astuple``, which deep-copies every value)."""
    return operator.attrgetter(*columns(row_type))


def array_literal(values: list[str]) -> str:
    """A ``text[]`` value as PostgreSQL's array input reads it: every element quoted."""
    return "{" + ",".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values) + "}"


_SQL_TYPES: Final[dict[object, str]] = {
    uuid.UUID: "uuid",
    str: "text",
    int: "integer",
    bool: "boolean",
    float: "double precision",
    datetime: "timestamp with time zone",
    date: "date",
    list[str]: "text[]",
}
"""The SQL type of each Python type of a row's fields, spelled as PostgreSQL's ``format_type`` spells it."""


@dataclass(frozen=True)
class Table:
    name: str
    row_type: type
    key: tuple[str, ...]
    read_by: tuple[str, ...] = ()
    """The columns a batch's writer reads this table's rows by (the key when empty)."""
    json_columns: tuple[str, ...] = ()  # jsonb
    bigint_columns: tuple[str, ...] = ()
    counters: bool = False
    """Its rows are counts a batch adds to (never read by a batch: the fold's rows are the batch's own)."""
    shared: bool = False
    """Events of several partitions may change a row (projections.shared_rows): a batch writes one only at the
    version it read. A key of one column."""

    @property
    def lookup(self) -> tuple[str, ...]:
        return self.read_by or self.key

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(columns(self.row_type))

    @property
    def types(self) -> tuple[str, ...]:
        """The SQL type of each column, in column order."""
        return _types(self)

    def type_of(self, column: str) -> str:
        return self.types[self.columns.index(column)]


@functools.cache
def _types(table: Table) -> tuple[str, ...]:
    hints = get_type_hints(table.row_type)
    found = []
    for name in columns(table.row_type):
        hint = hints[name]
        if isinstance(hint, types.UnionType):  # X | None: the column is nullable, its type is X's
            (hint,) = (member for member in get_args(hint) if member is not type(None))
        if name in table.json_columns:
            found.append("jsonb")
        elif name in table.bigint_columns:
            found.append("bigint")
        else:
            found.append(_SQL_TYPES[hint])
    return tuple(found)


_USAGE_COUNTS: Final = ("requests", "chars", "syntheses", "audio_ms_synthesized", "audio_ms_reused")
TABLES: Final = (
    Table("jobs", JobRow, ("job_id",), json_columns=("request", "degraded_from")),
    # A job's segments are read all at once.
    Table("segments", SegmentRow, ("job_id", "segment_index"), read_by=("job_id",), json_columns=("words",)),
    Table("job_events", EventRow, ("event_id",), json_columns=("payload",), bigint_columns=("kafka_offset",)),
    Table("result_cache", CacheRow, ("fingerprint",), bigint_columns=("total_bytes",), shared=True),
    Table("nodes", NodeRow, ("worker_id",)),
    Table("node_heartbeats", HeartbeatRow, ("worker_id",), json_columns=("claims", "queue", "queue_counts")),
    Table("service_modes", ModeRow, ("mode", "source")),
    Table("documents", DocumentRow, ("document_id",), json_columns=("chapters", "request")),
    Table("api_keys", ApiKeyRow, ("key_id",)),
    Table("lexicon", LexiconRow, ("word",)),
    Table("webhook_endpoints", WebhookEndpointRow, ("endpoint_id",)),
    Table("webhook_deliveries", WebhookDeliveryRow, ("delivery_id",)),
    Table("usage_daily", UsageRow, ("tenant", "day"), bigint_columns=_USAGE_COUNTS, counters=True),
)
"""Every table the projection makes from the log (``projection_offsets`` aside: where it stands in the log)."""
