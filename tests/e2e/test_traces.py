"""One trace per request across real processes (issue 30, item 1), exported to a real OTLP/HTTP receiver.

The API, a worker (bench-sleep) and the projector export to tests.support.otlp_receiver, which decodes
the OTLP protobuf requests they send: the client's trace holds the request, the attempt with its claim,
segments and completion, and the projector's batch, each record's span named by its ``traceparent``
header; a duplicate coalesced onto that synthesis links to it; the worker's log lines carry the ids.
Skipped without the otel extra (the processes need the SDK).
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path

import httpx
import pytest

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.proto")

import opentelemetry.sdk.trace

from contracts import (
    HEADER_TRACEPARENT,
    decode_event,
    derive_event_id,
    header_value,
    parse_traceparent,
    span_id_of,
)
from foundation.kafka_groups import wait_group_stable
from tests.support.apps import wait_for_job
from tests.support.kafka import read_to_end
from tests.support.otlp_receiver import ReceivedSpan, otlp_receiver
from voxlog.devstack import SOURCE_ROOT

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT = f"00-{CLIENT_TRACE}-00f067aa0ba902b7-01"
OTHER_TRACE = "0af7651916cd43dd8448eb211c80319c"
# Where the test found the SDK, for the processes too (the extra may sit outside the virtualenv).
SDK_PATH = os.pathsep.join([str(SOURCE_ROOT), str(Path(opentelemetry.sdk.trace.__file__).resolve().parents[3])])


def describe(spans: list[ReceivedSpan]) -> str:
    """The trace as docs/monitoring.md shows it: each span under its parent, with its service and duration."""
    start = min(s.start_ns for s in spans)
    children: dict[str | None, list[ReceivedSpan]] = {}
    ids = {s.span_id for s in spans}
    for span in sorted(spans, key=lambda s: s.start_ns):
        children.setdefault(span.parent_span_id if span.parent_span_id in ids else None, []).append(span)
    lines: list[str] = []

    def walk(parent: str | None, depth: int) -> None:
        for span in children.get(parent, []):
            offset, took = (span.start_ns - start) / 1e6, (span.end_ns - span.start_ns) / 1e6
            lines.append(f"{'  ' * depth}{span.name} [{span.service}] +{offset:.1f} ms, {took:.1f} ms")
            walk(span.span_id, depth + 1)

    walk(None, 0)
    return "\n".join(lines)


async def test_a_request_is_one_trace_from_the_api_through_the_worker_to_the_projection(apps, topics):
    with otlp_receiver() as receiver:
        env = {
            "VOXLOG_ENGINE": "bench-sleep",
            "VOXLOG_DEFAULT_ENGINE": "bench-sleep",
            "VOXLOG_BENCH_SYNTH_MS": "300",  # long enough for the duplicate to find the job in synthesis
            "VOXLOG_OTLP_ENDPOINT": receiver.url,
            "PYTHONPATH": SDK_PATH,
        }
        app = apps(**env)
        app.start("projector", ["projector"])
        app.start("worker-0", ["worker"], {"VOXLOG_WORKER_ID": "w0"})
        app.start("api", ["api"])
        await app.wait_ready()
        engine = await app.engine()
        await wait_group_stable(app.kafka, app.synth_group(engine), 1, 120)
        body = {"text": "One trace, from the request to the projection.", "voice": engine["voices"][0]}
        async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
            first, duplicate = await asyncio.gather(
                client.post("/v1/jobs", json=body, headers={"traceparent": CLIENT}),
                client.post("/v1/jobs", json=body, headers={"traceparent": f"00-{OTHER_TRACE}-b7ad6b7169203331-01"}),
            )
            assert first.status_code == duplicate.status_code == 202, (first.text, duplicate.text)
            job_id, duplicate_id = first.json()["job_id"], duplicate.json()["job_id"]
            job, twin = await wait_for_job(client, job_id), await wait_for_job(client, duplicate_id)
        assert job["state"] == twin["state"] == "completed"
        if job["cache_hit"]:  # the worker took the other one first: the same roles, swapped
            job_id, duplicate_id, trace, other = duplicate_id, job_id, OTHER_TRACE, CLIENT_TRACE
        else:
            trace, other = CLIENT_TRACE, OTHER_TRACE

        def complete(spans: list[ReceivedSpan]) -> bool:
            names = {(s.service, s.name) for s in spans if s.trace_id == trace}
            batches = [s for s in spans if s.name == "projection batch" and s.attributes["voxlog.job_id"] == job_id]
            joined = any(s.trace_id == other and s.name == "coalesced completion" for s in spans)
            return (
                {("voxlog-worker", "completion"), ("voxlog-api", "POST /v1/jobs")} <= names
                and any(b.attributes["voxlog.last_event"] == "JobCompleted" for b in batches)
                and joined  # exported in a batch of its own, maybe after the others (CI on 1e2a671)
            )

        receiver.wait_for(complete)
        spans = receiver.in_trace(trace)
        records = await read_to_end(app.kafka, topics.jobs)
        log = app.log("worker-0")
    print(f"\n{describe(spans)}")  # docs/monitoring.md's example trace comes from here (pytest -s)

    by_name = {s.name: s for s in spans}
    server, attempt = by_name["POST /v1/jobs"], by_name["synthesis attempt"]
    queued_span = span_id_of(derive_event_id(uuid.UUID(job_id), "JobQueued", 0))
    assert server.parent_span_id == ("00f067aa0ba902b7" if trace == CLIENT_TRACE else "b7ad6b7169203331")
    assert attempt.parent_span_id == queued_span == by_name["job queued"].span_id  # under the job's JobQueued
    assert by_name["job queued"].parent_span_id == server.span_id
    assert {by_name[n].parent_span_id for n in ("claim", "segment synthesis", "completion")} == {attempt.span_id}
    assert by_name["segment synthesis"].attributes["voxlog.engine"] == "bench-sleep"
    assert by_name["segment synthesis"].attributes["voxlog.segment.rtf"] > 0
    # Every record of the job is in the trace, its span the one its event id gives.
    mine = [r for r in records if str(decode_event(r.value).job_id) == job_id]
    assert {e.type for e in map(decode_event, (r.value for r in mine))} >= {"JobQueued", "JobClaimed", "JobCompleted"}
    for record in mine:
        header = parse_traceparent(header_value(record.headers, HEADER_TRACEPARENT))
        assert header is not None
        assert (header.trace_id, header.span_id) == (trace, span_id_of(decode_event(record.value).event_id))
    completion = next(r for r in mine if decode_event(r.value).type == "JobCompleted")
    assert by_name["completion"].span_id == span_id_of(decode_event(completion.value).event_id)
    batch = next(
        s for s in spans if s.name == "projection batch" and s.attributes["voxlog.last_event"] == "JobCompleted"
    )
    assert batch.parent_span_id == by_name["completion"].span_id  # visible once that batch committed
    # The duplicate's own trace links to the synthesis it joined.
    [joined] = [s for s in receiver.in_trace(other) if s.name == "coalesced completion"]
    assert joined.links == ((trace, by_name["completion"].span_id),)
    # The worker's log lines about the job carry its trace, job, fingerprint and attempt.
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    completed = [line for line in lines if line.get("event") == "job completed" and line.get("job_id") == job_id]
    assert completed
    assert completed[0]["trace_id"] == trace
    assert completed[0]["attempt"] == 1
    assert completed[0]["fingerprint"] == job["fingerprint"]
