"""A submission's live-result lookup places its new jobs in the same statement (producers.submission with
producers.placement's drafts): one round trip for both, the partition the lookup gave is where the job is
published, and the work counted for what is then refused or not looked up is released."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from producers.auth import ANONYMOUS
from producers.errors import Rejected
from producers.placement import BalancedPlacement
from producers.requests import JobRequest
from producers.submission import Item, Submission, Submissions
from producers.submission_log import SubmissionLog
from projections.errors import ProjectionUnavailable
from tests.support.api_fakes import LIMITS, PRODUCER, Blobs, Log, Reader, live

pytestmark = pytest.mark.unit


class Pool:
    """PostgreSQL as the placement itself sees it: no live work; its own upserts counted (``down``: refused)."""

    def __init__(self, down: bool = False) -> None:
        self.down = down
        self.upserts = 0

    async def fetch(self, query: str, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        if self.down:
            raise OSError("connection refused")
        if "INSERT INTO placements" not in query:
            return []
        self.upserts += 1
        return [{"fingerprint": f, "kafka_partition": p} for f, p in zip(args[0], args[1], strict=True)]

    async def execute(self, *args: Any, **kwargs: Any) -> None: ...


class Refusing:
    """Admission that refuses every new synthesis."""

    async def admit(self, work: Any, tenant: str = "default") -> None:
        raise Rejected("the synthesis backlog is over VOXLOG_MAX_BACKLOG_S", 429, retry_after=5)

    async def degraded(self) -> str | None:
        return None


def pipeline(reader: Reader, pool: Pool, **kwargs: Any) -> tuple[Submissions, BalancedPlacement, Log]:
    log = Log()
    placement = BalancedPlacement(pool, log, 60.0)  # type: ignore[arg-type]
    journal = SubmissionLog(log, LIMITS.max_record_bytes, placement)  # type: ignore[arg-type]
    submissions = Submissions(
        reader,
        journal,
        Blobs(),
        LIMITS,
        PRODUCER,
        drafts=placement,
        **kwargs,  # type: ignore[arg-type]
    )
    return submissions, placement, log


def one(text: str, key: str = "anon/k") -> Submission:
    return Submission([Item(JobRequest(text=text, voice="af_heart"), "interactive")], key, True, ANONYMOUS)


async def test_a_new_request_is_looked_up_and_placed_in_one_round_trip_and_published_there():
    reader, pool = Reader(), Pool()
    submissions, placement, log = pipeline(reader, pool)
    answer = await submissions.submit(one("Nobody asked for this before."))
    fingerprint = answer.answers[0].fingerprint
    assert reader.placed_lookups == 1
    assert pool.upserts == 0, "no placement of its own at publish"
    assert log.partitions == [reader.placements[fingerprint]]
    assert placement._known[fingerprint] == reader.placements[fingerprint]


async def test_a_fingerprint_another_api_placed_goes_where_it_went_and_a_cache_hit_with_it():
    reader, pool = Reader(), Pool()
    submissions, _, log = pipeline(reader, pool)
    answer = await submissions.submit(one("Placed by another API."))
    fingerprint = answer.answers[0].fingerprint
    reader.placements = {fingerprint: 17}  # as PostgreSQL has it now: another API placed it anew
    reader.cached[fingerprint] = live(uuid.UUID(int=9))
    again = await submissions.submit(one("Placed by another API.", key="anon/other"))
    assert again.answers[0].answer.value == "cached"
    assert log.partitions[-2:] == [17, 17], "its JobQueued and JobCompleted, where the fingerprint is placed"


async def test_a_refused_submission_gives_back_the_work_its_placement_counted():
    reader, pool = Reader(), Pool()
    submissions, placement, log = pipeline(reader, pool, admission=Refusing())
    with pytest.raises(Rejected):
        await submissions.submit(one("A long text that the backlog refuses. " * 20))
    assert reader.placed_lookups == 1
    assert log.published == []
    assert sum(placement._loads.work(24)) == 0, "placed by the lookup, but no job went there: no work counted"


async def test_while_postgres_is_down_the_job_is_placed_as_it_is_published_by_key():
    reader, pool = Reader(down=ProjectionUnavailable("cannot read the result cache")), Pool(down=True)
    submissions, placement, log = pipeline(reader, pool)
    answer = await submissions.submit(one("Submitted during an outage."))
    assert answer.answers[0].answer.value == "queued"
    assert log.partitions == [None], "its fingerprint's own partition"
    assert sum(placement._loads.work(24)) == 0


async def test_a_request_with_an_idempotency_key_costs_the_one_lookup_its_key_read_in_it():
    """Issue 41, item 1: a client that sends an Idempotency-Key (voxlog's own client always does) cost one
    round trip more, the lookup of the job its key named; the key is now read in the lookup's statement."""
    reader, pool = Reader(), Pool()
    submissions, _, log = pipeline(reader, pool)
    answer = await submissions.submit(one("Sent with a key of its own.", key="anon/first"))
    assert answer.answers[0].answer.value == "queued"
    assert (reader.placed_lookups, reader.key_reads) == (1, 0)
    assert log.partitions == [reader.placements[answer.answers[0].fingerprint]]


async def test_a_retry_with_its_key_is_answered_by_the_job_it_named_and_counts_no_new_work():
    reader, pool = Reader(), Pool()
    submissions, placement, log = pipeline(reader, pool)
    first = await submissions.submit(one("Retried by its client.", key="anon/retried"))
    reader.project(log.published[0])  # the projector has the job now
    work = sum(placement._loads.work(24))
    again = await submissions.submit(one("Retried by its client.", key="anon/retried"))
    assert again.answers[0].answer.value == "known"
    assert again.answers[0].job_id == first.answers[0].job_id
    assert len(log.published) == 1, "nothing sent again"
    assert (reader.placed_lookups, reader.key_reads) == (2, 0)
    assert sum(placement._loads.work(24)) == work, "the retry's placement counted no work"


async def test_a_key_used_for_another_request_is_a_409_and_its_placement_counts_nothing():
    reader, pool = Reader(), Pool()
    submissions, placement, log = pipeline(reader, pool)
    await submissions.submit(one("The first request.", key="anon/reused"))
    reader.project(log.published[0])
    work = sum(placement._loads.work(24))
    with pytest.raises(Rejected) as refused:
        await submissions.submit(one("Another request under the same key.", key="anon/reused"))
    assert refused.value.status == 409
    assert len(log.published) == 1
    assert sum(placement._loads.work(24)) == work
