"""W3C trace context: one trace per request, one span per recorded event.

A job's trace is the request's: the API continues the client's ``traceparent``
(or starts a trace) and records it in the job's ``JobQueued``
(``payload.traceparent``, version 4). Every record of the job carries, in its
``traceparent`` header, that trace id and a span id of its own *derived from
its event id* (:func:`span_id_of`). Event ids are derived too
(:func:`contracts.events.derive_event_id`), so anyone who knows a job and an
attempt knows the spans of its events without reading their records: a
worker's attempt is the child of its job's ``JobQueued`` span, a coalesced
duplicate links to the completion whose audio it takes, and the same fact
emitted twice is one span.

A job recorded before traces existed (``traceparent`` null) has the trace
:func:`trace_of_job` gives it, derived from its id, so its events still share one.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from dataclasses import dataclass
from typing import Final

_TRACEPARENT: Final = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")
_ZERO_TRACE: Final = "0" * 32
_ZERO_SPAN: Final = "0" * 16


@dataclass(frozen=True)
class TraceContext:
    """A position in a trace: the trace's id and one span's, as a ``traceparent`` names them."""

    trace_id: str  # 32 lower-case hex digits, not all zero
    span_id: str  # 16 lower-case hex digits, not all zero
    sampled: bool = True

    @property
    def traceparent(self) -> str:
        return f"00-{self.trace_id}-{self.span_id}-{'01' if self.sampled else '00'}"

    def child(self, span_id: str | None = None) -> TraceContext:
        """Another span of the same trace (``span_id``, else a fresh one)."""
        return TraceContext(self.trace_id, span_id or new_span_id(), self.sampled)


def new_span_id() -> str:
    return secrets.token_hex(8)


def new_trace() -> TraceContext:
    """The first span of a new trace (sampled)."""
    return TraceContext(secrets.token_hex(16), new_span_id())


def parse_traceparent(value: str | None) -> TraceContext | None:
    """The context a ``traceparent`` names, or ``None`` when it is missing or malformed.

    As the W3C spec asks: version ff and all-zero ids are invalid; a version above 00 is read by its
    first four fields (later versions only append)."""
    if not value:
        return None
    match = _TRACEPARENT.match(value.strip().lower())
    if match is None:
        return None
    version, trace_id, span_id, flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest) or trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None
    return TraceContext(trace_id, span_id, bool(int(flags, 16) & 1))


def is_traceparent(value: str) -> bool:
    """Whether ``value`` is a well-formed version-00 ``traceparent``."""
    return value.startswith("00-") and parse_traceparent(value) is not None


def span_id_of(event_id: uuid.UUID) -> str:
    """The span id of the event ``event_id`` (the first 8 bytes of its sha256, never all zero)."""
    digest = hashlib.sha256(event_id.bytes).hexdigest()[:16]
    return digest if digest != _ZERO_SPAN else "0" * 15 + "1"


def trace_of_job(job_id: uuid.UUID) -> str:
    """The trace id of a job that recorded none (queued before traces): its id's 32 hex digits."""
    return job_id.hex if job_id.hex != _ZERO_TRACE else "0" * 31 + "1"
