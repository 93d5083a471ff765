"""Webhook deliveries read from the real projection (issue 39, item 2): ``WebhookDeliveryRecorded`` records
applied by the projector into PostgreSQL's ``webhook_deliveries``, listed by ``WebhookRegistry`` newest first a
page at a time (the cursor's SQL), and redelivered as a new record that the projector folds over the old one."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import asyncpg
from aiokafka.structs import TopicPartition

from contracts import (
    AnyEvent,
    WebhookDeliveryRecorded,
    WebhookDeliveryRecordedPayload,
    WebhookEndpointSet,
    WebhookEndpointSetPayload,
    node_event,
)
from producers.webhooks import WebhookRegistry
from projections.projector import Projector, ProjectorConfig
from tests.support.api_fakes import PRODUCER, Log
from tests.support.records import RecordedDeadLetters, record_of

CONTROL = "control-of-this-test"
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
SIGNING_KEY = b"a server's signing key of at least thirty-two bytes"


class Projected:
    """The test's projector: node events applied in order, as if read from one partition of the control topic."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        config = ProjectorConfig(
            name="deliveries", jobs_topic="jobs-of-this-test", control_topic=CONTROL, cache_ttl=timedelta(days=1),
            max_batch=500,
        )  # fmt: skip
        self.projector = Projector(config, pool, consumer=None, partitions=[], dead_letter=RecordedDeadLetters())  # type: ignore[arg-type]
        self.offset = 0

    async def apply(self, events: Sequence[AnyEvent]) -> None:
        records = []
        for event in events:
            records.append(record_of(event, CONTROL, 0, self.offset))
            self.offset += 1
        await self.projector.apply_batch({TopicPartition(CONTROL, 0): records})


def endpoint(tenant: str) -> WebhookEndpointSet:
    payload = WebhookEndpointSetPayload(
        endpoint_id=uuid.uuid4(), tenant=tenant, url="https://93.184.215.14/hook", event_types=("job.failed",),
        created_at=T0,
    )  # fmt: skip
    return node_event(WebhookEndpointSet, PRODUCER, payload, at=T0)


def delivery(
    endpoint_id: uuid.UUID, tenant: str, n: int, *, made: datetime, job_id: uuid.UUID | None = None, **fields: object
) -> WebhookDeliveryRecorded:
    payload = WebhookDeliveryRecordedPayload(
        delivery_id=uuid.uuid4(), endpoint_id=endpoint_id, tenant=tenant, event_type="job.failed",
        job_id=job_id or uuid.uuid4(), body=json.dumps({"type": "job.failed", "n": n}), created_at=made, **fields,
    )  # fmt: skip
    return node_event(WebhookDeliveryRecorded, PRODUCER, payload, at=made + timedelta(seconds=1))


async def test_deliveries_page_newest_first_through_postgres_and_a_redelivery_is_the_newer_record(pool):
    projected, log = Projected(pool), Log()
    mine, theirs = endpoint("acme"), endpoint("globex")
    e = mine.payload.endpoint_id
    # Seven deliveries, two of them made at the same instant (the cursor breaks the tie by id).
    made = [T0 + timedelta(minutes=n) for n in (0, 1, 2, 3, 3, 4, 5)]
    records = [delivery(e, "acme", n, made=at, state="given_up", attempts=2) for n, at in enumerate(made)]
    await projected.apply([mine, theirs, *records, delivery(theirs.payload.endpoint_id, "globex", 99, made=T0)])
    registry = WebhookRegistry(pool, log, PRODUCER, SIGNING_KEY)
    pages, before = [], None
    while True:
        page = await registry.deliveries("acme", e, limit=3, before=before)
        assert page is not None
        pages.append([d.record.delivery_id for d in page.deliveries])
        if not page.more:
            break
        before = page.deliveries[-1].record.delivery_id
    newest_first = sorted(records, key=lambda r: (r.payload.created_at, r.payload.delivery_id), reverse=True)
    assert [d for p in pages for d in p] == [r.payload.delivery_id for r in newest_first]
    assert [len(p) for p in pages] == [3, 3, 1]
    assert await registry.deliveries("globex", e) is None, "another tenant's endpoint is unknown"
    assert await registry.delivery("acme", theirs.payload.endpoint_id, records[0].payload.delivery_id) is None

    again = await registry.redeliver("acme", e, records[0].payload.delivery_id)
    assert again is not None
    await projected.apply(log.published)
    row = await registry.delivery("acme", e, records[0].payload.delivery_id)
    assert row is not None
    assert row.record == again.record
    assert (row.record.state, row.record.attempts, row.record.body) == ("pending", 2, records[0].payload.body)
    assert row.updated_at == again.updated_at


async def test_the_audit_reads_a_jobs_deliveries_from_the_projection_and_none_when_it_cannot(pool):
    """What `voxlog audit` shows of a job's webhook deliveries: its rows of webhook_deliveries, each as its
    latest record says (another job's are not its)."""
    from projections.job_log import LogAuditor

    projected = Projected(pool)
    mine = endpoint("acme")
    e, job = mine.payload.endpoint_id, uuid.uuid4()
    first = delivery(e, "acme", 0, made=T0, job_id=job)
    second = delivery(e, "acme", 1, made=T0 + timedelta(minutes=1), job_id=job)
    attempted = node_event(
        WebhookDeliveryRecorded,
        PRODUCER,
        first.payload.model_copy(update={"state": "delivered", "attempts": 1, "last_status": 204}),
        at=T0 + timedelta(minutes=2),
    )
    await projected.apply([mine, first, second, delivery(e, "acme", 2, made=T0), attempted])
    auditor = LogAuditor(None, pool, timedelta(days=1))  # type: ignore[arg-type]  # the log is not read
    rows = await auditor.deliveries(job)
    assert rows is not None
    assert [(r.delivery_id, r.state, r.attempts, r.last_status) for r in rows] == [
        (first.payload.delivery_id, "delivered", 1, 204), (second.payload.delivery_id, "pending", 0, None),
    ]  # fmt: skip
    assert await LogAuditor(None, None, timedelta(days=1)).deliveries(job) is None  # type: ignore[arg-type]
