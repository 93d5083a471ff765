"""One attempt (consumers.job_runner): every way it can end is an event, and the worker survives it."""

from __future__ import annotations

import asyncio
import uuid
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import pytest

from consumers.attempts import Abort, AbortSignal, Attempt
from consumers.cancellation import CancelWatch, CancelWatches
from consumers.errors import InputRejected, TransientEngineError
from consumers.job_runner import CLAIM_RIDES_ALONG_S, JobRunner, RetryPolicy
from consumers.ledger import Ledger
from consumers.ports import PlannedSegment, Rendering
from consumers.segment_reuse import SegmentCache
from contracts import AudioRef, JobEvent, Producer, utc_now
from contracts.engine_info import EngineInfo
from foundation.errors import BrokerUnavailable
from projections.reads.worker import CachedResult
from tests.support.job_logs import _Builder

DESCRIPTION = EngineInfo("fake", "m1", 24000, ("v",), ("en-us",), "cpu")


class FakeEngine:
    description = DESCRIPTION

    def __init__(self, fail_plan: Exception | None = None, fail_render: Exception | None = None) -> None:
        self.fail_plan, self.fail_render = fail_plan, fail_render

    def plan(
        self, text: str, lang: str, normalize: bool = True, input_format: str = "text", pronunciations: object = None
    ):
        if self.fail_plan:
            raise self.fail_plan
        return [PlannedSegment(i, 0, 1, word, None) for i, word in enumerate(text.split())]

    def render(self, segment, voice: str, speed: float):
        if self.fail_render:
            raise self.fail_render
        return Rendering(np.zeros(240, dtype=np.float32))


class FullDisk:
    def put(self, data: bytes, suffix: str) -> AudioRef:
        raise OSError(28, "No space left on device")


class Blobs:
    def put(self, data: bytes, suffix: str) -> AudioRef:
        return AudioRef(sha256="ab" * 32, uri="file:///b.wav")


@dataclass
class Appended:
    offset: int


class Log:
    def __init__(self, refuse_after: int | None = None) -> None:
        self.events: list[JobEvent] = []
        self.partitions: list[int | None] = []  # where each event was sent (None: its key's partition)
        self.refuse_after = refuse_after

    async def publish(self, event: JobEvent, *, partition: int | None = None) -> Appended:
        if self.refuse_after is not None and len(self.events) >= self.refuse_after:
            raise BrokerUnavailable("no broker")
        self.events.append(event)
        return Appended(100 + len(self.events))

    async def send(self, event: JobEvent, partition: int | None = None) -> asyncio.Future[Appended]:
        acknowledged: asyncio.Future[Appended] = asyncio.get_running_loop().create_future()
        self.partitions.append(partition)
        try:
            acknowledged.set_result(await self.publish(event, partition=partition))
        except BrokerUnavailable as exc:
            acknowledged.set_exception(exc)
        return acknowledged


async def call(fn, *args):
    return fn(*args)


def setup(engine=None, blobs=None, log=None, attempts: int = 3):
    log = log or Log()
    runner = JobRunner(
        engine or FakeEngine(),
        blobs or Blobs(),
        log,
        Producer(service="worker", instance="w"),
        "w",
        RetryPolicy(attempts, 0.0),
        call,
    )
    job = _Builder(uuid.UUID(int=9), request_text="Two words.")
    ledger = Ledger(timedelta(minutes=10))
    view = ledger.observe(job.queued(), 0)
    return runner, log, ledger, view, job


def attempt(ledger, view, number: int = 1) -> Attempt:
    return Attempt(view, view.request, number, ledger)


def kinds(log: Log) -> list[tuple[str, int]]:
    return [(e.type, e.attempt) for e in log.events]


async def test_a_clean_attempt_claims_renders_and_completes():
    runner, log, ledger, view, _ = setup()
    outcome = await runner.run(attempt(ledger, view))
    assert outcome.kind == "completed"
    # The last segment rides in the completion (JobCompleted 3): one record fewer (issue 41, item 2).
    assert kinds(log) == [("JobClaimed", 1), ("SegmentProduced", 1), ("JobCompleted", 1)]
    assert [log.events[1].payload.index, log.events[2].payload.segment.index] == [0, 1]
    assert log.events[2].payload.segment_count == 2
    assert view.state == "completed"


async def test_every_event_of_an_attempt_goes_to_the_partition_its_job_is_in_not_its_keys():
    """Routing places a job in any partition (producers.routing): the runner's events follow the ledger's
    partition, and so does a completion from the cache."""
    runner, log, ledger, view, _ = setup()
    ledger.place(17)
    await runner.run(attempt(ledger, view))
    duplicate = ledger.observe(_Builder(uuid.UUID(int=10), request_text="Two words.").queued(), 9)
    cached = ledger.live_result(duplicate.fingerprint, view.completion.occurred_at)
    assert cached is not None
    await runner.complete_from_cache(duplicate, cached, ledger)
    assert [e.type for e in log.events][-1] == "JobCompleted"
    assert len(log.partitions) == len(log.events) == 4
    assert set(log.partitions) == {17}


async def test_regression_a_transient_engine_error_while_planning_releases_the_job():
    """A transient engine error during planning escaped the runner and killed the worker after it had claimed."""
    runner, log, ledger, view, _ = setup(engine=FakeEngine(fail_plan=TransientEngineError("cuda hiccup")))
    outcome = await runner.run(attempt(ledger, view))
    assert outcome.kind == "released"
    assert kinds(log) == [("JobClaimed", 1), ("JobReleased", 1)]
    assert log.events[-1].payload.reason == "transient"
    assert "cuda hiccup" in log.events[-1].payload.message


async def test_regression_a_blob_that_cannot_be_written_releases_the_job_and_fails_it_on_the_last_attempt():
    """An OSError writing a blob (a full disk) escaped the runner and killed the worker."""
    runner, log, ledger, view, _ = setup(blobs=FullDisk())
    assert (await runner.run(attempt(ledger, view))).kind == "released"
    assert kinds(log)[-1] == ("JobReleased", 1)
    runner, log, ledger, view, _ = setup(blobs=FullDisk(), attempts=1)
    assert (await runner.run(attempt(ledger, view))).kind == "failed"
    assert log.events[-1].payload.reason_code == "storage_error"
    assert "No space left" in log.events[-1].payload.message


async def test_text_the_engine_cannot_speak_fails_the_job():
    runner, log, ledger, view, _ = setup(engine=FakeEngine(fail_plan=InputRejected("nothing to speak")))
    assert (await runner.run(attempt(ledger, view))).kind == "failed"
    assert kinds(log) == [("JobClaimed", 1), ("JobFailed", 1)]
    assert log.events[-1].payload.reason_code == "input_rejected"


async def test_attempts_exhausted_fail_the_job_with_the_last_error():
    runner, log, ledger, view, job = setup(attempts=2)
    for offset, event in enumerate([job.claimed(1), job.released(1), job.claimed(2), job.released(2)], start=1):
        ledger.observe(event, offset)
    assert (await runner.run(attempt(ledger, view, 3))).kind == "failed"
    failed = log.events[-1]
    assert (failed.type, failed.attempt, failed.payload.reason_code) == ("JobFailed", 2, "attempts_exhausted")
    assert failed.payload.message == "2 attempts failed; the last: engine hiccup"


async def test_an_unreachable_broker_is_left_to_the_worker():
    runner, _, ledger, view, _ = setup(log=Log(refuse_after=2))
    with pytest.raises(BrokerUnavailable):
        await runner.run(attempt(ledger, view))
    assert view.state == "claimed", "what was published counts: the next try claims one attempt higher"


async def test_regression_a_cache_hit_completion_has_an_id_of_its_own():
    """A cache-hit completion reused the event id of a real completion of the same attempt, so the
    projector dropped one of two facts."""
    runner, log, ledger, view, job = setup()
    source = CachedResult(uuid.UUID(int=99), 2, 200, utc_now() + timedelta(minutes=1))
    await runner.complete_from_cache(view, source, ledger)
    hit = log.events[-1]
    assert hit.payload.cache_hit
    assert hit.event_id != job.completed(0, 2).event_id


class GatedLog(Log):
    """A log whose acknowledgements wait until the test gives them."""

    def __init__(self) -> None:
        super().__init__()
        self.acks: list[asyncio.Future[Appended]] = []
        self.all_sent, self.claimed = asyncio.Event(), asyncio.Event()

    async def send(self, event: JobEvent, partition: int | None = None) -> asyncio.Future[Appended]:
        self.events.append(event)
        self.acks.append(asyncio.get_running_loop().create_future())
        if event.type == "JobCompleted":
            self.all_sent.set()
        if event.type == "JobClaimed":
            self.claimed.set()
        return self.acks[-1]


async def test_an_attempt_sends_its_events_without_waiting_for_each_acknowledgement():
    """The claim and the segments go out while earlier ones are unacknowledged; the completion waits for all
    of them, and the ledger records them in order once acknowledged."""
    log = GatedLog()
    runner, _, ledger, view, _ = setup(log=log)
    run = asyncio.create_task(runner.run(attempt(ledger, view)))
    await asyncio.wait_for(log.all_sent.wait(), 5)
    assert kinds(log) == [("JobClaimed", 1), ("SegmentProduced", 1), ("JobCompleted", 1)]
    assert view.state == "queued", "nothing is recorded before it is acknowledged"
    assert not run.done()
    for offset, ack in enumerate(log.acks, start=1):
        ack.set_result(Appended(offset))
    assert (await asyncio.wait_for(run, 5)).kind == "completed"
    assert view.state == "completed"


async def test_a_refused_claim_stops_the_attempt_at_the_next_segment():
    """Kafka refusing the claim (its acknowledgement fails while the first segment renders) ends the
    attempt before the next segment, instead of synthesizing the whole job for nothing."""
    log, rendering = GatedLog(), asyncio.Event()
    rendered: list[int] = []

    async def gated(fn, *args):
        if fn == engine.render:
            await rendering.wait()
            rendered.append(args[0].index)
        return fn(*args)

    engine = FakeEngine()
    runner = JobRunner(engine, Blobs(), log, Producer(service="worker", instance="w"), "w", RetryPolicy(3, 0.0), gated)
    _, _, ledger, view, _ = setup()
    run = asyncio.create_task(runner.run(attempt(ledger, view)))
    await asyncio.wait_for(log.claimed.wait(), 5)  # handed over before the first render, held at the gate
    log.acks[0].set_exception(BrokerUnavailable("not acknowledged"))
    rendering.set()
    with pytest.raises(BrokerUnavailable):
        await asyncio.wait_for(run, 5)
    assert rendered == [0], "the second segment is never rendered"
    assert view.state == "queued"


class WatchedEngine(FakeEngine):
    """Notes how many events the log held when each segment was rendered."""

    def __init__(self, log: Log, fail_render: Exception | None = None) -> None:
        super().__init__(fail_render=fail_render)
        self.log, self.seen_at_render = log, []

    def render(self, segment, voice: str, speed: float):
        self.seen_at_render.append(len(self.log.events))
        return super().render(segment, voice, speed)


async def test_a_fast_nodes_claim_goes_with_the_first_segment_and_a_slow_nodes_at_once():
    log = Log()
    engine = WatchedEngine(log)
    runner, _, ledger, view, _ = setup(engine=engine, log=log)
    await runner.run(attempt(ledger, view))  # the first job: no speed measured yet, the claim goes at once
    runner.activity.chars_per_s = 10 * len("Two words.") / CLAIM_RIDES_ALONG_S  # renders in a tenth of it
    second = _Builder(uuid.UUID(int=10), request_text="Two words.")
    held = ledger.observe(second.queued(), 1)
    await runner.run(attempt(ledger, held))

    assert engine.seen_at_render[0] == 1  # the first job's claim was in the log before its first segment
    assert engine.seen_at_render[2] == 3  # the second's was not: only the first job's three records
    assert kinds(log)[3:] == [("JobClaimed", 1), ("SegmentProduced", 1), ("JobCompleted", 1)]


async def test_a_held_claim_is_recorded_before_whatever_ends_the_attempt():
    log = Log()
    runner, _, ledger, view, _ = setup(engine=WatchedEngine(log, fail_render=InputRejected("no phonemes")), log=log)
    runner.activity.chars_per_s = 1e9
    outcome = await runner.run(attempt(ledger, view))
    assert outcome.kind == "failed"
    assert kinds(log) == [("JobClaimed", 1), ("JobFailed", 1)]


async def test_a_completion_not_waited_for_returns_at_once_and_says_how_it_went_once_the_worker_waits():
    log = GatedLog()
    runner, _, ledger, view, _ = setup(log=log)
    result = await asyncio.wait_for(runner.run(Attempt(view, view.request, 1, ledger, wait_for_completion=False)), 5)
    assert result.kind == "completed"
    assert kinds(log)[-1] == ("JobCompleted", 1)
    assert result.recorded is not None
    assert not result.recorded.done(), "nothing acknowledged yet"
    assert runner.acknowledgements.fingerprints() == {view.fingerprint}
    for offset, ack in enumerate(log.acks, start=1):
        ack.set_result(Appended(offset))
    await runner.acknowledgements.wait_all()
    assert result.recorded.result() is True
    assert view.state == "completed"


async def test_a_refused_completion_not_waited_for_says_so_and_records_nothing_after_the_refusal():
    log = GatedLog()
    runner, _, ledger, view, _ = setup(log=log)
    result = await runner.run(Attempt(view, view.request, 1, ledger, wait_for_completion=False))
    for offset, ack in enumerate(log.acks[:-1], start=1):
        ack.set_result(Appended(offset))
    log.acks[-1].set_exception(BrokerUnavailable("not acknowledged"))
    with pytest.raises(BrokerUnavailable):
        await runner.acknowledgements.wait_all()
    assert result.recorded is not None
    assert result.recorded.result() is False, "the worker acts on the job again"
    assert view.state == "claimed", "the claim and segments count, the completion does not"


class CancelledAfterFirstSegment:
    """The projection shows the job cancelled from the second boundary on; ``waiting`` says a duplicate wants it."""

    def __init__(self, waiting: bool) -> None:
        self.asked, self.waiting = 0, waiting

    async def cancelled_among(self, job_ids) -> set:
        self.asked += 1
        return set(job_ids) if self.asked > 1 else set()

    async def wanted_elsewhere(self, fingerprint, job_id) -> bool:
        return self.waiting


class CountingEngine(FakeEngine):
    def __init__(self) -> None:
        super().__init__()
        self.rendered: list[int] = []

    def render(self, segment, voice: str, speed: float):
        self.rendered.append(segment.index)
        return super().render(segment, voice, speed)


def watched(view, lookup) -> AbstractContextManager[CancelWatch]:
    """``view``'s job watched by a worker's shared watch that asks at every boundary."""
    return CancelWatches(lookup, every_s=0.0).watch(view.job_id, view.fingerprint)


async def test_a_job_cancelled_mid_synthesis_stops_at_the_next_segment_boundary_and_records_nothing_more():
    engine = CountingEngine()
    runner, log, ledger, _, _ = setup(engine=engine)
    view = ledger.observe(_Builder(uuid.UUID(int=11), request_text="Three short words.").queued(), 1)
    with watched(view, CancelledAfterFirstSegment(waiting=False)) as watch:
        result = await runner.run(Attempt(view, view.request, 1, ledger, cancel=watch))
    assert (result.kind, result.segments) == ("cancelled", 1)
    assert kinds(log) == [("JobClaimed", 1), ("SegmentProduced", 1)]
    assert engine.rendered == [0]
    assert view.state == "claimed", "what the attempt recorded is acknowledged before it returns"


async def test_a_cancelled_job_that_a_duplicate_waits_for_renders_the_rest_without_recording_it():
    engine = CountingEngine()
    runner = JobRunner(
        engine, Blobs(), log := Log(), Producer(service="worker", instance="w"), "w", RetryPolicy(3, 0.0), call,
        segments=SegmentCache(None),
    )  # fmt: skip
    ledger = Ledger(timedelta(minutes=10))
    view = ledger.observe(_Builder(uuid.UUID(int=12), request_text="Three short words.").queued(), 0)
    with watched(view, CancelledAfterFirstSegment(waiting=True)) as watch:
        result = await runner.run(Attempt(view, view.request, 1, ledger, cancel=watch))
    assert (result.kind, result.segments) == ("cancelled", 3)
    assert engine.rendered == [0, 1, 2], "rendered for the duplicate, which reuses it"
    assert kinds(log) == [("JobClaimed", 1), ("SegmentProduced", 1)], "nothing after the cancellation is recorded"


async def test_a_job_the_worker_wants_back_is_released_at_the_next_segment_boundary():
    runner, log, ledger, view, _ = setup()
    signal = AbortSignal(Abort("rebalance", "its partition went to another worker"))
    assert (await runner.run(Attempt(view, view.request, 1, ledger, abort=signal))).kind == "released"
    assert kinds(log) == [("JobClaimed", 1), ("JobReleased", 1)]
    released = log.events[-1].payload
    assert (released.reason, released.not_before) == ("rebalance", None)
    assert released.message == "released at segment 0: its partition went to another worker"
