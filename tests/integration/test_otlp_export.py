"""The OTLP exporter (foundation.otel) against a real OTLP/HTTP receiver (tests.support.otlp_receiver).

A receiver decoding the protobuf requests, rather than the SDK's in-memory exporter alone: what is
checked is what crosses the wire (ids voxlog chose, parents, links, attributes, an error), which an
in-memory exporter would see before the exporter's encoding. Skipped without the otel extra.
"""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.proto")

from contracts import TraceContext
from foundation.otel import OtlpSpans
from foundation.tracing import Span
from tests.support.otlp_receiver import otlp_receiver

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def test_spans_reach_an_otlp_receiver_with_the_ids_parents_and_links_voxlog_chose():
    with otlp_receiver() as receiver:
        sink = OtlpSpans(receiver.url, "worker", "w-1")
        joined = TraceContext("a" * 32, "b" * 16)
        sink.export(Span("synthesis attempt", TraceContext(TRACE, "1" * 16), "2" * 16, 1_000, 5_000))
        sink.export(
            Span(
                "coalesced completion",
                TraceContext(TRACE, "3" * 16),
                "1" * 16,
                2_000,
                3_000,
                "producer",
                {"voxlog.segments": 2, "voxlog.engine": "fake", "voxlog.segment.rtf": 0.25},
                (joined,),
                error="the log refused it",
            )
        )
        sink.close()  # flushes
        spans = receiver.wait_for(lambda got: len(got) == 2)
    attempt, coalesced = sorted(spans, key=lambda s: s.start_ns)
    assert (attempt.service, attempt.name, attempt.trace_id) == ("voxlog-worker", "synthesis attempt", TRACE)
    assert (attempt.span_id, attempt.parent_span_id) == ("1" * 16, "2" * 16)
    assert (attempt.start_ns, attempt.end_ns) == (1_000, 5_000)
    assert coalesced.parent_span_id == attempt.span_id
    assert coalesced.kind == 4  # SPAN_KIND_PRODUCER
    assert coalesced.attributes == {"voxlog.segments": 2, "voxlog.engine": "fake", "voxlog.segment.rtf": 0.25}
    assert coalesced.links == (("a" * 32, "b" * 16),)
    assert coalesced.error == "the log refused it"
