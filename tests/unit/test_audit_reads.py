"""GET /v1/jobs/{id}/events and ?as_of= (issue 40): the projection answers 404 before the log is read, and the
log is read in one of the API's slots, waited for a bounded time (voxlog.composition.api.AUDIT_SLOT_WAIT_S).

The log here is a fake that records what it was asked; tests/integration/test_audit_reads.py counts the records
real reads fetch from Kafka.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Any

from contracts import JobQueued
from foundation.kafka import RecordPosition
from producers.audit_slots import AuditSlots
from projections.audit import LoggedEvent, as_json, history_of
from tests.support.api_fakes import Log, Reader, client, deps
from tests.support.job_logs import _Builder

MOMENT = "2026-11-29T12:00:01Z"


def logged(event: JobQueued) -> list[LoggedEvent]:
    return [LoggedEvent(RecordPosition("jobs", 0, 0), event.occurred_at, event)]


class Audit:
    """The log as the API reads it: every job's history is its one JobQueued; ``gate``, when set, holds each read
    until it opens (``entered`` says one is held)."""

    def __init__(self, *queued: JobQueued, gate: asyncio.Event | None = None) -> None:
        self.queued = {e.job_id: e for e in queued}
        self.reads: list[tuple[str, uuid.UUID, datetime | None]] = []
        self.gate = gate
        self.entered = asyncio.Event()

    async def _read(self, kind: str, job_id: uuid.UUID, since: datetime | None) -> None:
        self.reads.append((kind, job_id, since))
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()

    async def events(self, job_id: uuid.UUID, since: datetime | None = None) -> dict[str, Any] | None:
        await self._read("events", job_id, since)
        event = self.queued.get(job_id)
        return None if event is None else as_json(history_of(job_id, logged(event)))

    async def job_as_of(
        self, job_id: uuid.UUID, moment: datetime, since: datetime | None = None
    ) -> dict[str, Any] | None:
        await self._read("as_of", job_id, since)
        return None


def queued(n: int, tenant: str = "default") -> JobQueued:
    event = _Builder(uuid.UUID(int=n)).queued()
    return event.model_copy(update={"payload": event.payload.model_copy(update={"tenant": tenant})})


async def test_an_unknown_or_another_tenants_job_is_404_from_the_projection_before_the_log_is_read():
    """Issue 40: an unknown id read every record of every partition before its 404 (200,000 of 200,000), an
    existing one a few: a timing oracle. Now both 404s are the projection's, the same as GET /v1/jobs/{id}'s."""
    mine, theirs = queued(1), queued(2, tenant="globex")
    reader = Reader()
    reader.project(mine)
    reader.project(theirs)
    audit = Audit(mine, theirs)
    unknown = uuid.UUID(int=3)
    async with client(deps(reader, Log(), audit=audit)) as http:
        answers = {
            (job_id, path): await http.get(f"/v1/jobs/{job_id}{path}")
            for job_id in (unknown, theirs.job_id)
            for path in ("/events", f"?as_of={MOMENT}")
        }
        own = await http.get(f"/v1/jobs/{mine.job_id}/events")
    assert audit.reads == [("events", mine.job_id, mine.payload.submitted_at)], "the log is read for the own job only"
    assert own.status_code == 200, own.text
    for (job_id, _), answer in answers.items():
        assert answer.status_code == 404, answer.text
        assert answer.json()["detail"] == f"no job {job_id} (a job just submitted appears within a moment)"
    bodies = {answer.text.replace(str(job_id), "ID") for (job_id, _), answer in answers.items()}
    assert len(bodies) == 1, "another tenant's job answers exactly as no job"


async def test_as_of_reads_the_log_from_what_the_projection_says_of_the_job():
    mine = queued(1)
    reader = Reader()
    reader.project(mine)
    audit = Audit(mine)
    async with client(deps(reader, Log(), audit=audit)) as http:
        answer = await http.get(f"/v1/jobs/{mine.job_id}?as_of={MOMENT}")
    assert answer.status_code == 404, "the fake log had nothing then"
    assert answer.json()["detail"].startswith(f"no job {mine.job_id} in the log as of ")
    assert audit.reads == [("as_of", mine.job_id, mine.payload.submitted_at)]


async def test_audit_slot_wait_is_bounded():
    """Issue 40: a read waited for one of the four slots with no bound. Now past its wait (AUDIT_SLOT_WAIT_S) it is a
    503 with Retry-After that says what to do, and the read holding the slot still answers."""
    mine = queued(1)
    reader = Reader()
    reader.project(mine)
    gate = asyncio.Event()
    audit = Audit(mine, gate=gate)
    async with client(deps(reader, Log(), audit=audit, audit_slots=AuditSlots(1, wait_s=0.01))) as http:
        holding = asyncio.create_task(http.get(f"/v1/jobs/{mine.job_id}/events"))
        await asyncio.wait_for(audit.entered.wait(), 30)
        refused = [await http.get(f"/v1/jobs/{mine.job_id}{path}") for path in ("/events", f"?as_of={MOMENT}")]
        plain = await http.get(f"/v1/jobs/{mine.job_id}")
        gate.set()
        held = await holding
    for answer in refused:
        assert answer.status_code == 503, answer.text
        assert answer.headers["Retry-After"] == "5"
        detail = answer.json()["detail"]
        assert "slots for reading the log stayed taken for 0.01 s" in detail, detail
        assert "retry after Retry-After" in detail, detail
    assert plain.status_code == 200, "the projection's answer takes no slot"
    assert held.status_code == 200, held.text
    assert len(audit.reads) == 1, "the refused requests read nothing"
