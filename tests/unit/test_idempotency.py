"""Idempotency keys (producers.idempotency, through producers.submission): scoped to the client, bound to
the request, 409 for another body."""

from __future__ import annotations

import pytest

from contracts import JobQueued
from foundation.errors import BrokerUnavailable
from producers.auth import ANONYMOUS
from producers.errors import Rejected
from producers.idempotency import job_id_for, scoped_key
from producers.requests import JobRequest
from producers.submission import Answer, Answered, Item, Submission, Submissions
from producers.submission_log import SubmissionLog
from tests.support.api_fakes import LIMITS, PRODUCER, Blobs, Log, Reader


def pipeline(projection: Reader, log: Log) -> Submissions:
    return Submissions(projection, SubmissionLog(log, LIMITS.max_record_bytes), Blobs(), LIMITS, PRODUCER)  # type: ignore[arg-type]


async def submit(projection: Reader, log: Log, text: str, key: str) -> Answered:
    body = JobRequest(text=text, voice="af_heart")
    submission = Submission([Item(body, "interactive")], key, True, ANONYMOUS)
    submitted = await pipeline(projection, log).submit(submission)
    return submitted.answers[0]


async def test_a_retry_with_the_same_key_and_body_names_the_same_job_before_and_after_projection():
    projection, log = Reader(), Log()
    key = scoped_key("order-17", None)
    first = await submit(projection, log, "Hello.", key)
    again = await submit(projection, log, "Hello.", key)  # the first is not projected yet
    assert again.job_id == first.job_id
    assert {e.event_id for e in log.published} == {log.published[0].event_id}, "one fact, published twice"
    event: JobQueued = log.published[0]
    projection.project(event)
    known = await submit(projection, log, "Hello.", key)
    assert (known.job_id, known.answer) == (first.job_id, Answer.KNOWN)
    assert len(log.published) == 2, "a projected job is answered, not published again"


async def test_regression_a_key_reused_with_another_body_is_a_409_and_never_the_same_job():
    """The same key with another body reused the job id under another fingerprint: two syntheses emitted
    events with identical ids, in two partitions."""
    projection, log = Reader(), Log()
    key = scoped_key("order-18", None)
    first = await submit(projection, log, "Hello.", key)
    other = await submit(projection, log, "Goodbye.", key)  # before the projection shows the first
    assert other.job_id != first.job_id
    projection.project(log.published[0])
    with pytest.raises(Rejected) as refused:
        await submit(projection, log, "Goodbye.", key)
    assert refused.value.status == 409
    assert str(first.job_id) not in str(refused.value), "a 409 never names the job another request made"


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


class Unplaceable:
    """Placement that cannot ask the broker where jobs go: it fails before any record is sent."""

    async def place(self, jobs: object) -> list[int | None]:
        raise BrokerUnavailable("Kafka did not tell the partitions within 5s")


async def test_regression_a_broker_gone_before_any_record_says_nothing_was_recorded():
    """A 503 from a placement that could not reach Kafka said "part of the submission may be recorded", when
    nothing had been sent: a client reading it could not tell that a plain retry was safe."""
    log = Log()
    submissions = Submissions(
        Reader(),
        SubmissionLog(log, LIMITS.max_record_bytes, Unplaceable()),  # type: ignore[arg-type]
        Blobs(),  # type: ignore[arg-type]
        LIMITS,
        PRODUCER,
    )
    submission = Submission([Item(JobRequest(text="Hi.", voice="af_heart"), "interactive")], "k/1", True, ANONYMOUS)
    with pytest.raises(Rejected) as refused:
        await submissions.submit(submission)
    assert refused.value.status == 503
    assert "nothing was accepted or recorded" in str(refused.value)
    assert "may be recorded" not in str(refused.value)
    assert log.published == []

    partial = Log(takes=0)
    with pytest.raises(Rejected, match="part of it may be recorded"):
        await pipeline(Reader(), partial).submit(submission)
