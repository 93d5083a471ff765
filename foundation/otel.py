"""Spans exported over OTLP/HTTP by the OpenTelemetry SDK (the optional ``otel`` extra).

Each :class:`foundation.tracing.Span` is handed to the SDK as the finished span
it describes, with the ids voxlog chose for it (a recorded event's span id is
derived from its event id, so that another process can name it as a parent or
a link): no SDK tracer is involved, whose id generator would choose its own.
The SDK's ``BatchSpanProcessor`` sends them from its own thread, so exporting
never holds the event loop, and a collector that is down costs dropped spans,
never a stalled job.
"""

from __future__ import annotations

from typing import Final

from foundation.errors import FoundationError
from foundation.tracing import Span

try:
    from opentelemetry import trace as otel_trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    INSTALLED = True
except ImportError:  # said when an endpoint is set
    INSTALLED = False

EXPORT_DELAY_MS: Final = 1000
"""How long finished spans wait to travel together (the SDK's default is 5 s)."""


class OpenTelemetryMissing(FoundationError):
    """``VOXLOG_OTLP_ENDPOINT`` is set, but the ``otel`` extra is not installed."""


class OtlpSpans:
    """Adapter (:class:`foundation.tracing.SpanSink`): spans to an OTLP/HTTP collector at ``endpoint``
    (its base URL, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` names it: ``/v1/traces`` is appended)."""

    def __init__(self, endpoint: str, service: str, instance: str) -> None:
        if not INSTALLED:
            raise OpenTelemetryMissing(
                "VOXLOG_OTLP_ENDPOINT is set but OpenTelemetry is not installed: pip install 'voxlog[otel]'"
            )
        self._resource = Resource.create({"service.name": f"voxlog-{service}", "service.instance.id": instance})
        exporter = OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")
        self._processor = BatchSpanProcessor(exporter, schedule_delay_millis=EXPORT_DELAY_MS)

    def export(self, span: Span) -> None:
        self._processor.on_end(self._readable(span))

    def _readable(self, span: Span) -> ReadableSpan:
        flags = otel_trace.TraceFlags(otel_trace.TraceFlags.SAMPLED if span.context.sampled else 0)
        trace_id = int(span.context.trace_id, 16)
        parent = None
        if span.parent_span_id is not None:
            parent = otel_trace.SpanContext(trace_id, int(span.parent_span_id, 16), True, flags)
        links = [
            otel_trace.Link(otel_trace.SpanContext(int(link.trace_id, 16), int(link.span_id, 16), True, flags))
            for link in span.links
        ]
        status = (
            otel_trace.Status(otel_trace.StatusCode.ERROR, span.error)
            if span.error is not None
            else otel_trace.Status(otel_trace.StatusCode.UNSET)
        )
        return ReadableSpan(
            name=span.name,
            context=otel_trace.SpanContext(trace_id, int(span.context.span_id, 16), False, flags),
            parent=parent,
            resource=self._resource,
            attributes=dict(span.attributes),
            links=links,
            kind=_KINDS[span.kind],
            status=status,
            start_time=span.start_ns,
            end_time=span.end_ns,
        )

    def close(self) -> None:
        self._processor.shutdown()  # sends what is queued


_KINDS: Final = (
    {
        "internal": otel_trace.SpanKind.INTERNAL,
        "server": otel_trace.SpanKind.SERVER,
        "producer": otel_trace.SpanKind.PRODUCER,
        "consumer": otel_trace.SpanKind.CONSUMER,
    }
    if INSTALLED
    else {}
)


def span_sink(endpoint: str, service: str, instance: str) -> OtlpSpans | None:
    """The process's span sink: the OTLP exporter when ``endpoint`` is set, else none (spans are off)."""
    return OtlpSpans(endpoint, service, instance) if endpoint else None
