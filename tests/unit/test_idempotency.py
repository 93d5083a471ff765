"""Idempotency keys (producers.submit): scoped to the client, bound to the request, 409 for another body."""

from __future__ import annotations

import uuid

import pytest

from contracts import JobQueued, Producer
from producers.queries import EngineVoices
from producers.submit import JobRequest, Limits, Rejected, enqueue, job_id_for, scoped_key

LIMITS = Limits(max_text_chars=100, min_speed=0.5, max_speed=2.0, default_engine="kokoro-onnx")
PRODUCER = Producer(service="api", instance="test")


class FakeProjection:
    """The projection as the API reads it, holding the jobs whose JobQueued the test says were projected."""

    def __init__(self) -> None:
        self.jobs: dict[uuid.UUID, dict] = {}

    async def engines(self):
        return [EngineVoices("kokoro-onnx", "m1", 24000, ("af_heart",), ("en-us",), 1)]

    async def job_by_key(self, key):
        return next((j for j in self.jobs.values() if j["key"] == key), None)

    async def cached_job_id(self, fingerprint):
        return None

    async def job(self, job_id):
        return self.jobs.get(job_id)

    def project(self, event: JobQueued) -> None:
        self.jobs[event.job_id] = {
            "job_id": event.job_id,
            "fingerprint": event.fingerprint,
            "key": event.payload.idempotency_key,
            "state": "queued",
        }


class FakeLog:
    def __init__(self) -> None:
        self.events: list[JobQueued] = []

    async def publish(self, event, partition=None):
        self.events.append(event)

    async def check(self):
        return None


async def submit(projection, log, text: str, key: str | None):
    return await enqueue(
        JobRequest(text=text, voice="af_heart"),
        key,
        reader=projection,
        publisher=log,
        limits=LIMITS,
        producer=PRODUCER,
        blobs=None,  # nothing is cached here: no blob is touched
    )


async def test_a_retry_with_the_same_key_and_body_names_the_same_job_before_and_after_projection():
    projection, log = FakeProjection(), FakeLog()
    key = scoped_key("order-17", None)
    first = await submit(projection, log, "Hello.", key)
    again = await submit(projection, log, "Hello.", key)  # the first is not projected yet
    assert again.job_id == first.job_id
    assert {e.event_id for e in log.events} == {log.events[0].event_id}, "one fact, published twice"
    projection.project(log.events[0])
    known = await submit(projection, log, "Hello.", key)
    assert (known.job_id, known.known is not None) == (first.job_id, True)
    assert len(log.events) == 2, "a projected job is answered, not published again"


async def test_regression_a_key_reused_with_another_body_is_a_409_and_never_the_same_job():
    """The same key with another body reused the job id under another fingerprint: two syntheses emitted
    events with identical ids, in two partitions."""
    projection, log = FakeProjection(), FakeLog()
    key = scoped_key("order-18", None)
    first = await submit(projection, log, "Hello.", key)
    other = await submit(projection, log, "Goodbye.", key)  # before the projection shows the first
    assert other.job_id != first.job_id
    projection.project(log.events[0])
    with pytest.raises(Rejected) as refused:
        await submit(projection, log, "Goodbye.", key)
    assert refused.value.status == 409
    assert str(first.job_id) in str(refused.value)


def test_regression_two_clients_with_the_same_key_have_two_keys():
    """The key was global: two clients that picked the same key read each other's job."""
    alice, bob = scoped_key("1", "Bearer alice-token"), scoped_key("1", "Bearer bob-token")
    assert alice != bob
    assert scoped_key("1", None) == "anon/1"
    assert "alice-token" not in alice, "the credential itself is never recorded"
    fingerprint = "ab" * 32
    assert job_id_for(alice, fingerprint) != job_id_for(bob, fingerprint)
    assert job_id_for(alice, fingerprint) == job_id_for(alice, fingerprint)


@pytest.mark.parametrize(
    ("key", "message"), [("x" * 201, "the limit is 200"), ("a\x01b", "U+0001"), ("  ", "printable")]
)
def test_a_bad_key_is_refused_with_what_to_fix(key, message):
    with pytest.raises(Rejected, match=message.replace("+", r"\+")):
        scoped_key(key, None)
