"""What GET /v1/jobs/{id}/events and ?as_of= read of the log (issue 40), counted on real Kafka and PostgreSQL.

The reproduction of the issue had 200,000 records in the jobs topic, which keeps everything by default: an
unknown id read all 200,000 before its 404, an existing job 5, and ?as_of= of one's own job read its partition
from offset 0. These tests put 2,000 records of other jobs in the job's partition before it (a smaller count
the suite can afford; what they show is that the records read do not grow with them) and count the records
each read fetches from the broker (``JobLogReader.records_read``).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest_asyncio
from aiokafka.structs import TopicPartition

from contracts import JobEvent, JobQueued, encode_event, event_headers, record_key
from producers.ports import LogAudit
from projections.job_log import JobLogReader, LogAuditor
from projections.projector import Projector, ProjectorConfig
from projections.reads.jobs import ProjectionReader
from tests.support.api_fakes import Log, client, deps
from tests.support.job_logs import _Builder
from tests.support.records import RecordedDeadLetters, record_of

OTHERS = 2_000
TTL = timedelta(days=3650)
LONG_AGO = timedelta(hours=1)


def others(first: int, count: int) -> list[JobEvent]:
    """``count`` other jobs' JobQueued, each of its own fingerprint."""
    return [_Builder(uuid.UUID(int=100_000 + n)).queued() for n in range(first, first + count)]


def of_tenant(event: JobQueued, tenant: str) -> JobQueued:
    return event.model_copy(update={"payload": event.payload.model_copy(update={"tenant": tenant})})


@dataclass
class JobsTopic:
    """The test's jobs topic: everything goes to partition 0, each record stamped with its event's time (others'
    an hour earlier than they happened), and the job's records projected into PostgreSQL."""

    topics: Any
    pool: Any
    reader: JobLogReader

    async def append(self, events: Sequence[JobEvent], *, stamped: timedelta = timedelta(0)) -> list[int]:
        """Append ``events`` to partition 0, stamped ``stamped`` before they happened; their offsets."""
        producer = self.topics.kafka.producer(acks="all", linger_ms=20)
        await producer.start()
        try:
            sent = []
            for e in events:
                stamp = int((e.occurred_at - stamped).timestamp() * 1000)
                value, key, headers = encode_event(e), record_key(e), event_headers(e)
                sent.append(
                    await producer.send(
                        self.topics.jobs, value, key=key, headers=headers, partition=0, timestamp_ms=stamp
                    )
                )
            return [(await future).offset for future in sent]
        finally:
            await producer.stop()

    async def project(self, events: Sequence[JobEvent], offsets: Sequence[int]) -> None:
        """``events`` into the projection, read at ``offsets`` of partition 0 (as the projector would)."""
        config = ProjectorConfig(
            name="audit-reads", jobs_topic=self.topics.jobs, control_topic=self.topics.settings.control_topic,
            cache_ttl=TTL, max_batch=500,
        )  # fmt: skip
        projector = Projector(config, self.pool, consumer=None, partitions=[], dead_letter=RecordedDeadLetters())  # type: ignore[arg-type]
        records = [record_of(e, self.topics.jobs, 0, offset) for e, offset in zip(events, offsets, strict=True)]
        await projector.apply_batch({TopicPartition(self.topics.jobs, 0): records})

    async def append_and_project(self, events: Sequence[JobEvent]) -> list[int]:
        offsets = await self.append(events)
        await self.project(events, offsets)
        return offsets

    def api(self) -> httpx.AsyncClient:
        """The API on the real projection and the real log (no keys: every request is the default tenant's)."""
        audit = LogAudit(LogAuditor(self.reader, self.pool, TTL))
        return client(deps(ProjectionReader(self.pool), Log(), audit=audit))  # type: ignore[arg-type]


@pytest_asyncio.fixture
async def log(topics, pool) -> AsyncIterator[JobsTopic]:  # type: ignore[no-untyped-def]
    yield JobsTopic(topics, pool, JobLogReader(topics.kafka, topics.jobs))


def moment(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


async def test_an_unknown_job_id_reads_no_log_records_before_404(log: JobsTopic):
    """An unknown id, and another tenant's job, are the projection's 404 (the same body), before any record is
    read: no oracle in the time either takes. Before: 2,005 records read of 2,005 for the unknown id."""
    await log.append(others(0, OTHERS), stamped=LONG_AGO)
    mine, theirs = _Builder(uuid.UUID(int=1)), _Builder(uuid.UUID(int=2))
    await log.append_and_project([mine.queued(), mine.claimed(1), mine.segment(1, 0), mine.completed(1, 1)])
    await log.append_and_project([of_tenant(theirs.queued(), "globex")])
    unknown = uuid.UUID(int=3)
    async with log.api() as http:
        answers = {
            (job_id, path): await http.get(f"/v1/jobs/{job_id}{path}")
            for job_id in (unknown, theirs.job_id)
            for path in ("/events", "?as_of=2026-11-29T12:00:01Z")
        }
        assert log.reader.records_read == 0
        own = await http.get(f"/v1/jobs/{mine.job_id}/events")
    assert {answer.status_code for answer in answers.values()} == {404}
    assert len({answer.text.replace(str(job_id), "ID") for (job_id, _), answer in answers.items()}) == 1
    assert own.status_code == 200, own.text
    assert [e["type"] for e in own.json()["events"]] == ["JobQueued", "JobClaimed", "SegmentProduced", "JobCompleted"]
    assert log.reader.records_read == 5, "the own job's four records and the other tenant's one after them"

    before = log.reader.records_read
    assert await LogAuditor(log.reader, log.pool, TTL).events(unknown) is None  # what the API did before
    assert log.reader.records_read - before == OTHERS + 5, "every record of every partition"


async def test_as_of_of_ones_own_job_starts_at_its_first_offset(log: JobsTopic):
    """?as_of= read the job's partition from offset 0: 2,014 records here for a job of 4. Now it reads from the
    job's first offset: the job's 4 and the 10 appended after it, however many came before."""
    await log.append(others(0, OTHERS), stamped=LONG_AGO)
    job = _Builder(uuid.UUID(int=1))
    events = [job.queued(), job.claimed(1), job.segment(1, 0), job.completed(1, 1)]
    offsets = await log.append_and_project(events)
    await log.append(others(OTHERS, 10), stamped=LONG_AGO)
    assert offsets[0] == OTHERS, "the job begins after the others"

    async with log.api() as http:
        claimed = await http.get(f"/v1/jobs/{job.job_id}?as_of={moment(events[1].occurred_at)}")
        read_for_as_of = log.reader.records_read
        history = await http.get(f"/v1/jobs/{job.job_id}/events")
    assert claimed.status_code == 200, claimed.text
    assert (claimed.json()["state"], claimed.json()["attempt"], claimed.json()["segments"]) == ("claimed", 1, [])
    assert read_for_as_of == 4 + 10
    assert history.status_code == 200, history.text
    assert len(history.json()["events"]) == 4
    assert log.reader.records_read - read_for_as_of == 4 + 10

    before = log.reader.records_read
    await log.reader.of_fingerprint(job.fingerprint, {0: 0})  # what ?as_of= read before
    assert log.reader.records_read - before == OTHERS + 4 + 10


async def test_as_of_of_a_cache_hit_reads_its_source_from_the_sources_first_offset(log: JobsTopic):
    """A cache hit's audio is its source job's, which came before it: the source's records are read from its
    first offset (not from offset 0), whether or not the projection has seen the hit complete yet."""
    await log.append(others(0, 500), stamped=LONG_AGO)
    source = _Builder(uuid.UUID(int=1), request_text="Said once.")
    hit = _Builder(uuid.UUID(int=2), request_text="Said once.", clock=100)  # after the source completed
    made = [source.queued(), source.claimed(1), source.segment(1, 0), source.segment(1, 1), source.completed(1, 2)]
    source_offsets = await log.append_and_project(made)
    await log.append(others(500, 1_000), stamped=LONG_AGO)
    queued, completed = hit.queued(), hit.completed(0, 2, cache_hit=True)
    payload = completed.payload.model_copy(update={"source_job_id": source.job_id})
    completed = completed.model_copy(update={"payload": payload})
    reused = [queued, completed]
    hit_offsets = await log.append(reused)
    await log.project(reused[:1], hit_offsets[:1])  # the projector has not reached the completion yet
    from_source = hit_offsets[-1] + 1 - source_offsets[0]

    async with log.api() as http:
        url = f"/v1/jobs/{hit.job_id}?as_of={moment(completed.occurred_at)}"
        lagging = await http.get(url)
        assert log.reader.records_read == len(reused) + from_source, "the hit's records, then its source's"
        await log.project(reused[1:], hit_offsets[1:])
        before = log.reader.records_read
        caught_up = await http.get(url)
    assert log.reader.records_read - before == from_source, "one read, from the source's first offset"
    for answer in (lagging, caught_up):
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert (body["state"], body["cache_hit"], body["source_job_id"]) == ("completed", True, str(source.job_id))
        assert [s["index"] for s in body["segments"]] == [0, 1], "the source's audio"


async def test_a_job_the_projection_cannot_place_is_searched_for_from_its_submission_time(log: JobsTopic):
    """Without the projection (PostgreSQL gone between the API's two reads) the API's audit searches every
    partition from the records appended a margin before the job's submission, not from offset 0."""
    await log.append(others(0, OTHERS), stamped=LONG_AGO)
    job = _Builder(uuid.UUID(int=1))
    queued = job.queued()
    assert isinstance(queued, JobQueued)
    await log.append([queued, job.claimed(1)])
    auditor = LogAuditor(log.reader, None, TTL)

    history = await auditor.events(job.job_id, since=queued.payload.submitted_at)
    assert history is not None
    assert [e["type"] for e in history["events"]] == ["JobQueued", "JobClaimed"]
    assert log.reader.records_read == 2
    past = await auditor.job_as_of(job.job_id, queued.occurred_at, since=queued.payload.submitted_at)
    assert past is not None
    assert past["state"] == "queued"
    assert log.reader.records_read == 2 + 2 + 2, "found from its submission time, then read from its first offset"

    before = log.reader.records_read
    assert await auditor.events(job.job_id) is not None  # voxlog audit without PostgreSQL: every record
    assert log.reader.records_read - before == OTHERS + 2
