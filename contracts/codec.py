"""JSON encoding of events and the Kafka headers that travel with them.

Headers on every record: ``type`` and ``schema_version`` (so consumers can
filter before decoding) and ``traceparent`` (W3C trace context).
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from pydantic import ValidationError

from contracts.errors import DecodeError
from contracts.events import (
    CURRENT_SCHEMA_VERSIONS,
    JOB_EVENT_ADAPTER,
    NODE_EVENT_ADAPTER,
    ApiKeyIssued,
    ApiKeyRevoked,
    DocumentSubmitted,
    JobEvent,
    NodeAnnounced,
    NodeEvent,
    NodeHeartbeat,
    ServiceModeSet,
)
from contracts.upcasting import UPCASTERS, Upcaster, upcast

Headers = list[tuple[str, bytes]]

HEADER_TYPE: Final = "type"
HEADER_SCHEMA_VERSION: Final = "schema_version"
HEADER_TRACEPARENT: Final = "traceparent"

_TRACEPARENT: Final = re.compile(r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")


def new_traceparent() -> str:
    """A fresh W3C ``traceparent`` (version 00, sampled)."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


def is_traceparent(value: str) -> bool:
    """Whether ``value`` is a well-formed version-00 ``traceparent``."""
    return bool(_TRACEPARENT.match(value)) and "0" * 32 not in value and "-" + "0" * 16 + "-" not in value


AnyEvent = JobEvent | NodeAnnounced | NodeHeartbeat | ServiceModeSet | DocumentSubmitted | ApiKeyIssued | ApiKeyRevoked


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
    return event.fingerprint.encode()


def event_headers(event: AnyEvent, traceparent: str | None = None) -> Headers:
    """Kafka headers for ``event``; a new trace is started when none is given."""
    trace = traceparent if traceparent is not None and is_traceparent(traceparent) else new_traceparent()
    return [
        (HEADER_TYPE, event.type.encode()),
        (HEADER_SCHEMA_VERSION, str(event.schema_version).encode()),
        (HEADER_TRACEPARENT, trace.encode()),
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
    """Parse a record of the nodes topic."""
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
