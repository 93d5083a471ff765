"""One trace per request (issue 30, item 1): the API continues the client's trace, every record of the job
names its own span in it, the worker's attempt and the projector's batch are spans of it, and the logs carry it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import structlog
from litestar.testing import TestClient

from consumers.ledger import Ledger
from contracts import (
    HEADER_TRACEPARENT,
    JobQueued,
    TraceContext,
    decode_event,
    derive_event_id,
    encode_event,
    event_headers,
    header_value,
    job_trace,
    job_trace_of,
    parse_traceparent,
    record_trace,
    span_id_of,
    trace_of_job,
)
from contracts.events import CURRENT_SCHEMA_VERSIONS
from foundation import tracing
from foundation.kafka import KafkaEventPublisher
from producers.app import create_app
from producers.request_trace import TRACERESPONSE
from projections.batch_spans import record_batch_spans
from tests.support.api_fakes import Log, Reader, deps
from tests.support.job_logs import _Builder
from tests.support.records import raw_record
from tests.unit.test_job_runner import attempt, setup

pytestmark = pytest.mark.unit

CLIENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


class Spans:
    """A span sink that keeps what it is handed."""

    def __init__(self) -> None:
        self.spans: list[tracing.Span] = []

    def export(self, span: tracing.Span) -> None:
        self.spans.append(span)

    def close(self) -> None:
        return None

    def named(self, name: str) -> list[tracing.Span]:
        return [s for s in self.spans if s.name == name]


@pytest.fixture
def spans() -> Iterator[Spans]:
    sink = Spans()
    tracing.export_spans_to(sink)
    try:
        yield sink
    finally:
        tracing.export_spans_to(None)


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",  # no flags
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff is invalid
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # all-zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # all-zero span id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",  # version 00 has four fields
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",  # 31 digits
    ],
)
def test_a_malformed_traceparent_is_not_continued(value):
    assert parse_traceparent(value) is None


def test_a_traceparent_is_read_as_the_w3c_spec_says():
    assert parse_traceparent(CLIENT) == TraceContext(CLIENT_TRACE, "00f067aa0ba902b7", True)
    assert parse_traceparent(CLIENT[:-2] + "00").sampled is False  # type: ignore[union-attr]
    later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-whatever-comes"
    assert parse_traceparent(later) == TraceContext(CLIENT_TRACE, "00f067aa0ba902b7", True)  # read by its prefix


def test_every_record_of_a_job_names_its_own_span_in_the_requests_trace():
    job = _Builder(uuid.UUID(int=5))
    queued = job.queued()
    traced = queued.model_copy(update={"payload": queued.payload.model_copy(update={"traceparent": CLIENT})})
    trace = job_trace(traced)
    assert trace == TraceContext(CLIENT_TRACE, span_id_of(traced.event_id))
    claimed, segment = job.claimed(1), job.segment(1, 0)
    spans = {record_trace(e, trace).span_id for e in (traced, claimed, segment)}
    assert {record_trace(e, trace).trace_id for e in (traced, claimed, segment)} == {CLIENT_TRACE}
    assert spans == {span_id_of(e.event_id) for e in (traced, claimed, segment)}  # each its own, derived
    assert (
        header_value(event_headers(claimed, trace=trace), HEADER_TRACEPARENT)
        == record_trace(claimed, trace).traceparent
    )


def test_a_job_queued_before_traces_shares_the_trace_its_id_gives():
    """A version-3 ``JobQueued`` upcasts to ``traceparent`` null; its events, and a reader that sees only a later
    record, agree on the trace its id gives and on its ``JobQueued``'s span."""
    job = _Builder(uuid.UUID(int=6))
    raw = encode_event(job.queued()).replace(b'"schema_version":7', b'"schema_version":3')
    for added in (b',"traceparent":null', b',"degraded_from":null', b',"input_format":"text"', b',"pronunciations":{}'):
        raw = raw.replace(added, b"")
    assert b"traceparent" not in raw
    old = decode_event(raw)
    assert isinstance(old, JobQueued)
    assert old.payload.traceparent is None
    assert old.schema_version == CURRENT_SCHEMA_VERSIONS["JobQueued"]
    assert job_trace(old).trace_id == trace_of_job(job.job_id)
    assert record_trace(job.claimed(1)).trace_id == trace_of_job(job.job_id)
    assert job_trace_of(job.job_id) == TraceContext(trace_of_job(job.job_id), job_trace(old).span_id)


def test_a_worker_that_reads_only_a_later_record_of_a_job_finds_its_trace_in_the_header():
    job = _Builder(uuid.UUID(int=7))
    queued_span = span_id_of(derive_event_id(job.job_id, "JobQueued", 0))
    ledger = Ledger(timedelta(minutes=1))
    header = f"00-{CLIENT_TRACE}-{span_id_of(job.claimed(1).event_id)}-01"
    view = ledger.observe(job.claimed(1), 3, header)
    assert view.trace == TraceContext(CLIENT_TRACE, queued_span)


class TracedLog(Log):
    """The jobs log, keeping the trace each record was sent in (what the Kafka adapter reads)."""

    def __init__(self) -> None:
        super().__init__()
        self.traces: list[TraceContext | None] = []

    async def publish_all(self, events: Any, partitions: Any = None) -> None:
        self.traces += [tracing.current()] * len(events)
        await super().publish_all(events, partitions)

    async def publish(self, event: Any, partition: int | None = None) -> None:
        self.traces.append(tracing.current())
        await super().publish(event, partition)


def submit(headers: dict[str, str]) -> tuple[TracedLog, Any]:
    log = TracedLog()
    with TestClient(create_app(deps(Reader(), log))) as client:
        answer = client.post("/v1/jobs", json={"text": "Hello there.", "voice": "af_heart"}, headers=headers)
    assert answer.status_code == 202, answer.text
    return log, answer


def test_the_api_continues_the_clients_trace_onto_the_jobs_queued(spans):
    log, answer = submit({"traceparent": CLIENT})
    [queued] = log.published
    recorded = parse_traceparent(queued.payload.traceparent)
    assert recorded is not None
    assert recorded.trace_id == CLIENT_TRACE
    [server] = spans.named("POST /v1/jobs")
    assert server.kind == "server"
    assert server.parent_span_id == "00f067aa0ba902b7"
    assert recorded.span_id == server.context.span_id  # the job hangs under the request
    assert log.traces == [server.context]  # the adapter sends the record within the request's span
    assert answer.headers[TRACERESPONSE] == server.context.traceparent
    assert server.attributes["http.response.status_code"] == 202
    [job] = spans.named("job queued")  # the parent of the job's attempts, under the request
    assert (job.context.span_id, job.parent_span_id) == (span_id_of(queued.event_id), server.context.span_id)


def test_a_request_without_a_trace_starts_one():
    log, answer = submit({"traceparent": "garbage"})
    [queued] = log.published
    started = parse_traceparent(answer.headers[TRACERESPONSE])
    assert started is not None
    assert started.trace_id != CLIENT_TRACE
    assert queued.payload.traceparent == started.traceparent


def test_the_kafka_adapter_gives_a_record_its_span_in_the_trace_in_hand():
    job = _Builder(uuid.UUID(int=8))
    claimed = job.claimed(1)
    trace = TraceContext(CLIENT_TRACE, "1111111111111111")
    with tracing.within(trace):
        header = header_value(KafkaEventPublisher._headers(claimed), HEADER_TRACEPARENT)
    assert header == f"00-{CLIENT_TRACE}-{span_id_of(claimed.event_id)}-01"


def test_log_lines_within_a_job_carry_its_trace_id_job_id_fingerprint_and_attempt():
    trace = TraceContext(CLIENT_TRACE, "1111111111111111")
    job_id = uuid.UUID(int=3)
    with tracing.within(trace, job_id=job_id, fingerprint="fp", attempt=2):
        bound = structlog.contextvars.get_contextvars()
    assert bound == {"trace_id": CLIENT_TRACE, "job_id": str(job_id), "fingerprint": "fp", "attempt": 2}
    assert structlog.contextvars.get_contextvars() == {}
    assert tracing.current() is None


async def test_an_attempt_is_a_span_of_its_jobs_trace_with_one_span_per_record(spans):
    runner, log, ledger, view, _ = setup()
    view.trace = TraceContext(CLIENT_TRACE, "2222222222222222")
    assert (await runner.run(attempt(ledger, view))).kind == "completed"
    [run] = spans.named("synthesis attempt")
    assert run.parent_span_id == "2222222222222222"
    assert run.context.trace_id == CLIENT_TRACE
    assert run.attributes["voxlog.outcome"] == "completed"
    assert run.attributes["voxlog.engine"] == "fake"
    claim, first, completion = log.events  # the last segment rides in the completion (JobCompleted 3)
    assert completion.payload.segment.index == 1
    assert [s.context.span_id for s in spans.named("claim")] == [span_id_of(claim.event_id)]
    segments = spans.named("segment synthesis")
    second = derive_event_id(completion.job_id, "SegmentProduced", 1, 1)  # a span of its own, as ever
    assert [s.context.span_id for s in segments] == [span_id_of(first.event_id), span_id_of(second)]
    assert [s.attributes["voxlog.segment.chars"] for s in segments] == [3, 6]  # "Two", "words."
    assert all(s.attributes["voxlog.segment.rtf"] >= 0 for s in segments)
    [done] = spans.named("completion")
    assert done.context.span_id == span_id_of(completion.event_id)
    children = [*spans.named("claim"), *segments, done]
    assert {s.parent_span_id for s in children} == {run.context.span_id}
    assert {s.context.trace_id for s in spans.spans} == {CLIENT_TRACE}


async def test_a_coalesced_duplicates_trace_links_to_the_synthesis_it_joined(spans):
    runner, log, ledger, view, _ = setup()
    view.trace = TraceContext(CLIENT_TRACE, "2222222222222222")
    await runner.run(attempt(ledger, view))
    duplicate = ledger.observe(_Builder(uuid.UUID(int=10), request_text="Two words.").queued(), 9)
    cached = ledger.live_result(duplicate.fingerprint, view.completion.occurred_at)
    assert cached is not None
    completion = log.events[-1]
    with tracing.within(duplicate.trace):
        await runner.complete_from_cache(duplicate, cached, ledger)
    [joined] = spans.named("coalesced completion")
    assert joined.context.trace_id == duplicate.trace.trace_id != CLIENT_TRACE  # its own request's trace
    assert joined.links == (TraceContext(CLIENT_TRACE, span_id_of(completion.event_id)),)


def test_the_projectors_batch_is_a_span_in_each_trace_it_made_visible(spans):
    one, other = _Builder(uuid.UUID(int=11)), _Builder(uuid.UUID(int=12))
    events = [one.queued(), other.queued(), one.claimed(1)]
    records = [raw_record("jobs", 0, i, encode_event(e), event_headers(e)) for i, e in enumerate(events)]
    record_batch_spans("main", list(zip(records, events, strict=True)), tracing.now_ns())
    batches = spans.named("projection batch")
    assert {s.context.trace_id for s in batches} == {trace_of_job(one.job_id), trace_of_job(other.job_id)}
    mine = next(s for s in batches if s.context.trace_id == trace_of_job(one.job_id))
    assert mine.parent_span_id == span_id_of(events[2].event_id)  # the job's last record in the batch
    assert mine.attributes["voxlog.batch.records"] == 3
    assert mine.attributes["voxlog.batch.job_records"] == 2
