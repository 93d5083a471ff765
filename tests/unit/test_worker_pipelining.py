"""A worker goes on to the next job while the last one's completion is acknowledged (consumer and runner
faked): no commit passes a job before its events are in the log, a duplicate waits for the completion it
would coalesce onto, and a refused completion's job is acted on again."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from consumers.attempts import AttemptEnd, AttemptResult
from tests.support.job_logs import _Builder
from tests.support.worker_fakes import (
    TP,
    FakeConsumer,
    NoCache,
    RecordingRunner,
    make_worker,
    record,
    run_until,
    tail_scanned,
)
from tests.unit.test_worker_failures import run_until_idle

pytestmark = pytest.mark.unit


class AcknowledgementWatchingConsumer(FakeConsumer):
    """Notes, at every commit, how many completions the runner still had to acknowledge."""

    def __init__(self, batch: dict, runner: RecordingRunner) -> None:
        super().__init__(batch)
        self.runner = runner
        self.unacknowledged_at_commit: list[int] = []

    async def commit(self, offsets: dict) -> None:
        self.unacknowledged_at_commit.append(len(self.runner.acknowledgements))
        await super().commit(offsets)


async def test_consecutive_jobs_do_not_wait_for_each_other_but_every_commit_does():
    jobs = [_Builder(uuid.UUID(int=i)) for i in range(3)]
    runner = RecordingRunner()
    consumer = AcknowledgementWatchingConsumer({TP: [record(job.queued(), i) for i, job in enumerate(jobs)]}, runner)
    worker = make_worker(consumer, runner, NoCache(), commit_interval_s=60)
    tail_scanned(worker)
    await run_until_idle(worker, consumer)
    assert runner.jobs == [job.job_id for job in jobs]
    assert sum(runner.acknowledgements.waits) == 3
    assert max(runner.acknowledgements.waits) >= 2, "consecutive completions were acknowledged together"
    assert set(consumer.unacknowledged_at_commit) == {0}, "a commit waited for every completion before it"
    assert consumer.commits[-1] == {TP: 3}


async def test_a_duplicate_waits_for_the_completion_it_would_coalesce_onto():
    first, duplicate = (
        _Builder(uuid.UUID(int=1), request_text="Same."),
        _Builder(uuid.UUID(int=2), request_text="Same."),
    )
    runner = RecordingRunner()
    consumer = FakeConsumer({TP: [record(first.queued(), 0), record(duplicate.queued(), 1)]})
    worker = make_worker(consumer, runner, NoCache(), commit_interval_s=60)
    tail_scanned(worker)
    await run_until_idle(worker, consumer)
    assert runner.acknowledgements.waits == [1, 1], "the first was acknowledged before the duplicate was looked at"


class CountingRunner(RecordingRunner):
    def __init__(self, runs_wanted: int) -> None:
        super().__init__()
        self.runs_wanted, self.enough = runs_wanted, asyncio.Event()
        self.consumer: FakeConsumer | None = None
        self.commits_at_start: list[list[dict]] = []  # what the consumer had committed when each run began

    async def run(self, attempt) -> AttemptResult:
        self.commits_at_start.append(list(self.consumer.commits) if self.consumer else [])
        outcome = await super().run(attempt)
        if len(self.jobs) >= self.runs_wanted:
            self.enough.set()
        return outcome


async def test_regression_a_refused_completion_is_not_committed_past_and_its_job_is_acted_on_again():
    """Not waiting for a completion must not lose it: refused, its record stays uncommitted and the job
    is taken again after the outage backoff (the real ledger then says what is left; here nothing
    recorded it, so the job is done again)."""
    job = _Builder(uuid.UUID(int=7))
    runner = CountingRunner(runs_wanted=2)
    runner.acknowledgements.refuse_next_wait = True
    consumer = runner.consumer = FakeConsumer({TP: [record(job.queued(), 0)]})
    worker = make_worker(consumer, runner, NoCache(), commit_interval_s=0)
    tail_scanned(worker)
    await run_until(worker, runner.enough)
    assert runner.jobs == [job.job_id, job.job_id], "acted on again after the refusal"
    before_redo = runner.commits_at_start[1]
    assert all(commit[TP] == 0 for commit in before_redo), f"committed past the refused job: {before_redo}"
    assert consumer.commits[-1] == {TP: 1}, "committed past it once the second completion landed"


async def test_a_completed_jobs_record_is_resolved_only_once_its_completion_is_acknowledged():
    job = _Builder(uuid.UUID(int=8))
    runner = RecordingRunner()
    runner.acknowledgements.gate = gate = asyncio.Event()
    consumer = FakeConsumer({TP: [record(job.queued(), 0)]})
    worker = make_worker(consumer, runner, NoCache(), commit_interval_s=0)
    tail_scanned(worker)
    stop = asyncio.Event()
    loop = asyncio.create_task(worker.run(stop))
    await asyncio.wait_for(runner.acknowledgements.waiting.wait(), 10)  # the commit after the job waits
    await worker.partitions.commit()  # a commit meanwhile (a revocation's, say) does not pass the job
    assert consumer.commits == [], "nothing past where the worker started reading"
    gate.set()
    await asyncio.wait_for(consumer.idle.wait(), 10)
    stop.set()
    await asyncio.wait_for(loop, 10)
    assert consumer.commits == [{TP: 1}], "acknowledged: resolved, and committed past"
    assert len(worker.retries) == 0


class EndsAs(RecordingRunner):
    """Every attempt ends as ``kind``, its events acknowledged (or a completion waited for)."""

    def __init__(self, kind: AttemptEnd) -> None:
        super().__init__()
        self.kind = kind

    async def run(self, attempt) -> AttemptResult:
        await super().run(attempt)
        return AttemptResult(self.kind)


@pytest.mark.parametrize("kind", ["completed", "released", "failed", "cancelled"])
async def test_an_attempt_with_nothing_left_to_acknowledge_resolves_its_deferred_record_at_once(kind):
    """A set-aside batch job's record is deferred; whatever its attempt did, recorded, resolves it (a release
    comes back as its own record, a cancellation or a failure ends the job)."""
    job = _Builder(uuid.UUID(int=9))
    runner = EndsAs(kind)
    consumer = FakeConsumer({TP: [record(job.queued("batch"), 0)]})
    worker = make_worker(consumer, runner, NoCache(), commit_interval_s=0)
    tail_scanned(worker)
    await run_until_idle(worker, consumer)
    assert runner.jobs == [job.job_id]
    assert consumer.commits[-1] == {TP: 1}
    assert len(worker.retries) == 0, "nothing is acted on again"
