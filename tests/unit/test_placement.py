"""Placing new jobs (producers.placement): the least loaded partition, and what passes through untouched."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter
from typing import Any

import pytest

from producers.auth import ANONYMOUS
from producers.placement import BalancedPlacement, least_loaded
from producers.requests import JobRequest
from producers.submission import Item, Submission, Submissions
from producers.submission_log import SubmissionLog
from tests.support.api_fakes import LIMITS, PRODUCER, Blobs, Log, Reader
from tests.support.job_logs import _Builder

pytestmark = pytest.mark.unit


def test_each_cost_goes_to_the_partition_with_the_least_work_so_far():
    assert least_loaded([5, 0, 3], [1, 1, 4, 1], rng=random.Random(1)) == [1, 1, 1, 2]


def test_equal_jobs_over_idle_partitions_fill_them_evenly_in_a_random_order():
    chosen = least_loaded([0.0] * 24, [100.0] * 320, rng=random.Random(7))
    shares = Counter(chosen)
    assert set(shares) == set(range(24))
    assert max(shares.values()) - min(shares.values()) <= 1  # 13 or 14 each
    assert chosen[:24] != list(range(24)), "ties are broken at random, not by index"


def test_a_long_job_has_a_partition_to_itself_while_short_ones_fill_the_other():
    long_one, *short = least_loaded([0.0, 0.0], [1000.0, 100.0, 100.0, 100.0], rng=random.Random(3))
    assert set(short) == {1 - long_one}


class Inner:
    def __init__(self) -> None:
        self.published: list[tuple[list[Any], list[int | None]]] = []

    async def publish(self, event: Any, partition: int | None = None) -> None:
        await self.publish_all([event], [partition])

    async def publish_all(self, events: list[Any], partitions: list[int | None] | None = None) -> None:
        self.published.append((list(events), list(partitions or [None] * len(events))))

    async def check(self) -> None: ...

    async def partition_count(self) -> int:
        return 24


class Placing:
    """Stands in for BalancedPlacement: places job i of a call in partition 10 + i."""

    def __init__(self) -> None:
        self.asked: list[list[Any]] = []

    async def place(self, jobs: list[Any]) -> list[int | None]:
        self.asked.append(list(jobs))
        return [10 + i for i in range(len(jobs))]


async def test_the_submission_pipeline_publishes_each_new_job_where_the_placement_puts_it():
    placing, log, projection = Placing(), Log(), Reader()
    journal = SubmissionLog(log, LIMITS.max_record_bytes, placing)  # type: ignore[arg-type]
    submissions = Submissions(projection, journal, Blobs(), LIMITS, PRODUCER)  # type: ignore[arg-type]
    known = JobRequest(text="Known.", voice="af_heart")
    first = await submissions.submit(Submission([Item(known, "interactive")], "anon/k", True, ANONYMOUS))
    projection.project(log.published[0])
    items = [Item(JobRequest(text=text, voice="af_heart"), "batch") for text in ("One.", "Two.")]
    await submissions.submit(Submission(items, "anon/batch", True, ANONYMOUS))
    again = await submissions.submit(Submission([Item(known, "interactive")], "anon/k", True, ANONYMOUS))
    assert log.partitions == [10, 10, 11], "each call's new jobs, in order, where the placement put them"
    assert [[e.payload.request.text for e in asked] for asked in placing.asked] == [["Known."], ["One.", "Two."]]
    assert again.answers[0].job_id == first.answers[0].job_id, "a known job is neither placed nor published again"


class DownPool:
    """A pool whose database is unreachable."""

    async def fetch(self, *args: Any, **kwargs: Any) -> Any:
        raise OSError("connection refused")

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        raise OSError("connection refused")


async def test_without_the_database_a_job_goes_to_its_fingerprints_own_partition():
    placement = BalancedPlacement(DownPool(), Inner(), 60.0)  # type: ignore[arg-type]
    job = _Builder(uuid.UUID(int=1), request_text="Anything.").queued()
    assert await placement.place([job, job]) == [None, None]


class GatedPool:
    """PostgreSQL as the placement sees it, with every placement held until the test opens the gate."""

    def __init__(self, expected: int) -> None:
        self.gate, self.all_waiting = asyncio.Event(), asyncio.Event()
        self.expected, self.waiting = expected, 0

    async def fetch(self, query: str, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        if "INSERT INTO placements" not in query:
            return []  # no live work in the projection
        fingerprints, proposed = args[0], args[1]
        self.waiting += 1
        if self.waiting == self.expected:
            self.all_waiting.set()
        await self.gate.wait()
        return [{"fingerprint": f, "kafka_partition": p} for f, p in zip(fingerprints, proposed, strict=True)]

    async def execute(self, *args: Any, **kwargs: Any) -> None: ...


async def test_regression_concurrent_submissions_all_went_to_the_one_least_loaded_partition():
    """Work was counted once the database had answered: the 64 submissions in flight meanwhile all saw the same
    loads and picked the same partition (bench (e): the busiest of 2 workers had 55 of 80 jobs)."""
    jobs = [_Builder(uuid.UUID(int=n), request_text=f"Distinct text {n}.").queued() for n in range(48)]
    pool = GatedPool(expected=len(jobs))
    placement = BalancedPlacement(pool, Inner(), 60.0)  # type: ignore[arg-type]
    placing = [asyncio.create_task(placement.place([job])) for job in jobs]
    await asyncio.wait_for(pool.all_waiting.wait(), 10)  # every submission in flight at once
    pool.gate.set()
    shares = Counter(p for [p] in await asyncio.gather(*placing))
    assert sorted(shares.values()) == [2] * 24


def test_with_the_workers_shares_a_job_goes_to_the_least_loaded_worker_not_just_partition():
    shares = [frozenset({0, 1, 2}), frozenset({3, 4, 5})]
    # Partition 0 is the emptiest, but its worker holds 20 to the other's 9.
    assert least_loaded([0, 10, 10, 3, 3, 3], [1], shares, rng=random.Random(2))[0] in {3, 4, 5}


def test_jobs_of_unequal_texts_still_split_evenly_between_workers():
    """Per partition, texts of 50 to 52 characters leave 13 or 14 jobs in each of 24 partitions, which three
    at a time can make one of 8 workers 42 and another 39; per worker, every one has 40."""
    shares = [frozenset({k, k + 8, k + 16}) for k in range(8)]
    chosen = least_loaded([0.0] * 24, [114 + i % 3 for i in range(320)], shares, rng=random.Random(5))
    per_worker = Counter(next(k for k, share in enumerate(shares) if p in share) for p in chosen)
    assert sorted(per_worker.values()) == [40] * 8


class FlakyPool(GatedPool):
    """A database that answers, then goes away."""

    def __init__(self) -> None:
        super().__init__(expected=0)
        self.gate.set()
        self.down = False

    async def fetch(self, query: str, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        if self.down:
            raise OSError("connection refused")
        return await super().fetch(query, *args, **kwargs)


async def test_without_the_database_a_fingerprint_this_api_placed_goes_where_it_went_before():
    pool = FlakyPool()
    placement = BalancedPlacement(pool, Inner(), 60.0)  # type: ignore[arg-type]
    first = _Builder(uuid.UUID(int=1), request_text="Placed while the database answered.").queued()
    [where] = await placement.place([first])
    pool.down = True
    retry = _Builder(uuid.UUID(int=1), request_text="Placed while the database answered.").queued()
    other = _Builder(uuid.UUID(int=2), request_text="Never placed.").queued()
    assert await placement.place([retry, other]) == [where, None]
