"""A document's webhook outcome (consumers.webhook_documents, through consumers.webhook_reader): decided by the
part outcome that ends the document, the same delivery whichever part decides it, none while a part is live
or once the document was cancelled, and an outcome that waits while the document's record is not projected."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from consumers.webhook_documents import document_deliveries, document_delivery_id
from consumers.webhook_reader import NotProjectedYet, OutcomeReader
from contracts import HEADER_TYPE, JobEvent, JobState, document_part_job_id, encode_event
from foundation.outages import Outage
from projections.reads.webhooks import DocumentFacts, EndpointFacts, JobFacts, PartFacts
from tests.support.api_fakes import PRODUCER, Log
from tests.support.job_logs import _Builder

pytestmark = pytest.mark.unit
T0 = datetime(2026, 12, 5, 12, tzinfo=UTC)
DOC = uuid.UUID(int=40)
BOTH = EndpointFacts(uuid.UUID(int=7), ("document.completed", "document.failed"), T0 - timedelta(days=1))
JOBS_ONLY = EndpointFacts(uuid.UUID(int=8), ("job.completed",), T0 - timedelta(days=1))


def done(seconds: int) -> PartFacts:
    return PartFacts(JobState.COMPLETED, None, T0 + timedelta(seconds=seconds))


def test_a_document_is_delivered_once_every_part_is_done_at_its_last_parts_end():
    silent = PartFacts(JobState.FAILED, "input_rejected", T0 + timedelta(seconds=3))  # a pause, not a failure
    parts = [done(1), silent, done(2)]
    (made,) = document_deliveries(DOC, "acme", parts, [BOTH, JOBS_ONLY], PRODUCER, None)
    assert made.payload.delivery_id == document_delivery_id(BOTH.endpoint_id, DOC, "document.completed")
    assert (made.payload.document_id, made.payload.job_id, made.payload.event_type) == (DOC, None, "document.completed")
    body = json.loads(made.payload.body)
    assert body["data"] == {
        "document_id": str(DOC), "state": "completed", "parts": 3, "failed_parts": 0,
        "audio_url": f"/v1/documents/{DOC}/audio",
    }  # fmt: skip
    assert made.occurred_at == made.payload.created_at == T0 + timedelta(seconds=3), "its last part's end"
    again = document_deliveries(
        DOC, "acme", list(reversed(parts)), [BOTH], PRODUCER, "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    )
    assert (again[0].event_id, again[0].payload.body) == (made.event_id, made.payload.body), "whichever part decided"


def test_a_live_or_cancelled_document_makes_none_and_a_failed_one_is_delivered_at_its_first_failure():
    assert document_deliveries(DOC, "acme", [done(1), None], [BOTH], PRODUCER, None) == [], "a part not projected"
    live = PartFacts(JobState.CLAIMED, None, None)
    assert document_deliveries(DOC, "acme", [done(1), live], [BOTH], PRODUCER, None) == []
    cancelled = PartFacts(JobState.CANCELLED, None, T0)
    assert document_deliveries(DOC, "acme", [done(1), cancelled], [BOTH], PRODUCER, None) == []
    broken = PartFacts(JobState.FAILED, "engine_error", T0 + timedelta(seconds=5))
    (made,) = document_deliveries(DOC, "acme", [done(1), broken, live], [BOTH], PRODUCER, None)
    assert made.payload.event_type == "document.failed"
    assert made.payload.created_at == broken.ended_at
    assert json.loads(made.payload.body)["data"]["failed_parts"] == 1
    assert json.loads(made.payload.body)["data"]["audio_url"] is None
    late = EndpointFacts(uuid.UUID(int=9), ("document.failed",), T0 + timedelta(seconds=6))
    assert document_deliveries(DOC, "acme", [broken], [late], PRODUCER, None) == [], "before it was registered"


@dataclass
class Record:
    value: bytes
    headers: list[tuple[str, bytes]]
    timestamp: int


def record(event: JobEvent) -> Record:
    return Record(encode_event(event), [(HEADER_TYPE, event.type.encode())], int(event.occurred_at.timestamp() * 1000))


class Store:
    def __init__(self) -> None:
        self.jobs: dict[uuid.UUID, JobFacts] = {}
        self.document_row: DocumentFacts | None = None
        self.part_rows: dict[uuid.UUID, PartFacts] = {}

    async def job(self, job_id: uuid.UUID) -> JobFacts | None:
        return self.jobs.get(job_id)

    async def endpoints(self, tenant: str) -> list[EndpointFacts]:
        return [BOTH]

    async def first_endpoint_at(self) -> datetime | None:
        return BOTH.created_at

    async def document(self, document_id: uuid.UUID) -> DocumentFacts | None:
        return self.document_row

    async def parts(self, document_id: uuid.UUID, count: int) -> list[PartFacts | None]:
        return [self.part_rows.get(document_part_job_id(document_id, i)) for i in range(count)]


async def test_the_part_outcome_that_ends_a_document_delivers_it_and_waits_while_its_record_is_not_projected():
    first, last = (_Builder(document_part_job_id(DOC, i)) for i in range(2))
    now = {"occurred_at": datetime.now(UTC)}  # a recent outcome: its document's record is waited for
    first_done, last_done = (part.completed(1, 1).model_copy(update=now) for part in (first, last))
    store = Store()
    reader = OutcomeReader(None, store, Log(), PRODUCER, Outage("test"))  # type: ignore[arg-type]
    for part, event in ((first, first_done), (last, last_done)):
        store.jobs[part.job_id] = JobFacts("acme", "completed", part.fingerprint, event.occurred_at, document_id=DOC)
    store.part_rows[first.job_id] = PartFacts(JobState.COMPLETED, None, first_done.occurred_at)
    with pytest.raises(NotProjectedYet):  # the document's record comes after its parts: not projected yet
        await reader.deliveries([record(first_done)])  # type: ignore[list-item]
    store.document_row = DocumentFacts("acme", 2)
    assert await reader.deliveries([record(first_done)]) == [], "the other part is still live"  # type: ignore[list-item]
    store.part_rows[last.job_id] = PartFacts(JobState.COMPLETED, None, last_done.occurred_at)
    (made,) = await reader.deliveries([record(last_done)])  # type: ignore[list-item]
    assert made.payload.delivery_id == document_delivery_id(BOTH.endpoint_id, DOC, "document.completed")
    (again,) = await reader.deliveries([record(first_done)])  # type: ignore[list-item]  # read again: the same
    assert again.event_id == made.event_id


async def test_a_part_whose_document_was_never_recorded_is_not_waited_for_past_the_bound():
    part = _Builder(document_part_job_id(DOC, 0))
    old = part.completed(1, 1).model_copy(update={"occurred_at": datetime.now(UTC) - timedelta(hours=1)})
    store = Store()
    store.jobs[part.job_id] = JobFacts("acme", "completed", part.fingerprint, old.occurred_at, document_id=DOC)
    reader = OutcomeReader(None, store, Log(), PRODUCER, Outage("test"))  # type: ignore[arg-type]
    assert await reader.deliveries([record(old)]) == []  # type: ignore[list-item]
