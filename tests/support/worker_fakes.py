"""Fakes of the worker's consumer, runner and lookup, for unit tests of its loop (no services)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from datetime import timedelta

from aiokafka import ConsumerRecord
from aiokafka.structs import TopicPartition

from consumers.attempts import AttemptResult
from consumers.ledger import Ledger
from consumers.worker import SynthWorker
from consumers.worker_activity import Activity
from foundation.errors import BrokerUnavailable
from foundation.settings import WorkerSettings
from projections.reads.worker import Outlook
from tests.support.records import record_of
from voxlog.composition.configs import worker_config

TP = TopicPartition("jobs", 0)


def record(event, offset: int) -> ConsumerRecord:
    return record_of(event, TP.topic, TP.partition, offset)


def make_worker(consumer, runner, lookup, scan_tails=None, outlooks=None, **fields) -> SynthWorker:
    """A worker over fakes, configured as the composition root would, then with ``fields``: a worker setting
    (held_claims) as the settings say it, anything else as its config's field (commit_interval_s,
    interactive_per_batch, rebalance_grace_s: constants of the composition, no settings; issue 38, item 3). The
    grace period is long so that no test depends on timing out. ``outlooks``: the lookup the worker reads its
    claims' outlooks from grouped (consumers.outlooks), as the composition root gives it; none, one read a claim."""
    settings = {name: value for name, value in fields.items() if name in WorkerSettings.model_fields}
    config = worker_config(
        WorkerSettings(worker_id="w", kafka_bootstrap_servers="unused:9092", jobs_topic="jobs", **settings)
    )
    # replace() refuses a name WorkerConfig lacks: a field a test sets is never silently dropped.
    config = replace(config, **{"rebalance_grace_s": 30, **{k: v for k, v in fields.items() if k not in settings}})
    return SynthWorker(config, consumer, runner, lookup, dead_letter=None, scan_tails=scan_tails, outlooks=outlooks)  # type: ignore[arg-type]


async def run_until(worker: SynthWorker, done: asyncio.Event, within_s: float = 30.0) -> None:
    """Run the worker's loop until ``done`` is set, then stop it and wait for it to end."""
    stop = asyncio.Event()
    loop = asyncio.create_task(worker.run(stop))
    await asyncio.wait_for(done.wait(), within_s)
    stop.set()
    await asyncio.wait_for(loop, 10)


def tail_scanned(worker: SynthWorker) -> None:
    """What the tail scan of an assignment of TP leaves behind: an empty ledger, from offset 0."""
    worker.partitions.adopt({TP: 0}, {TP: Ledger(timedelta(minutes=10))})


class WatchedLock(asyncio.Lock):
    """A lock that says when somebody waits for it while it is held."""

    def __init__(self) -> None:
        super().__init__()
        self.contended = asyncio.Event()
        self.contended_again = asyncio.Event()  # somebody waited, gave up, and waits again
        self._contentions = 0

    async def acquire(self) -> bool:
        if self.locked():
            self._contentions += 1
            self.contended.set()
            if self._contentions > 1:
                self.contended_again.set()
        return await super().acquire()


class FakeConsumer:
    def __init__(self, batch: dict) -> None:
        self._batches = [batch]
        self.commits: list[dict] = []
        self.assigned = {TP}
        self.idle = asyncio.Event()
        self.handed_out = asyncio.Event()  # the first batch was returned
        self.polls = 0
        self.polled = asyncio.Event()  # set by every poll

    def subscribe(self, topics, listener) -> None:
        self.listener = listener

    async def getmany(self, *partitions, timeout_ms: int = 0, max_records: int | None = None) -> dict:
        self.polls += 1
        self.polled.set()
        if self._batches:
            self.handed_out.set()
            return self._batches.pop(0)
        settled = getattr(getattr(self, "listener", None), "settled", lambda: True)
        if timeout_ms > 0 and settled():  # a worker with records in hand polls without waiting; claims held: busy
            self.idle.set()
        await asyncio.sleep(timeout_ms / 1000)
        return {}

    def assignment(self) -> set:
        return set(self.assigned)

    async def commit(self, offsets: dict) -> None:
        self.commits.append({tp: meta.offset for tp, meta in offsets.items()})

    def pause(self, *tps) -> None: ...

    def resume(self, *tps) -> None: ...


class NoCache:
    async def outlook(self, job_id, fingerprint, now):
        return Outlook()

    async def request_of(self, job_id):
        return None

    async def result_blobs(self, job_id):
        return []


class StoredBlobs:
    """A blob store where every blob is still there."""

    def touch(self, refs) -> bool:
        return True


class FakeAcknowledgements:
    """The completions a RecordingRunner handed over, acknowledged (or refused) when the worker waits for them."""

    def __init__(self) -> None:
        self.pending: list[tuple[str, asyncio.Future[bool]]] = []  # (fingerprint, recorded)
        self.waits: list[int] = []  # how many completions each wait acknowledged
        self.refuse_next_wait = False
        self.gate: asyncio.Event | None = None  # given, Kafka answers a wait only once it is set
        self.waiting = asyncio.Event()  # a wait for pending completions began

    def __len__(self) -> int:
        return len(self.pending)

    def fingerprints(self) -> set[str]:
        return {fingerprint for fingerprint, _ in self.pending}

    async def wait_all(self) -> None:
        pending, self.pending = self.pending, []
        if not pending:
            return
        self.waiting.set()
        if self.gate is not None:
            await self.gate.wait()
        ok = not self.refuse_next_wait
        self.refuse_next_wait = False
        for _, recorded in pending:
            recorded.set_result(ok)
        self.waits.append(len(pending))
        if not ok:
            raise BrokerUnavailable("Kafka did not acknowledge the completion")


class RecordingRunner:
    """Runs nothing: notes each job and attempt number it was handed, and completes it."""

    def __init__(self) -> None:
        self.jobs: list[uuid.UUID] = []
        self.attempts: list[tuple[uuid.UUID, int]] = []
        self.acknowledgements = FakeAcknowledgements()
        self.activity = Activity()
        self.blobs = StoredBlobs()

    async def run(self, attempt) -> AttemptResult:
        self.jobs.append(attempt.job.job_id)
        self.attempts.append((attempt.job.job_id, attempt.number))
        if attempt.wait_for_completion:
            return AttemptResult("completed")
        # As the real runner: the completion is acknowledged once the worker waits for it.
        recorded = asyncio.get_running_loop().create_future()
        self.acknowledgements.pending.append((attempt.job.fingerprint, recorded))
        return AttemptResult("completed", recorded=recorded)
