"""A worker goes on to the next job while the last one's completion is acknowledged (consumer and runner
faked): no commit passes a job before its events are in the log, a duplicate waits for the completion it
would coalesce onto, and a refused completion's job is acted on again."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from consumers.job_runner import Outcome
from tests.support.job_logs import _Builder
from tests.support.worker_fakes import (
    TP,
    FakeConsumer,
    NoCache,
    RecordingRunner,
    make_worker,
    record,
    run_until,
    settle,
)
from tests.unit.test_worker_failures import run_until_idle

pytestmark = pytest.mark.unit


class SettleWatchingConsumer(FakeConsumer):
    """Notes, at every commit, how many completions the runner still had to acknowledge."""

    def __init__(self, batch: dict, runner: RecordingRunner) -> None:
        super().__init__(batch)
        self.runner = runner
        self.unsettled_at_commit: list[int] = []

    async def commit(self, offsets: dict) -> None:
        self.unsettled_at_commit.append(len(self.runner.unsettled))
        await super().commit(offsets)


async def test_consecutive_jobs_do_not_wait_for_each_other_but_every_commit_does():
    jobs = [_Builder(uuid.UUID(int=i)) for i in range(3)]
    runner = RecordingRunner()
    consumer = SettleWatchingConsumer({TP: [record(job.queued(), i) for i, job in enumerate(jobs)]}, runner)
    worker = make_worker(consumer, runner, NoCache(), commit_interval_s=60)
    settle(worker)
    await run_until_idle(worker, consumer)
    assert runner.jobs == [job.job_id for job in jobs]
    assert sum(runner.settles) == 3
    assert max(runner.settles) >= 2, "consecutive completions were acknowledged together"
    assert set(consumer.unsettled_at_commit) == {0}, "a commit waited for every completion before it"
    assert consumer.commits[-1] == {TP: 3}


async def test_a_duplicate_waits_for_the_completion_it_would_coalesce_onto():
    first, duplicate = (
        _Builder(uuid.UUID(int=1), request_text="Same."),
        _Builder(uuid.UUID(int=2), request_text="Same."),
    )
    runner = RecordingRunner()
    consumer = FakeConsumer({TP: [record(first.queued(), 0), record(duplicate.queued(), 1)]})
    worker = make_worker(consumer, runner, NoCache(), commit_interval_s=60)
    settle(worker)
    await run_until_idle(worker, consumer)
    assert runner.settles == [1, 1], "the first was settled before the duplicate was looked at"


class CountingRunner(RecordingRunner):
    def __init__(self, runs_wanted: int) -> None:
        super().__init__()
        self.runs_wanted, self.enough = runs_wanted, asyncio.Event()
        self.consumer: FakeConsumer | None = None
        self.commits_at_start: list[list[dict]] = []  # what the consumer had committed when each run began

    async def run(self, attempt) -> Outcome:
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
    runner.refuse_next_settle = True
    consumer = runner.consumer = FakeConsumer({TP: [record(job.queued(), 0)]})
    worker = make_worker(consumer, runner, NoCache(), commit_interval_s=0)
    settle(worker)
    await run_until(worker, runner.enough)
    assert runner.jobs == [job.job_id, job.job_id], "acted on again after the refusal"
    before_redo = runner.commits_at_start[1]
    assert before_redo, "the worker committed between the refusal and the redo"
    assert all(commit[TP] == 0 for commit in before_redo), before_redo
    assert consumer.commits[-1] == {TP: 1}, "committed past it once the second completion landed"
