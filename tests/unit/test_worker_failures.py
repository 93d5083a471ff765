"""The worker's loop when things go wrong: retries that wait without blocking, a lost retry owner, an
unreachable broker, a failing tail scan, long batches (consumer and engine faked, no services)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from aiokafka.errors import KafkaConnectionError
from aiokafka.structs import TopicPartition

from consumers.attempts import AttemptResult
from consumers.ledger import Ledger
from contracts import JobReleasedPayload, utc_now
from foundation.errors import BrokerUnavailable
from projections.errors import ProjectionUnavailable
from tests.support.job_logs import _Builder
from tests.support.worker_fakes import (
    TP,
    FakeConsumer,
    NoCache,
    RecordingRunner,
    make_worker,
    record,
    tail_scanned,
)


async def run_until_idle(worker, consumer, stop: asyncio.Event | None = None) -> None:
    stop = stop or asyncio.Event()
    loop_task = asyncio.create_task(worker.run(stop))
    await asyncio.wait_for(consumer.idle.wait(), 10)
    stop.set()
    await asyncio.wait_for(loop_task, 10)


def released_until(builder: _Builder, attempt: int, not_before):
    event = builder.released(attempt)
    payload = JobReleasedPayload(reason="transient", failed_attempt=attempt, not_before=not_before, message="x")
    return event.model_copy(update={"payload": payload})


async def test_regression_a_job_waiting_for_its_retry_holds_up_no_other_job_in_its_partition():
    """A released job's backoff was slept on the worker, stalling every partition it owned."""
    failing, other = _Builder(uuid.UUID(int=1)), _Builder(uuid.UUID(int=2))
    later = utc_now() + timedelta(hours=1)
    records = [
        record(failing.queued(), 0),
        record(failing.claimed(1), 1),
        record(released_until(failing, 1, later), 2),
        record(other.queued(), 3),
    ]
    consumer, runner = FakeConsumer({TP: records}), RecordingRunner()
    worker = make_worker(consumer, runner, NoCache(), commit_interval_s=0)
    tail_scanned(worker)
    await run_until_idle(worker, consumer)

    assert other.job_id in runner.jobs, "the job behind the waiting one ran at once"
    assert len(worker.retries) == 1, "the released job waits for its retry"
    assert consumer.commits[-1] == {TP: 2}, "nothing is committed past the waiting record"


async def test_a_due_retry_runs_one_attempt_higher_and_then_commits_past_its_record():
    job = _Builder(uuid.UUID(int=3))
    records = [record(job.queued(), 0), record(job.claimed(1), 1), record(released_until(job, 1, utc_now()), 2)]
    consumer, runner = FakeConsumer({TP: records}), RecordingRunner()
    worker = make_worker(consumer, runner, NoCache(), commit_interval_s=0)
    tail_scanned(worker)
    await run_until_idle(worker, consumer)
    # The job waits for a claim until the records behind it are read: by then its ledger shows attempt 1
    # claimed and released, so only the retry runs.
    assert runner.attempts == [(job.job_id, 2)]
    assert consumer.commits[-1] == {TP: 3}


async def test_regression_a_retry_whose_worker_died_is_claimed_again_by_the_next_owner():
    """A job whose retry attempt lost its worker stayed claimed forever: the next owner's tail scan folded
    the dead claim in, and the release it read after it no longer looked actionable."""
    job = _Builder(uuid.UUID(int=4))
    consumer, runner = FakeConsumer({TP: [record(released_until(job, 1, utc_now()), 2)]}), RecordingRunner()
    worker = make_worker(consumer, runner, NoCache())
    tail = Ledger(timedelta(minutes=10))  # what the new owner's scan from offset 2 found
    for offset, event in enumerate([job.queued(), job.claimed(1), released_until(job, 1, utc_now()), job.claimed(2)]):
        tail.observe(event, offset)
    worker.partitions.adopt({TP: 2}, {TP: tail})
    await run_until_idle(worker, consumer)
    assert runner.attempts == [(job.job_id, 3)]


class FlakyRunner(RecordingRunner):
    """The broker refuses the first event of the first job."""

    def __init__(self) -> None:
        super().__init__()
        self.refusals = 1

    async def run(self, attempt) -> AttemptResult:
        if self.refusals:
            self.refusals -= 1
            raise BrokerUnavailable("Kafka did not acknowledge")
        return await super().run(attempt)


async def test_regression_an_unreachable_broker_does_not_kill_the_worker_and_the_record_is_tried_again():
    """The broker unavailable on publish raised out of the worker's loop, and the process exited."""
    first, second = _Builder(uuid.UUID(int=5)), _Builder(uuid.UUID(int=6))
    consumer, runner = FakeConsumer({TP: [record(first.queued(), 0), record(second.queued(), 1)]}), FlakyRunner()
    worker = make_worker(consumer, runner, NoCache(), commit_interval_s=0)
    tail_scanned(worker)
    await run_until_idle(worker, consumer)
    # The second job is claimed beside the first, and the first is tried again after the outage's backoff.
    assert runner.jobs == [second.job_id, first.job_id], "the refused job was acted on again"
    assert consumer.commits[-1] == {TP: 2}


async def test_regression_records_of_a_long_batch_wait_for_a_poll_between_jobs():
    """A poll took up to 100 records while max.poll.interval was sized for one job: a batch of long jobs got
    the member evicted. The worker's loop now polls while its claims run: a job never stops it."""
    jobs = [_Builder(uuid.UUID(int=10 + i)) for i in range(3)]
    consumer = FakeConsumer({TP: [record(job.queued(), i) for i, job in enumerate(jobs)]})
    runner = GatedRunner(jobs[0].job_id)
    worker = make_worker(consumer, runner, NoCache(), held_claims=1)
    tail_scanned(worker)
    stop = asyncio.Event()
    loop_task = asyncio.create_task(worker.run(stop))
    await asyncio.wait_for(runner.entered.wait(), 10)
    consumer.polled.clear()
    await asyncio.wait_for(consumer.polled.wait(), 10)  # a poll while the first job is in hand
    assert runner.jobs == [], "the first job is still in hand"
    runner.gate.set()
    await asyncio.wait_for(consumer.idle.wait(), 10)
    stop.set()
    await asyncio.wait_for(loop_task, 10)
    assert runner.jobs == [job.job_id for job in jobs]


class GatedRunner(RecordingRunner):
    """The job ``gated`` waits at a gate before it runs; every job notes its abort."""

    def __init__(self, gated: uuid.UUID) -> None:
        super().__init__()
        self.gated = gated
        self.entered, self.gate = asyncio.Event(), asyncio.Event()
        self.aborts: dict[uuid.UUID, object] = {}
        self.in_hand: dict[uuid.UUID, object] = {}
        self.changed = asyncio.Event()  # a job ran

    async def ran(self, job_id: uuid.UUID) -> None:
        while job_id not in self.jobs:
            self.changed.clear()
            await self.changed.wait()

    async def first_abort(self, job_id: uuid.UUID) -> None:
        await self.in_hand[job_id].abort.given_back()  # type: ignore[attr-defined]

    async def run(self, attempt) -> AttemptResult:
        self.in_hand[attempt.job.job_id] = attempt
        if attempt.job.job_id == self.gated:
            self.entered.set()
            await self.gate.wait()
        self.aborts[attempt.job.job_id] = attempt.abort.reason
        try:
            return await super().run(attempt)
        finally:
            self.changed.set()


class FailingScanConsumer(FakeConsumer):
    """The broker is unreachable for the first tail scan of an assignment."""

    def __init__(self, batch: dict) -> None:
        super().__init__(batch)
        self.failures = 2

    async def beginning_offsets(self, partitions):
        if self.failures:
            self.failures -= 1
            raise KafkaConnectionError("no broker")
        return dict.fromkeys(partitions, 0)

    async def committed(self, tp):
        return None


async def test_regression_a_tail_scan_that_fails_is_tried_again_instead_of_leaving_the_worker_waiting():
    """A broker error during the tail scan in the assignment callback left the worker waiting forever."""
    job = _Builder(uuid.UUID(int=20))
    consumer, runner = FailingScanConsumer({TP: [record(job.queued(), 0)]}), RecordingRunner()

    async def scanned(starts):
        return {tp: Ledger(timedelta(minutes=10)) for tp in starts}, 0

    worker = make_worker(consumer, runner, NoCache(), scan_tails=scanned)
    await worker.on_partitions_assigned({TP})
    await run_until_idle(worker, consumer)
    assert consumer.failures == 0
    assert runner.jobs == [job.job_id]


class UnreadableProjection:
    async def outlook(self, job_id, fingerprint, now):
        raise ProjectionUnavailable("PostgreSQL is down")

    async def request_of(self, job_id):
        raise ProjectionUnavailable("PostgreSQL is down")


async def test_regression_a_postgres_error_in_a_lookup_does_not_stop_the_job():
    """A Postgres error during the cache lookup escaped the worker after it had read the job."""
    job = _Builder(uuid.UUID(int=30))
    consumer, runner = FakeConsumer({TP: [record(job.queued(), 0)]}), RecordingRunner()
    worker = make_worker(consumer, runner, UnreadableProjection())
    tail_scanned(worker)
    await run_until_idle(worker, consumer)
    assert runner.jobs == [job.job_id]


async def test_regression_an_abort_meant_for_one_job_does_not_release_the_next():
    """A revocation's abort, set while a job was in hand, stayed set and released the next job at its first
    segment. Each claim now has its own: a revocation gives back the claims of its partitions only."""
    first, second = _Builder(uuid.UUID(int=31)), _Builder(uuid.UUID(int=32))
    other = TopicPartition(TP.topic, TP.partition + 1)
    consumer = FakeConsumer({TP: [record(first.queued(), 0)], other: [record(second.queued(), 0)]})
    consumer.assigned = {TP, other}
    runner = GatedRunner(first.job_id)
    worker = make_worker(consumer, runner, NoCache(), rebalance_grace_s=0.01)
    ledgers = {tp: Ledger(timedelta(minutes=10)) for tp in (TP, other)}
    worker.partitions.adopt(dict.fromkeys(ledgers, 0), ledgers)
    stop = asyncio.Event()
    loop_task = asyncio.create_task(worker.run(stop))
    await asyncio.wait_for(runner.entered.wait(), 10)
    revoke = asyncio.create_task(worker.on_partitions_revoked({TP}))
    await asyncio.wait_for(runner.first_abort(first.job_id), 10)  # the grace ran out: the claim is given back
    runner.gate.set()
    await asyncio.wait_for(revoke, 10)
    consumer.assigned = {other}
    await worker.on_partitions_assigned(set())  # a revocation is followed by an assignment
    await asyncio.wait_for(consumer.idle.wait(), 10)
    stop.set()
    await asyncio.wait_for(loop_task, 10)
    assert set(runner.jobs) == {first.job_id, second.job_id}
    assert runner.aborts[first.job_id] is not None, "the job of the revoked partition was asked to stop"
    assert runner.aborts[second.job_id] is None, "the other one was not"
