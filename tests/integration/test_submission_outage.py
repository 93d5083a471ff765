"""A submission the broker took in part (killed midway) is completed by its retry with the key the 503 names:
never a job twice, never a part without its document (issue 25, item 3).

The broker is a private one (tests.support.stack.PrivateStack) so that it can be killed. The pipeline and the
publisher are the API's own (producers.submission.Submissions over foundation.kafka.ReconnectingPublisher);
the only stand-in is the gate that kills the broker once the first part of the records is acknowledged, so
that "midway" is a fixed point of the test, not a race.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import pytest_asyncio

from contracts import DocumentSubmitted, JobQueued, decode_event, decode_node_event, document_part_job_id
from foundation.kafka import ReconnectingPublisher
from foundation.settings import TopicSettings
from producers.auth import ANONYMOUS
from producers.idempotency import fresh_key, scoped_key
from producers.requests import JobRequest
from producers.submission import Item, Submission, Submissions
from producers.submission_log import SubmissionLog, Unrecorded
from tests.support.api_fakes import LIMITS, PRODUCER, Blobs, Reader
from tests.support.events import document_submitted
from tests.support.kafka import read_to_end
from tests.support.stack import PrivateStack
from voxlog.topics import ensure_topics, topic_specs

TOPICS = TopicSettings(jobs_topic="jobs", control_topic="control", dlq_topic="dlq", jobs_partitions=4)


@pytest_asyncio.fixture
async def broker() -> AsyncIterator[PrivateStack]:
    stack = PrivateStack()
    try:
        await stack.up()
        await ensure_topics(stack.kafka, topic_specs(TOPICS))
        yield stack
    finally:
        stack.down()


class KillsTheBrokerMidway:
    """The job log: the first ``first`` records go through the real publisher, then the broker is killed and
    the rest go to it dead (and fail as they would)."""

    def __init__(self, stack: PrivateStack, inner: ReconnectingPublisher, first: int) -> None:
        self.stack, self.inner, self.first = stack, inner, first
        self.killed = False

    async def publish_all(self, events: Sequence[Any], partitions: Sequence[int | None] | None = None) -> object:
        if self.killed or len(events) <= self.first:
            return await self.inner.publish_all(events)
        await self.inner.publish_all(events[: self.first])
        self.stack.kill_broker()
        self.killed = True
        return await self.inner.publish_all(events[self.first :])

    async def publish(self, event: Any, partition: int | None = None) -> object:
        return await self.publish_all([event], [partition])


def publisher(stack: PrivateStack, topic: str) -> ReconnectingPublisher:
    return ReconnectingPublisher(stack.kafka, topic, client_id=f"test-{topic}", deadline_ms=3000)


async def test_a_batch_the_broker_took_in_part_is_completed_by_its_retry_and_no_job_is_recorded_twice(broker):
    jobs_log = publisher(broker, TOPICS.jobs_topic)
    try:
        gate = KillsTheBrokerMidway(broker, jobs_log, first=40)
        journal = SubmissionLog(gate, LIMITS.max_record_bytes)  # type: ignore[arg-type]
        submissions = Submissions(Reader(), journal, Blobs(), LIMITS, PRODUCER)  # type: ignore[arg-type]
        items = [Item(JobRequest(text=f"Request number {i}.", voice="af_heart"), "batch") for i in range(100)]
        with pytest.raises(Unrecorded) as refused:
            await submissions.submit(Submission(items, fresh_key(None), client_sent_key=False, principal=ANONYMOUS))
        assert refused.value.status == 503
        assert f"Idempotency-Key: {refused.value.key}" in str(refused.value)

        await broker.start_broker()
        retry = scoped_key(refused.value.key, None)  # what the client sends back, scoped as the API scopes it
        retried = await submissions.submit(Submission(items, retry, client_sent_key=True, principal=ANONYMOUS))
    finally:
        await jobs_log.stop()
    assert retried.queued == 100, "nothing is projected here, so the retry sends every job again"

    records = await read_to_end(broker.kafka, TOPICS.jobs_topic)
    copies: dict[uuid.UUID, set[uuid.UUID]] = defaultdict(set)
    for record in records:
        event = decode_event(record.value)
        assert isinstance(event, JobQueued)
        copies[event.job_id].add(event.event_id)
    assert set(copies) == {a.job_id for a in retried.answers}, "the retry named the jobs the first try recorded"
    assert len(copies) == 100
    assert all(len(ids) == 1 for ids in copies.values()), "a job sent twice is one fact: the projection applies it once"
    assert len(records) >= 100 + 40, "the first try's 40 were recorded before the broker died"


async def test_a_document_whose_parts_the_broker_did_not_take_is_completed_by_its_retry(broker):
    jobs_log, control_log = publisher(broker, TOPICS.jobs_topic), publisher(broker, TOPICS.control_topic)
    document_id = uuid.uuid4()
    try:
        gate = KillsTheBrokerMidway(broker, jobs_log, first=3)
        journal = SubmissionLog(gate, LIMITS.max_record_bytes, document_log=control_log)  # type: ignore[arg-type]
        submissions = Submissions(Reader(), journal, Blobs(), LIMITS, PRODUCER)  # type: ignore[arg-type]
        items = [
            Item(JobRequest(text=f"Part number {i}.", voice="af_heart"), "batch", document_part_job_id(document_id, i))
            for i in range(10)
        ]

        def record(requests: Sequence[Any]) -> DocumentSubmitted:
            return document_submitted(document_id, parts=len(requests))

        key = scoped_key("book-1", None)
        with pytest.raises(Unrecorded):
            await submissions.submit(Submission(items, key, True, ANONYMOUS, from_cache=False, record=record))
        await broker.start_broker()
        await submissions.submit(Submission(items, key, True, ANONYMOUS, from_cache=False, record=None))
    finally:
        await jobs_log.stop()
        await control_log.stop()
    documents = [decode_node_event(r.value) for r in await read_to_end(broker.kafka, TOPICS.control_topic)]
    assert [d.payload.document_id for d in documents if isinstance(d, DocumentSubmitted)] == [document_id]
    parts = {decode_event(r.value).job_id for r in await read_to_end(broker.kafka, TOPICS.jobs_topic)}
    assert parts == {document_part_job_id(document_id, i) for i in range(10)}, "every part, each once"
