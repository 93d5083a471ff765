"""The trace a process is working in, and the spans it records there.

Which trace a piece of work belongs to is *ambient*, as the logger is: a
context variable that the API's request middleware and the worker's work on a
job set (:func:`within`), which the Kafka adapter reads to
give every record it sends its span in that trace (:func:`contracts.record_trace`),
and which the JSON logs carry (``trace_id`` beside the ``job_id``,
``fingerprint`` and ``attempt`` bound with it). Threading a tracer through every
port instead would touch every constructor for what is, like a log line, a
side channel.

Spans are described after the fact (:class:`Span`: name, ids, times,
attributes, links) and handed to the process's :class:`SpanSink`: none by
default, the OTLP exporter (:mod:`foundation.otel`) when ``VOXLOG_OTLP_ENDPOINT``
is set. Without a sink a span costs the building of one small object.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Literal, Protocol

import structlog

from contracts import TraceContext

SpanKind = Literal["internal", "server", "producer", "consumer"]
Attribute = str | int | float | bool

_current: ContextVar[TraceContext | None] = ContextVar("voxlog_trace", default=None)


def current() -> TraceContext | None:
    """The span the work in hand belongs to (``None``: none, and a record sent now starts its job's own)."""
    return _current.get()


@contextlib.contextmanager
def within(trace: TraceContext | None, **bound: object) -> Iterator[None]:
    """Work in ``trace``: records sent meanwhile continue it, and log lines carry its ``trace_id`` and ``bound``
    (a job's ``job_id``, ``fingerprint``, ``attempt``)."""
    token = _current.set(trace)
    fields = {**bound, **({"trace_id": trace.trace_id} if trace is not None else {})}
    with structlog.contextvars.bound_contextvars(**{k: _loggable(v) for k, v in fields.items()}):
        try:
            yield
        finally:
            _current.reset(token)


def _loggable(value: object) -> object:
    return str(value) if isinstance(value, uuid.UUID) else value


@dataclass(frozen=True)
class Span:
    """One finished span: ``context`` names its trace and its own id."""

    name: str
    context: TraceContext
    parent_span_id: str | None
    start_ns: int
    end_ns: int
    kind: SpanKind = "internal"
    attributes: Mapping[str, Attribute] = field(default_factory=dict)
    links: tuple[TraceContext, ...] = ()
    error: str | None = None  # the span failed, and why


class SpanSink(Protocol):
    """Port: where a process's finished spans go (an exporter's queue: never blocks the caller)."""

    def export(self, span: Span) -> None: ...

    def close(self) -> None:
        """Send what is queued and stop (at the process's end)."""


_sink: SpanSink | None = None


def export_spans_to(sink: SpanSink | None) -> None:
    """Hand this process's spans to ``sink`` from now on (``None``: keep none). The composition root's call."""
    global _sink  # one per process, as the log handler is
    _sink = sink


def exporting() -> bool:
    """Whether spans go anywhere (work that only describes spans may be skipped otherwise)."""
    return _sink is not None


def record(span: Span) -> None:
    if _sink is not None:
        _sink.export(span)


def now_ns() -> int:
    """The wall clock spans are timed by (epoch nanoseconds, as OTLP has them)."""
    return time.time_ns()


@dataclass
class OpenSpan:
    """A span being timed: :meth:`end` records it, with what is known by then."""

    name: str
    context: TraceContext
    parent_span_id: str | None
    kind: SpanKind = "internal"
    attributes: dict[str, Attribute] = field(default_factory=dict)
    links: tuple[TraceContext, ...] = ()
    start_ns: int = field(default_factory=now_ns)

    def end(
        self, *, error: str | None = None, at_ns: int | None = None, attributes: Mapping[str, Attribute] | None = None
    ) -> None:
        self.attributes.update(attributes or {})
        record(
            Span(
                self.name,
                self.context,
                self.parent_span_id,
                self.start_ns,
                at_ns if at_ns is not None else now_ns(),
                self.kind,
                dict(self.attributes),
                self.links,
                error,
            )
        )


def start_span(
    name: str,
    parent: TraceContext,
    span_id: str | None = None,
    *,
    kind: SpanKind = "internal",
    links: tuple[TraceContext, ...] = (),
    start_ns: int | None = None,
    attributes: Mapping[str, Attribute] | None = None,
) -> OpenSpan:
    """A span of ``parent``'s trace, its child, with ``span_id`` (a recorded event's, say) or a fresh one,
    begun now or at ``start_ns``."""
    opened = OpenSpan(name, parent.child(span_id), parent.span_id, kind, dict(attributes or {}), links)
    if start_ns is not None:
        opened.start_ns = start_ns
    return opened
