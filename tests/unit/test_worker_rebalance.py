"""The worker's side of a rebalance, with the consumer and the engine faked (no services)."""

from __future__ import annotations

import asyncio

from aiokafka.structs import TopicPartition

from consumers.attempts import AttemptResult
from projections.reads.worker import Outlook
from tests.support.events import one_of_each
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


class GatedLookup:
    """The cache lookup of the first job blocks until the test opens the gate."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def outlook(self, job_id, fingerprint, now):
        self.entered.set()
        await self.gate.wait()
        return Outlook()

    async def request_of(self, job_id):
        return None


async def test_regression_revocation_waits_for_the_record_in_hand_and_drops_the_rest_of_the_batch():
    """A revocation that came while the worker was looking up the cache committed the old offset at
    once, and the worker then synthesized the job anyway: the new owner synthesized it a second time.
    The revocation now waits for the claims held on the partition, and drops the jobs still waiting."""
    first, second = one_of_each("First job.")[0], one_of_each("Second job.")[0]
    consumer = FakeConsumer({TP: [record(first, 0), record(second, 1)]})
    lookup, runner = GatedLookup(), RecordingRunner()
    worker = make_worker(consumer, runner, lookup, held_claims=1)
    tail_scanned(worker)
    stop = asyncio.Event()
    loop_task = asyncio.create_task(worker.run(stop))
    await asyncio.wait_for(lookup.entered.wait(), 5)
    assert len(worker.waiting) == 1, "the second job waits for a claim"

    revoke = asyncio.create_task(worker.on_partitions_revoked({TP}))
    await asyncio.sleep(0)  # one step: the revocation runs until it waits for the held claim
    assert len(worker.waiting) == 0, "the job not claimed yet is left to the next owner"
    assert not revoke.done(), "the revocation waits for the claim in hand"
    assert consumer.commits == []

    lookup.gate.set()
    await asyncio.wait_for(revoke, 5)
    consumer.assigned = set()
    await worker.on_partitions_assigned(set())  # the partition went to another member
    await asyncio.wait_for(consumer.idle.wait(), 5)
    stop.set()
    await asyncio.wait_for(loop_task, 5)

    assert runner.jobs == [first.job_id], "the rest of the revoked batch is left to the next owner"
    assert consumer.commits[0] == {TP: 1}, "the handled record's offset is committed on revocation"


class RevokingConsumer(FakeConsumer):
    """The rebalance completes while the poll is in flight; the poll then returns the old batch."""

    async def getmany(self, *partitions, timeout_ms: int = 0, max_records: int | None = None) -> dict:
        if self._batches:
            # aiokafka may still report the old assignment until the new one arrives.
            await self.listener.on_partitions_revoked({TP})
            await self.listener.on_partitions_assigned(set())  # the partition went to another member
        return await super().getmany(*partitions, timeout_ms=timeout_ms, max_records=max_records)


async def test_regression_a_batch_returned_after_a_revocation_is_dropped():
    """A poll that straddled a revocation returned records of a partition already given to another
    worker, and both workers synthesized the job."""
    job = one_of_each("Straddling job.")[0]
    consumer = RevokingConsumer({TP: [record(job, 0)]})
    runner = RecordingRunner()
    worker = make_worker(consumer, runner, GatedLookup())
    tail_scanned(worker)
    stop = asyncio.Event()
    loop_task = asyncio.create_task(worker.run(stop))
    await asyncio.wait_for(consumer.idle.wait(), 5)
    stop.set()
    await asyncio.wait_for(loop_task, 5)
    assert runner.jobs == []


class ReassigningConsumer(FakeConsumer):
    """The first poll spans a whole rebalance (revoke, then assign with a seek) before returning records."""

    def __init__(self, batch: dict) -> None:
        super().__init__(batch)
        self._records = batch
        self.seeks: list[tuple[TopicPartition, int]] = []

    async def getmany(self, *partitions, timeout_ms: int = 0, max_records: int | None = None) -> dict:
        if self._batches and not self.seeks:
            await self.listener.on_partitions_revoked(set())
            tail_scanned(self.listener)
        return await super().getmany(*partitions, timeout_ms=timeout_ms, max_records=max_records)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append((tp, offset))
        self._batches.append({tp: [r for r in self._records[tp] if r.offset >= offset]})


async def test_regression_records_polled_across_the_first_join_are_not_lost():
    """Dropping the batch that straddled the first join left the consumer's position past it: the
    jobs in it were never synthesized (and seeking back stalled aiokafka's fetcher)."""
    job = one_of_each("Across the join.")[0]
    consumer = ReassigningConsumer({TP: [record(job, 0)]})
    runner = RecordingRunner()
    worker = make_worker(consumer, runner, NoCache())
    stop = asyncio.Event()
    loop_task = asyncio.create_task(worker.run(stop))
    await asyncio.wait_for(consumer.idle.wait(), 5)
    stop.set()
    await asyncio.wait_for(loop_task, 5)
    assert runner.jobs == [job.job_id]


class RebalancingConsumer(FakeConsumer):
    """Like aiokafka: a commit issued while a rebalance is pending waits until the rebalance is over,
    except the one the revocation callback itself makes."""

    def __init__(self, batch: dict) -> None:
        super().__init__(batch)
        self.rebalance_over = asyncio.Event()
        self.rebalancing = False
        self.callback_task: asyncio.Task | None = None

    async def commit(self, offsets: dict) -> None:
        if self.rebalancing and asyncio.current_task() is not self.callback_task:
            await self.rebalance_over.wait()
        await super().commit(offsets)


class RebalanceDuringJob(RecordingRunner):
    """A new member joins while the job synthesizes: the coordinator starts revoking."""

    def __init__(self, consumer: RebalancingConsumer) -> None:
        super().__init__()
        self.consumer = consumer
        self.revocation: asyncio.Task | None = None

    async def run(self, attempt) -> AttemptResult:
        self.consumer.rebalancing = True

        async def revoke() -> None:
            await self.worker.on_partitions_revoked({TP})
            self.consumer.rebalancing = False
            self.consumer.rebalance_over.set()

        self.revocation = asyncio.create_task(revoke())
        self.consumer.callback_task = self.revocation
        return await super().run(attempt)


async def test_regression_committing_after_a_job_does_not_deadlock_a_rebalance():
    """The worker committed the job's offset while holding the lock the revocation callback waits for;
    the commit waited for the rebalance, the rebalance for the callback: the member was evicted."""
    job = one_of_each("Rebalanced job.")[0]
    consumer = RebalancingConsumer({TP: [record(job, 0)]})
    runner = RebalanceDuringJob(consumer)
    worker = make_worker(consumer, runner, NoCache())
    runner.worker = worker
    tail_scanned(worker)
    stop = asyncio.Event()
    loop_task = asyncio.create_task(worker.run(stop))
    await asyncio.wait_for(consumer.rebalance_over.wait(), 5)
    stop.set()
    await asyncio.wait_for(loop_task, 5)
    assert runner.jobs == [job.job_id]
    assert {TP: 1} in consumer.commits


async def test_regression_records_handed_out_before_the_tail_scan_finished_wait_for_it():
    """aiokafka returned records of a new assignment while the assignment callback was still scanning
    the tails; the worker skipped them as not yet its own and they were never synthesized."""
    job = one_of_each("Early record.")[0]
    consumer = FakeConsumer({TP: [record(job, 0)]})
    runner = RecordingRunner()
    worker = make_worker(consumer, runner, NoCache())
    stop = asyncio.Event()
    loop_task = asyncio.create_task(worker.run(stop))
    # The batch is in the worker's hands before the tail scan is done: a worker that does not
    # wait for the scan drops its records right there, before this test runs again.
    await asyncio.wait_for(consumer.handed_out.wait(), 5)
    assert runner.jobs == [], "nothing is handled before the assignment's tails are scanned"
    tail_scanned(worker)
    await asyncio.wait_for(consumer.idle.wait(), 5)
    stop.set()
    await asyncio.wait_for(loop_task, 5)
    assert runner.jobs == [job.job_id]


async def test_commits_are_batched_while_jobs_keep_coming_and_made_when_idle():
    jobs = [one_of_each(f"Job number {i}.")[0] for i in range(5)]
    consumer = FakeConsumer({TP: [record(job, offset) for offset, job in enumerate(jobs)]})
    runner = RecordingRunner()
    worker = make_worker(consumer, runner, NoCache(), commit_interval_s=3600)
    tail_scanned(worker)
    await run_until(worker, consumer.idle, within_s=5)

    assert runner.jobs == [job.job_id for job in jobs]
    offsets = [commit[TP] for commit in consumer.commits]
    assert offsets[-1] == 5, "every job done: committed when idle"
    assert offsets == sorted(set(offsets)), "nothing committed twice, nothing taken back"
    assert len(offsets) <= 3, f"batched, not one commit per job: {offsets}"
