"""The projection's rows as the API reads them: typed from the query to the handler.

Each row type names the columns it is read from (its fields), so a query
selects exactly them (:func:`columns`) and a reader never indexes a record by
a string literal. ``from_mapping`` builds a row from a record, or from what
the audit folds from the log (``GET /v1/jobs/{id}?as_of=T``), which has the
shape of a ``jobs`` row.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import date, datetime
from typing import Any, ClassVar, Final, Self, get_type_hints

import msgspec

from contracts import DEFAULT_TENANT, TERMINAL_STATES, AudioRef, DegradedFrom, JobState, SynthesisRequest
from contracts.document_state import part_done, part_silent
from projections.rows import TABLES


def columns(row_type: type[Row], *, but: Iterable[str] = (), prefix: str = "") -> str:
    """The row type's columns for a SELECT list (less ``but``, which a query computes itself)."""
    skipped = {*but, *row_type._read_apart}
    return ", ".join(prefix + name for name in row_type.__struct_fields__ if name not in skipped)


class Row(msgspec.Struct, frozen=True, kw_only=True):
    """A row read from a table: its fields are the columns it is read from."""

    _decoded: ClassVar[dict[str, Any]] = {}
    """Columns whose stored form is decoded on the way in, with the decoder of each."""
    _read_apart: ClassVar[tuple[str, ...]] = ()
    """Fields that are not columns of the row's table: read by another query, given to ``from_mapping``."""
    _table: ClassVar[str] = ""
    _computed: ClassVar[tuple[str, ...]] = ()
    """Fields the row's query computes from its columns (``columns(..., but=...)`` leaves them to it)."""
    """The table (of :data:`projections.rows.TABLES`, the one description of what the projector writes) whose
    columns the row's fields are: :func:`not_columns` names any field that is not one."""

    @classmethod
    def from_mapping(cls, row: Mapping[str, Any], **given: Any) -> Self:
        values = {
            name: row[name] for name in cls.__struct_fields__ if name not in given and name not in cls._read_apart
        }
        for name, decode in cls._decoded.items():
            values[name] = decode(values[name])
        return cls(**values, **given)


def not_columns(row_type: type[Row]) -> list[str]:
    """The fields of ``row_type`` that are neither columns of its table nor read apart: none, unless the row and
    the table the projector writes have drifted apart (a test holds every row type to it)."""
    (table,) = [t for t in TABLES if t.name == row_type._table]
    written = {f.name for f in fields(table.row_type)}
    apart = {*row_type._read_apart, *row_type._computed}
    return [name for name in row_type.__struct_fields__ if name not in written and name not in apart]


def mistyped(row_type: type[Row]) -> list[str]:
    """The fields of ``row_type`` whose type is not its column's as the projector writes it (or, for a decoded
    column, what its decoder gives): none, unless the two have drifted apart (a test holds every row type to
    it). With :func:`not_columns`, a read row is its table's description narrowed, never a second one."""
    (table,) = [t for t in TABLES if t.name == row_type._table]
    written, read = get_type_hints(table.row_type), get_type_hints(row_type)
    out = []
    for name in row_type.__struct_fields__:
        if name in row_type._read_apart or name in row_type._computed or name not in written:
            continue
        decode = row_type._decoded.get(name)
        if decode is None:
            expected = written[name]
        else:
            expected = decode if isinstance(decode, type) else get_type_hints(decode)["return"]
        if read[name] != expected:
            out.append(name)
    return out


def _request(stored: str | Mapping[str, Any]) -> SynthesisRequest:
    return SynthesisRequest.model_validate(json.loads(stored) if isinstance(stored, str) else stored)


def _degraded_from(stored: str | Mapping[str, Any] | None) -> DegradedFrom | None:
    if stored is None:
        return None
    return DegradedFrom.model_validate(json.loads(stored) if isinstance(stored, str) else stored)


class StoredSegment(Row, frozen=True, kw_only=True):
    """A segment of a job's audio: its place, where its audio is, how long it lasts and what it says when."""

    _table: ClassVar[str] = "segments"

    segment_index: int
    audio_sha256: str
    audio_uri: str
    duration_ms: int
    span_start: int
    span_text: str
    sample_rate: int
    byte_length: int
    words: str | None = None  # JSON (contracts.word_timings): when each word is said

    @property
    def audio(self) -> AudioRef:
        return AudioRef(sha256=self.audio_sha256, uri=self.audio_uri)


class SegmentRow(StoredSegment, frozen=True, kw_only=True):
    """A ``segments`` row: a job's segment with its text and how it was made."""

    attempt: int
    span_end: int
    produced_at: datetime
    reused: bool


SEGMENT_COLUMNS: Final = columns(SegmentRow)


class JobRecord(Row, frozen=True, kw_only=True):
    """A ``jobs`` row as the API reads it (its request and state decoded; what the projector writes is
    :class:`projections.rows.JobRow`), and the segments that hold its audio (a cache hit's are its source job's)."""

    _table: ClassVar[str] = "jobs"

    _decoded: ClassVar[dict[str, Any]] = {"request": _request, "state": JobState, "degraded_from": _degraded_from}
    _read_apart: ClassVar[tuple[str, ...]] = ("segments", "lexicon_words")

    job_id: uuid.UUID
    fingerprint: str
    state: JobState
    attempt: int
    request: SynthesisRequest
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
    cancelled_at: datetime | None
    cancel_reason: str | None
    tenant: str = DEFAULT_TENANT
    key_id: str | None = None
    degraded_from: DegradedFrom | None = None
    segments: tuple[SegmentRow, ...] = ()
    # The words of its request's pronunciations that the server lexicon holds or held (read with the row by
    # ProjectionReader.job): the operator's entries, applied to the text and never shown to a tenant.
    lexicon_words: tuple[str, ...] = ()

    @property
    def audio_job_id(self) -> uuid.UUID:
        """The job whose segments are this job's audio."""
        return self.source_job_id or self.job_id

    @property
    def ended(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def requested_fingerprint(self) -> str:
        """The fingerprint of the request as its client asked for it (the job's own, unless it was degraded)."""
        if self.degraded_from is None:
            return self.fingerprint
        return self.degraded_from.requested(self.request).fingerprint()


JOB_COLUMNS: Final = columns(JobRecord)


class JobStateRow(Row, frozen=True, kw_only=True):
    """What a reader waiting for a job's audio needs to know of the job between its segments."""

    _table: ClassVar[str] = "jobs"

    _decoded: ClassVar[dict[str, Any]] = {"state": JobState}

    state: JobState
    source_job_id: uuid.UUID | None
    error_code: str | None
    error_message: str | None


class PartRow(Row, frozen=True, kw_only=True):
    """A document part's ``jobs`` row, as a document's progress needs it (``chars``: its text's length)."""

    _table: ClassVar[str] = "jobs"
    _computed: ClassVar[tuple[str, ...]] = ("chars",)

    _decoded: ClassVar[dict[str, Any]] = {"state": JobState}

    job_id: uuid.UUID
    fingerprint: str
    state: JobState
    total_duration_ms: int | None
    error_code: str | None
    chars: int

    @property
    def silent(self) -> bool:
        """The engine found nothing to speak in it (:func:`contracts.document_state.part_silent`)."""
        return part_silent(self)

    @property
    def done(self) -> bool:
        """Its audio (or its pause) is in the document's audio."""
        return part_done(self)


class ChapterRow(msgspec.Struct, frozen=True):
    title: str
    parts: int


def _chapters(stored: str) -> tuple[ChapterRow, ...]:
    return tuple(ChapterRow(c["title"], c["parts"]) for c in json.loads(stored))


class DocumentRow(Row, frozen=True, kw_only=True):
    _table: ClassVar[str] = "documents"
    _decoded: ClassVar[dict[str, Any]] = {"chapters": _chapters, "request": _request}

    document_id: uuid.UUID
    title: str
    markup: str
    chapters: tuple[ChapterRow, ...]
    breaks: str
    part_count: int
    total_chars: int
    request: SynthesisRequest
    priority: str
    idempotency_key: str | None
    submitted_at: datetime
    tenant: str

    def chapter_parts(self, index: int) -> range:
        """The part indexes of chapter ``index``, in reading order."""
        first = sum(chapter.parts for chapter in self.chapters[:index])
        return range(first, first + self.chapters[index].parts)


class UsageRow(Row, frozen=True, kw_only=True):
    """A tenant's use on one day (UTC) of its jobs' submission, as ``usage_daily`` counts it from the log."""

    _table: ClassVar[str] = "usage_daily"

    tenant: str
    day: date
    requests: int
    chars: int
    syntheses: int
    audio_ms_synthesized: int
    audio_ms_reused: int


class LiveResult(msgspec.Struct, frozen=True, kw_only=True):
    """A fingerprint's result in the cache: the job that made it, its audio and its length."""

    job_id: uuid.UUID
    refs: tuple[AudioRef, ...]
    segment_count: int
    total_duration_ms: int


class EngineVoices(msgspec.Struct, frozen=True):
    """An engine's newest announced model version and what its workers offer."""

    engine: str
    model_version: str
    sample_rate: int
    voices: tuple[str, ...]
    languages: tuple[str, ...]
    workers: int


@dataclass(frozen=True)
class StoredKey:
    """An ``api_keys`` row, as the API judges a key by it."""

    key_id: str
    tenant: str
    scopes: frozenset[str]
    secret_sha256: str
    expires_at: datetime | None
    revoked_at: datetime | None
