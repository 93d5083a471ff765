"""The delivery process's read of the jobs topic (consumers.webhook_reader): outcomes only, none from before the
first endpoint, and a batch tried again while the projection does not show its job ended."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest

from consumers.webhook_reader import NotProjectedYet, OutcomeReader
from contracts import HEADER_TYPE, JobEvent, encode_event
from foundation.outages import Outage
from projections.reads.webhooks import EndpointFacts, JobFacts
from tests.support.api_fakes import PRODUCER, Log
from tests.support.job_logs import _Builder

pytestmark = pytest.mark.unit


@dataclass
class Record:
    value: bytes
    headers: list[tuple[str, bytes]]
    timestamp: int


def record(event: JobEvent, at: datetime | None = None) -> Record:
    stamp = int((at or event.occurred_at).timestamp() * 1000)
    return Record(encode_event(event), [(HEADER_TYPE, event.type.encode())], stamp)


class Store:
    def __init__(self, first: datetime | None) -> None:
        self.first, self.jobs, self.asked = first, {}, 0

    async def job(self, job_id: uuid.UUID) -> JobFacts | None:
        self.asked += 1
        return self.jobs.get(job_id)

    async def endpoints(self, tenant: str) -> list[EndpointFacts]:
        return [EndpointFacts(uuid.UUID(int=7), ("job.completed",), self.first)] if self.first else []

    async def first_endpoint_at(self) -> datetime | None:
        return self.first


async def test_only_outcomes_after_the_first_endpoint_are_read_and_an_unprojected_one_waits():
    job = _Builder(uuid.UUID(int=1))
    queued, completed = job.queued(), job.completed(1, 1)
    store = Store(first=completed.occurred_at - timedelta(minutes=5))
    reader = OutcomeReader(None, store, Log(), PRODUCER, Outage("test"))  # type: ignore[arg-type]
    with pytest.raises(NotProjectedYet):
        await reader.deliveries([record(queued), record(completed)])  # type: ignore[list-item]
    store.jobs[job.job_id] = JobFacts("acme", "claimed", job.fingerprint)  # its completion not projected yet
    with pytest.raises(NotProjectedYet):
        await reader.deliveries([record(completed)])  # type: ignore[list-item]
    store.jobs[job.job_id] = JobFacts("acme", "completed", job.fingerprint, completed.occurred_at)
    (made,) = await reader.deliveries([record(queued), record(completed)])  # type: ignore[list-item]
    assert made.payload.job_id == job.job_id
    store.asked = 0
    old = record(completed, at=completed.occurred_at - timedelta(hours=1))  # before any endpoint: not read
    assert await reader.deliveries([old]) == []  # type: ignore[list-item]
    assert await OutcomeReader(None, Store(None), Log(), PRODUCER, Outage("t")).deliveries([record(completed)]) == []  # type: ignore[arg-type, list-item]
    assert store.asked == 0, "no projection read for what no endpoint can want"
