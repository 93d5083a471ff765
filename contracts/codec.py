"""JSON encoding of events and the Kafka headers that travel with them.

Headers on every record: ``type`` and ``schema_version`` (so consumers can
filter before decoding) and ``traceparent`` (W3C trace context: the record's
own span in its job's trace, see :mod:`contracts.trace_context`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from pydantic import ValidationError

from contracts.errors import DecodeError
from contracts.events import (
    CURRENT_SCHEMA_VERSIONS,
    EVENT_CLASSES,
    JOB_EVENT_ADAPTER,
    NODE_EVENT_ADAPTER,
    ApiKeyIssued,
    ApiKeyRevoked,
    DocumentSubmitted,
    JobEvent,
    JobQueued,
    LexiconEntryRemoved,
    LexiconEntrySet,
    NodeAnnounced,
    NodeEvent,
    NodeHeartbeat,
    ServiceModeSet,
    WebhookDeliveryRecorded,
    WebhookEndpointRemoved,
    WebhookEndpointSet,
    derive_event_id,
)
from contracts.trace_context import (
    TraceContext,
    is_traceparent,
    new_span_id,
    new_trace,
    parse_traceparent,
    span_id_of,
    trace_of_job,
)
from contracts.upcasting import UPCASTERS, Upcaster, upcast

Headers = list[tuple[str, bytes]]

HEADER_TYPE: Final = "type"
HEADER_SCHEMA_VERSION: Final = "schema_version"
HEADER_TRACEPARENT: Final = "traceparent"

AnyEvent = JobEvent | NodeEvent


def encode_event(event: AnyEvent) -> bytes:
    """The event as compact UTF-8 JSON."""
    return event.model_dump_json().encode()


def record_key(event: AnyEvent) -> bytes:
    """The Kafka key: the fingerprint for job events, the worker id for node announcements."""
    if isinstance(event, NodeAnnounced):
        return event.payload.worker_id.encode()
    if isinstance(event, NodeHeartbeat):  # its own key: compaction keeps the announcement beside it
        return f"heartbeat/{event.payload.worker_id}".encode()
    if isinstance(event, ServiceModeSet):  # compaction keeps each source's latest switch
        return f"mode/{event.payload.mode}/{event.payload.source}".encode()
    if isinstance(event, DocumentSubmitted):  # compaction keeps every document (one record each)
        return f"document/{event.payload.document_id}".encode()
    if isinstance(event, ApiKeyIssued | ApiKeyRevoked):  # compaction keeps a key's last word: its revocation
        return f"key/{event.payload.key_id}".encode()
    if isinstance(event, LexiconEntrySet | LexiconEntryRemoved):  # compaction keeps each word's last word
        return f"lexicon/{event.payload.word}".encode()
    if isinstance(event, WebhookEndpointSet | WebhookEndpointRemoved):  # an endpoint's last word: its removal
        return f"webhook/{event.payload.endpoint_id}".encode()
    if isinstance(event, WebhookDeliveryRecorded):  # compaction keeps each delivery as it stands last
        return f"delivery/{event.payload.delivery_id}".encode()
    return event.fingerprint.encode()


_JOB_EVENTS: Final = tuple(EVENT_CLASSES)


def job_trace(event: JobQueued) -> TraceContext:
    """The trace a job's events continue: its request's (``payload.traceparent``), else its id's (a job queued
    before version 4); the span is the ``JobQueued``'s own, the parent of the job's attempts."""
    recorded = parse_traceparent(event.payload.traceparent)
    trace_id = recorded.trace_id if recorded is not None else trace_of_job(event.job_id)
    return TraceContext(trace_id, span_id_of(event.event_id), recorded.sampled if recorded is not None else True)


def job_trace_of_record(event: JobEvent, traceparent: str | None) -> TraceContext:
    """The trace of ``event``'s job as a record of it tells: a ``JobQueued``'s own (:func:`job_trace`), else
    :func:`job_trace_of` the record's ``traceparent`` header."""
    return job_trace(event) if isinstance(event, JobQueued) else job_trace_of(event.job_id, traceparent)


def job_trace_of(job_id: uuid.UUID, traceparent: str | None = None) -> TraceContext:
    """Job ``job_id``'s trace at its ``JobQueued``'s span, whose id anyone derives alike (the API derives its
    ``JobQueued`` ids from the job): the trace ``traceparent`` names, else the one the job's id gives."""
    header = parse_traceparent(traceparent)
    queued = span_id_of(derive_event_id(job_id, "JobQueued", 0))
    if header is None:
        return TraceContext(trace_of_job(job_id), queued)
    return TraceContext(header.trace_id, queued, header.sampled)


def record_trace(event: AnyEvent, trace: TraceContext | None = None) -> TraceContext:
    """The ``traceparent`` of ``event``'s record: its trace (a ``JobQueued``'s own, else ``trace``, else its
    job's id's) with the span id its event id gives; a node event's is ``trace``'s child, else a new trace."""
    if isinstance(event, JobQueued):
        return job_trace(event)
    if not isinstance(event, _JOB_EVENTS):
        return trace.child(new_span_id()) if trace is not None else new_trace()
    trace_id = trace.trace_id if trace is not None else trace_of_job(event.job_id)
    return TraceContext(trace_id, span_id_of(event.event_id), trace.sampled if trace is not None else True)


def event_headers(event: AnyEvent, traceparent: str | None = None, *, trace: TraceContext | None = None) -> Headers:
    """Kafka headers for ``event``: ``traceparent`` as given when it is well formed (the caller chose the
    record's span), else the record's own span in ``trace`` (:func:`record_trace`)."""
    given = traceparent if traceparent is not None and is_traceparent(traceparent) else None
    return [
        (HEADER_TYPE, event.type.encode()),
        (HEADER_SCHEMA_VERSION, str(event.schema_version).encode()),
        (HEADER_TRACEPARENT, (given or record_trace(event, trace).traceparent).encode()),
    ]


def header_value(headers: Iterable[tuple[str, bytes]] | None, name: str) -> str | None:
    """The first header called ``name``, decoded, or ``None``."""
    for key, value in headers or ():
        if key == name:
            return value.decode("utf-8", errors="replace")
    return None


def decode_event(
    data: bytes | None,
    upcasters: Mapping[tuple[str, int], Upcaster] = UPCASTERS,
) -> JobEvent:
    """Parse a record value into a job event, upcasting older schema versions.

    Raises :class:`DecodeError` with a readable reason for anything that is not
    a valid event, so the caller can route the record to the DLQ.
    """
    if data is not None:
        try:  # a record at the current version, the common case: parsed and validated in one pass
            return JOB_EVENT_ADAPTER.validate_json(data)
        except ValidationError:
            pass  # an older version to upcast, or not an event: the slow path says which
    raw = _load_raw(data, upcasters)
    try:
        return JOB_EVENT_ADAPTER.validate_python(raw)
    except ValidationError as exc:
        raise DecodeError(_describe(exc)) from exc


def decode_node_event(data: bytes | None, upcasters: Mapping[tuple[str, int], Upcaster] = UPCASTERS) -> NodeEvent:
    """Parse a record of the control topic."""
    if data is not None:
        try:
            return NODE_EVENT_ADAPTER.validate_json(data)
        except ValidationError:
            pass
    raw = _load_raw(data, upcasters)
    try:
        return NODE_EVENT_ADAPTER.validate_python(raw)
    except ValidationError as exc:
        raise DecodeError(_describe(exc)) from exc


def _load_raw(data: bytes | None, upcasters: Mapping[tuple[str, int], Upcaster]) -> dict[str, object]:
    if data is None:
        raise DecodeError("record has no value (tombstone)")
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DecodeError(f"value is not UTF-8 JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise DecodeError(f"value is JSON {type(raw).__name__}, expected an object")
    return upcast(raw, CURRENT_SCHEMA_VERSIONS, upcasters)


def _describe(exc: ValidationError) -> str:
    problems: Sequence[str] = [
        f"{'.'.join(map(str, err['loc'])) or '<root>'}: {err['msg']}" for err in exc.errors()[:5]
    ]
    return "invalid event: " + "; ".join(problems)
