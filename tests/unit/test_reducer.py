"""The one projection (projections.reducer): what node events do to their rows, and what a batch must read."""

from __future__ import annotations

import dataclasses
import json
import uuid
from datetime import timedelta

import pytest

from contracts import (
    DocumentChapter,
    DocumentSubmitted,
    DocumentSubmittedPayload,
    LexiconEntrySet,
    LexiconEntrySetPayload,
    WebhookDeliveryRecorded,
    WebhookDeliveryRecordedPayload,
    WebhookEndpointRemoved,
    WebhookEndpointRemovedPayload,
    WebhookEndpointSet,
    WebhookEndpointSetPayload,
    decode_node_event,
    encode_event,
)
from contracts.scheduling import HeldClaim, QueueCount, QueuedJob
from foundation.kafka import RecordPosition
from projections.reducer import Outcome, Projection, builds_on
from projections.rows import TABLES, JobRow, array_literal
from tests.support.events import PRODUCER, T0, heartbeat, key_issued, mode_set, node_announced, one_of_each, request
from tests.support.job_logs import _Builder

AT = RecordPosition("nodes", 0, 0)


def document(document_id: uuid.UUID, title: str) -> DocumentSubmitted:
    payload = DocumentSubmittedPayload(
        document_id=document_id, title=title, markup="plain", chapters=(DocumentChapter(title="One", parts=1),),
        breaks="c", total_chars=5, request=request("Title."), submitted_at=T0,
    )  # fmt: skip
    return DocumentSubmitted(event_id=uuid.uuid4(), occurred_at=T0, producer=PRODUCER, payload=payload)


def test_an_older_announcement_never_replaces_a_newer_one():
    projection = Projection(timedelta(minutes=1))
    newer = node_announced("w1", device="cuda:0").model_copy(update={"occurred_at": T0 + timedelta(seconds=5)})
    older = node_announced("w1", device="cpu")
    tied = node_announced("w1", device="cuda:1").model_copy(update={"occurred_at": newer.occurred_at})
    projection.apply_node(newer, AT)
    projection.apply_node(older, AT)
    assert projection.nodes["w1"].device == "cuda:0"
    projection.apply_node(tied, AT)  # as recent: the later record wins
    assert (projection.nodes["w1"].device, projection.nodes["w1"].last_event_id) == ("cuda:1", tied.event_id)


def test_heartbeats_go_by_their_sent_time_and_modes_by_their_set_time():
    projection = Projection(timedelta(minutes=1))
    for beat in (heartbeat("w1", 3, segments_done=3), heartbeat("w1", 1, segments_done=1)):
        projection.apply_node(beat, AT)
    for switch in (mode_set(True, seconds=2), mode_set(False, seconds=1)):
        projection.apply_node(switch, AT)
    assert projection.heartbeats["w1"].segments_done == 3
    assert projection.modes[("cache_only", "operator")].enabled is True


def test_a_heartbeat_keeps_the_claims_its_worker_holds_and_the_jobs_waiting_on_it_as_json():
    waiting = uuid.UUID(int=8)
    beat = heartbeat(
        "w1",
        2,
        claims=(HeldClaim(job_id=uuid.UUID(int=7), fingerprint="ab" * 32, attempt=1, text_chars=90, running=True),),
        queue=(QueuedJob(job_id=waiting, tenant="acme", priority="interactive", text_chars=12),),
        queue_counts=(QueueCount(tenant="acme", priority="interactive", jobs=1, text_chars=12),),
    )
    projection = Projection(timedelta(minutes=1))
    projection.apply_node(beat, AT)
    row = projection.heartbeats["w1"]
    [claim] = json.loads(row.claims)
    assert (claim["job_id"], claim["text_chars"], claim["running"]) == (str(uuid.UUID(int=7)), 90, True)
    assert json.loads(row.queue) == [
        {"job_id": str(waiting), "tenant": "acme", "priority": "interactive", "text_chars": 12}
    ]
    assert json.loads(row.queue_counts) == [{"tenant": "acme", "priority": "interactive", "jobs": 1, "text_chars": 12}]
    table = next(t for t in TABLES if t.name == "node_heartbeats")
    assert [table.type_of(c) for c in ("claims", "queue", "queue_counts")] == ["jsonb"] * 3


def test_a_version_1_heartbeat_is_projected_with_its_one_job_as_its_one_running_claim():
    job_id = uuid.UUID(int=9)
    raw = json.loads(encode_event(heartbeat("w1", 1)))
    raw["schema_version"] = 1
    for name in ("claims", "queue", "queue_counts"):
        del raw["payload"][name]
    raw["payload"].update(job_id=str(job_id), fingerprint="cd" * 32, attempt=2, text_chars=40)
    projection = Projection(timedelta(minutes=1))
    projection.apply_node(decode_node_event(json.dumps(raw).encode()), AT)
    [claim] = json.loads(projection.heartbeats["w1"].claims)
    assert (claim["job_id"], claim["attempt"], claim["text_chars"], claim["running"]) == (str(job_id), 2, 40, True)
    assert projection.heartbeats["w1"].queue == "[]"


def test_a_document_is_kept_once():
    projection = Projection(timedelta(minutes=1))
    document_id = uuid.uuid4()
    first, retry = document(document_id, "First"), document(document_id, "Retried")
    projection.apply_node(first, AT)
    projection.apply_node(retry, AT)
    assert (projection.documents[document_id].title, projection.documents[document_id].last_event_id) == (
        "First",
        first.event_id,
    )


def test_a_job_event_is_applied_once_and_a_fenced_one_changes_only_the_events():
    projection = Projection(timedelta(minutes=1))
    queued, claimed, *_ = one_of_each()
    assert projection.apply(queued, RecordPosition("jobs", 0, 0)) is Outcome.APPLIED
    assert projection.apply(queued, RecordPosition("jobs", 0, 1)) is Outcome.DUPLICATE
    stale = claimed.model_copy(update={"event_id": uuid.uuid4(), "attempt": 0})
    assert projection.apply(stale, RecordPosition("jobs", 0, 2)) is Outcome.FENCED
    assert projection.jobs[queued.job_id].state == "queued"
    assert set(projection.events) == {queued.event_id, stale.event_id}
    assert projection.offsets == {("jobs", 0): 3}


def test_what_a_batch_reads_names_each_table_by_its_lookup_columns():
    lookups = {table.name: len(table.lookup) for table in TABLES}
    word = LexiconEntrySet(
        event_id=uuid.uuid4(), occurred_at=T0, producer=PRODUCER, payload=LexiconEntrySetPayload(word="a", phonemes="ɐ")
    )
    events = [*one_of_each(), node_announced(), heartbeat(), mode_set(True), document(uuid.uuid4(), "T"), key_issued()]
    events.append(word)
    endpoint = WebhookEndpointSetPayload(
        endpoint_id=uuid.uuid4(),
        tenant="acme",
        url="https://hooks.example.com/",
        event_types=("job.completed",),
        created_at=T0,
    )
    events.append(WebhookEndpointSet(event_id=uuid.uuid4(), occurred_at=T0, producer=PRODUCER, payload=endpoint))
    delivery = WebhookDeliveryRecordedPayload(
        delivery_id=uuid.uuid4(), endpoint_id=endpoint.endpoint_id, tenant="acme", event_type="job.completed",
        body="{}", created_at=T0,
    )  # fmt: skip
    events.append(WebhookDeliveryRecorded(event_id=uuid.uuid4(), occurred_at=T0, producer=PRODUCER, payload=delivery))
    read = [lookup for event in events for lookup in builds_on(event)]
    assert {table for table, _ in read} == {table.name for table in TABLES if not table.counters}
    assert all(lookups[table] == 1 or len(value) == lookups[table] for table, value in read)  # type: ignore[arg-type]


def test_a_row_kept_is_a_row_of_its_table():
    projection = Projection(timedelta(minutes=1))
    queued = one_of_each()[0]
    projection.apply(queued, RecordPosition("jobs", 0, 0))
    copy = Projection(timedelta(minutes=1))
    for table in TABLES:
        for row in projection.rows(table.name):
            copy.keep(row)
    assert copy.jobs == projection.jobs
    assert copy.events == projection.events
    with pytest.raises(TypeError):
        copy.keep(object())


def test_every_column_has_a_sql_type():
    for table in TABLES:
        assert len(table.types) == len(table.columns), table.name
        assert set(table.key) | set(table.lookup) <= set(table.columns), table.name
    jobs = next(table for table in TABLES if table.row_type is JobRow)
    assert jobs.type_of("request") == "jsonb"
    assert jobs.type_of("not_before") == "timestamp with time zone"


def test_an_array_literal_quotes_every_element():
    assert array_literal(['a"b', "c,d", "", "{x}", "back\\slash", "NULL"]) == (
        '{"a\\"b","c,d","","{x}","back\\\\slash","NULL"}'
    )
    assert array_literal([]) == "{}"


def endpoint_event(kind: str, at_s: int, generation: int = 1) -> WebhookEndpointSet | WebhookEndpointRemoved:
    common = {"event_id": uuid.uuid4(), "occurred_at": T0 + timedelta(seconds=at_s), "producer": PRODUCER}
    endpoint = uuid.UUID(int=77)
    if kind == "removed":
        return WebhookEndpointRemoved(
            payload=WebhookEndpointRemovedPayload(endpoint_id=endpoint, tenant="acme"), **common
        )
    payload = WebhookEndpointSetPayload(
        endpoint_id=endpoint, tenant="acme", url="https://hooks.example.com/", event_types=("job.completed",),
        secret_generation=generation, created_at=T0,
    )  # fmt: skip
    return WebhookEndpointSet(payload=payload, **common)


def test_a_webhook_endpoint_follows_its_newest_record_and_a_removal_is_for_good():
    projection = Projection(timedelta(minutes=1))
    rotated = endpoint_event("set", 10, generation=2)
    for n, event in enumerate([endpoint_event("set", 0), rotated, endpoint_event("set", 5, generation=9)]):
        projection.apply_node(event, RecordPosition("nodes", 0, n))
    row = projection.webhooks[uuid.UUID(int=77)]
    assert (row.secret_generation, row.last_event_id) == (2, rotated.event_id), "an older record never wins"
    projection.apply_node(endpoint_event("removed", 20), RecordPosition("nodes", 0, 3))
    projection.apply_node(endpoint_event("set", 30, generation=3), RecordPosition("nodes", 0, 4))
    row = projection.webhooks[uuid.UUID(int=77)]
    assert row.removed_at == T0 + timedelta(seconds=20)
    assert row.secret_generation == 2, "a removed endpoint stays removed"
    forgotten = Projection(timedelta(minutes=1))  # compaction kept only the removal
    forgotten.apply_node(endpoint_event("removed", 20), RecordPosition("nodes", 0, 0))
    assert forgotten.webhooks[uuid.UUID(int=77)].url == ""


def test_a_delivery_is_its_newest_record_and_a_second_copy_changes_nothing():
    projection = Projection(timedelta(minutes=1))

    def recorded(at_s: int, attempts: int, state: str = "pending") -> WebhookDeliveryRecorded:
        payload = WebhookDeliveryRecordedPayload(
            delivery_id=uuid.UUID(int=5), endpoint_id=uuid.UUID(int=6), tenant="acme", event_type="job.failed",
            body="{}", created_at=T0, attempts=attempts, state=state,
        )  # fmt: skip
        return WebhookDeliveryRecorded(
            event_id=uuid.uuid4(), occurred_at=T0 + timedelta(seconds=at_s), producer=PRODUCER, payload=payload
        )

    delivered = recorded(20, 2, "delivered")
    for n, event in enumerate([recorded(0, 0), delivered, recorded(10, 1), delivered]):
        projection.apply_node(event, RecordPosition("nodes", 0, n))
    row = projection.deliveries[uuid.UUID(int=5)]
    assert (row.state, row.attempts, row.last_event_id) == ("delivered", 2, delivered.event_id)


def _folded(log: list) -> Projection:
    projection = Projection(timedelta(hours=1))
    for offset, event in enumerate(log):
        assert projection.apply(event, RecordPosition("jobs", 0, offset)) is Outcome.APPLIED
    return projection


def test_a_completion_carrying_its_last_segment_folds_as_the_segment_and_the_completion_apart():
    """Issue 41, item 2: a worker records an attempt's last segment in its ``JobCompleted`` (version 3), one
    record where there were two; every table but the events' is what the two records made."""
    apart_job, together_job = _Builder(uuid.UUID(int=71)), _Builder(uuid.UUID(int=71))
    apart = [apart_job.queued(), apart_job.claimed(1), apart_job.segment(1, 0), apart_job.segment(1, 1)]
    apart.append(apart_job.completed(1, 2))
    together = [together_job.queued(), together_job.claimed(1), together_job.segment(1, 0)]
    together.append(together_job.completed(1, 2, last=True))
    a, b = _folded(apart), _folded(together)
    for table in TABLES:
        if table.name in ("job_events", "projection_offsets"):
            continue
        rows_a, rows_b = list(a.rows(table.name)), list(b.rows(table.name))  # type: ignore[call-overload]
        if table.name == "segments":  # made at the moment its record says: the completion's, here
            rows_a = [dataclasses.replace(r, produced_at=None) for r in rows_a]
            rows_b = [dataclasses.replace(r, produced_at=None) for r in rows_b]
            assert [r.segment_index for r in rows_b] == [0, 1]
        if table.name in ("jobs", "result_cache"):  # completed a record earlier in the log's clock
            rows_a = [_without_times(r) for r in rows_a]
            rows_b = [_without_times(r) for r in rows_b]
        assert rows_a == rows_b, table.name
    assert [r.type for r in b.rows("job_events")] == ["JobQueued", "JobClaimed", "SegmentProduced", "JobCompleted"]
    cached = next(iter(b.rows("result_cache")))
    assert cached.total_bytes == 2 * 4844, "the carried segment counts in the cached result's bytes"


def _without_times(row: object) -> object:
    times = {f.name: None for f in dataclasses.fields(row) if f.name.endswith("_at")}  # type: ignore[arg-type]
    return dataclasses.replace(row, **times)  # type: ignore[type-var]
