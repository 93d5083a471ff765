"""Priorities in the worker's loop: interactive jobs first, batch jobs in the gaps and never starved, and a
set-aside batch job holds its partition's commit until it is done (consumer and engine faked)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from consumers.attempts import AttemptResult
from tests.support.job_logs import _Builder
from tests.support.worker_fakes import TP, FakeConsumer, NoCache, RecordingRunner, make_worker, record, tail_scanned
from tests.unit.test_worker_failures import GatedRunner, run_until_idle

pytestmark = pytest.mark.unit


def jobs(first: int, count: int) -> list[_Builder]:
    return [_Builder(uuid.UUID(int=first + i)) for i in range(count)]


async def test_interactive_jobs_go_before_batch_jobs_read_earlier():
    batch, interactive = jobs(100, 3), jobs(200, 2)
    records = [record(b.queued("batch"), i) for i, b in enumerate(batch)]
    records += [record(j.queued(), 3 + i) for i, j in enumerate(interactive)]
    consumer, runner = FakeConsumer({TP: records}), RecordingRunner()
    worker = make_worker(consumer, runner, NoCache(), commit_interval_s=0)
    tail_scanned(worker)
    await run_until_idle(worker, consumer)
    assert runner.jobs == [j.job_id for j in interactive] + [b.job_id for b in batch]
    assert consumer.commits[-1] == {TP: 5}, "every record done: the commit passes them all"


async def test_a_steady_stream_of_interactive_jobs_leaves_batch_work_its_turn():
    batch, interactive = jobs(100, 2), jobs(200, 6)
    records = [record(b.queued("batch"), i) for i, b in enumerate(batch)]
    records += [record(j.queued(), 2 + i) for i, j in enumerate(interactive)]
    consumer, runner = FakeConsumer({TP: records}), RecordingRunner()
    worker = make_worker(consumer, runner, NoCache(), commit_interval_s=0, interactive_per_batch=2)
    tail_scanned(worker)
    await run_until_idle(worker, consumer)
    order = ["b" if job in {b.job_id for b in batch} else "i" for job in runner.jobs]
    assert order == ["i", "i", "b", "i", "i", "b", "i", "i"]


class StopsAfterOneJob(RecordingRunner):
    """Stops the worker when its first job is done: whatever was set aside stays undone."""

    def __init__(self, stop: asyncio.Event) -> None:
        super().__init__()
        self.stop = stop

    async def run(self, attempt) -> AttemptResult:
        outcome = await super().run(attempt)
        self.stop.set()
        return outcome


async def test_a_set_aside_batch_job_holds_the_commit_until_it_is_done():
    """The worker stops with a batch job set aside: the commit must not pass it, or a new owner would never
    read it again."""
    batch, interactive = jobs(100, 1), jobs(200, 1)
    records = [record(batch[0].queued("batch"), 0), record(interactive[0].queued(), 1)]
    stop = asyncio.Event()
    consumer, runner = FakeConsumer({TP: records}), StopsAfterOneJob(stop)
    worker = make_worker(consumer, runner, NoCache(), commit_interval_s=0, held_claims=1)
    tail_scanned(worker)
    await asyncio.wait_for(worker.run(stop), 10)
    assert runner.jobs == [interactive[0].job_id]
    assert len(worker.waiting) == 1
    assert all(commit[TP] == 0 for commit in consumer.commits), consumer.commits


async def test_regression_an_interactive_job_fetched_just_after_the_poll_waited_behind_a_whole_batch_job():
    """A poll that drained some partitions was the last look before a batch job: records appended to them
    meanwhile (aiokafka fetches a drained partition only once its fetch in flight returns) were read only
    after the batch job, so a short request waited for a whole document part more (bench (h): a short
    request behind a part that ended 33 ms after it was submitted waited 592 ms). The worker now claims the
    interactive job beside the batch job in hand (their segments then share the engine by the policy)."""
    batch, interactive = jobs(100, 1), jobs(200, 1)
    consumer, runner = FakeConsumer({TP: [record(batch[0].queued("batch"), 0)]}), GatedRunner(batch[0].job_id)
    consumer._batches.append({TP: [record(interactive[0].queued(), 1)]})  # what the next poll brings
    worker = make_worker(consumer, runner, NoCache(), commit_interval_s=0)
    tail_scanned(worker)
    stop = asyncio.Event()
    loop = asyncio.create_task(worker.run(stop))
    await asyncio.wait_for(runner.entered.wait(), 10)
    await asyncio.wait_for(runner.ran(interactive[0].job_id), 10)
    assert runner.jobs == [interactive[0].job_id], "done while the batch job is still in hand"
    runner.gate.set()
    await asyncio.wait_for(consumer.idle.wait(), 10)
    stop.set()
    await asyncio.wait_for(loop, 10)
    assert runner.jobs == [interactive[0].job_id, batch[0].job_id]


async def test_the_look_before_a_batch_job_is_one_poll_so_a_stream_of_records_never_starves_it():
    batch = jobs(100, 1)
    trickle = jobs(300, 3)  # batch jobs read one poll at a time: each poll brings records
    consumer, runner = FakeConsumer({TP: [record(batch[0].queued("batch"), 0)]}), RecordingRunner()
    for i, job in enumerate(trickle):
        consumer._batches.append({TP: [record(job.queued("batch"), 1 + i)]})
    worker = make_worker(consumer, runner, NoCache(), commit_interval_s=0)
    tail_scanned(worker)
    await run_until_idle(worker, consumer)
    assert runner.jobs[0] == batch[0].job_id, "taken after one more look, not after the whole trickle"
    assert sorted(runner.jobs) == sorted(j.job_id for j in [*batch, *trickle])
