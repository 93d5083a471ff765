"""Batched forwards (consumers.engine_turns with ``batch`` > 1): which claims' segments ride in one engine call.

The engine's calls are held by a gate the test opens, so every assertion is about an order of events, not
about time: who waited, who rode together, who joined and who left between forwards.
"""

from __future__ import annotations

import asyncio
import threading
import types
import uuid
from datetime import timedelta

import numpy as np
import pytest

from consumers.attempts import AbortSignal, Attempt
from consumers.engine_turns import EngineTurns, HeldTurns
from consumers.errors import InputRejected
from consumers.job_runner import JobRunner, RetryPolicy
from consumers.ledger import Ledger
from consumers.ports import PlannedSegment, Rendering
from consumers.scheduling import Contender, TurnLog
from contracts import Producer
from tests.support.events import segments_recorded
from tests.support.job_logs import _Builder
from tests.unit.test_job_runner import Blobs, CountingEngine, FakeEngine, Log
from tests.unit.test_scheduling import job, policy

pytestmark = pytest.mark.unit


class BatchingEngine:
    """Records each engine call's segments; refuses a segment whose text says "bad", batched or alone."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def render(self, segment: PlannedSegment, voice: str, speed: float) -> Rendering:
        self.calls.append([segment.text])
        return self._one(segment)

    def render_batch(self, items):
        self.calls.append([segment.text for segment, _, _ in items])
        if any("bad" in segment.text for segment, _, _ in items):
            raise InputRejected("a segment of the batch cannot be spoken")
        return [self._one(segment) for segment, _, _ in items]

    @staticmethod
    def _one(segment: PlannedSegment) -> Rendering:
        if "bad" in segment.text:
            raise InputRejected(f"cannot speak {segment.text!r}")
        return Rendering(np.zeros(len(segment.text), dtype=np.float32))


class Gate:
    """The engine thread's stand-in: each call waits until the test lets the next one through."""

    def __init__(self) -> None:
        self.opened = asyncio.Semaphore(0)
        self.entered = 0

    async def call(self, fn, *args):
        self.entered += 1
        await self.opened.acquire()
        return fn(*args)

    def open(self, calls: int = 1) -> None:
        for _ in range(calls):
            self.opened.release()


def claim(turns: EngineTurns, contender: Contender) -> HeldTurns:
    return HeldTurns(turns, contender, AbortSignal())


async def say(held: HeldTurns, gate: Gate, engine: BatchingEngine, text: str, *, last: bool = True) -> Rendering:
    """One segment of ``held``'s claim through its forward; ``last``: its attempt ends after it."""
    segment = PlannedSegment(0, 0, len(text), text, None)
    held.asking(len(text))
    try:
        async with held.engine():
            return await held.render(gate.call, engine, segment, "v", 1.0)
    finally:
        if last:
            held.finished()


async def until(predicate, what: str) -> None:
    """Let the loop run until ``predicate()`` holds (a poll of the loop's own progress, with a deadline)."""
    for _ in range(1000):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never: {what}")


async def test_claims_waiting_together_ride_in_one_forward():
    turns, gate, engine = EngineTurns(policy(), TurnLog(policy()), batch=3), Gate(), BatchingEngine()
    first = asyncio.create_task(say(claim(turns, job(1, 0)), gate, engine, "first"))
    await until(lambda: gate.entered == 1, "the first claim's segment is on the engine")
    others = [asyncio.create_task(say(claim(turns, job(n, 50)), gate, engine, f"job{n}")) for n in (2, 3, 4)]
    await until(lambda: len(turns.waiting()) == 3, "three claims wait behind it")
    gate.open(2)
    await asyncio.gather(first, *others)
    assert engine.calls == [["first"], ["job2", "job3", "job4"]]
    assert turns.forwards == 2


async def test_a_forward_takes_no_more_than_its_batch_and_the_rest_ride_in_the_next():
    turns, gate, engine = EngineTurns(policy(), TurnLog(policy()), batch=2), Gate(), BatchingEngine()
    first = asyncio.create_task(say(claim(turns, job(1, 0)), gate, engine, "first"))
    await until(lambda: gate.entered == 1, "the first segment is on the engine")
    others = [asyncio.create_task(say(claim(turns, job(n, 50)), gate, engine, f"job{n}")) for n in (2, 3, 4)]
    await until(lambda: len(turns.waiting()) == 3, "three wait")
    gate.open(3)
    await asyncio.gather(first, *others)
    assert [len(call) for call in engine.calls] == [1, 2, 1]


async def test_an_interactive_claim_rides_in_the_next_forward_ahead_of_batch_claims():
    turns, gate, engine = EngineTurns(policy(), TurnLog(policy()), batch=2), Gate(), BatchingEngine()
    first = asyncio.create_task(say(claim(turns, job(1, 0, priority="batch")), gate, engine, "first"))
    await until(lambda: gate.entered == 1, "a batch job's segment is on the engine")
    batch_jobs = [
        asyncio.create_task(say(claim(turns, job(n, 50, priority="batch")), gate, engine, f"batch{n}")) for n in (2, 3)
    ]
    await until(lambda: len(turns.waiting()) == 2, "two batch claims wait")
    asked = asyncio.create_task(say(claim(turns, job(9, 400, priority="interactive")), gate, engine, "asked"))
    await until(lambda: len(turns.waiting()) == 3, "the interactive claim waits too, last in")
    gate.open(3)
    await asyncio.gather(first, asked, *batch_jobs)
    assert "asked" in engine.calls[1], f"the interactive segment waited more than one forward: {engine.calls}"


async def test_the_least_served_tenant_gets_a_place_in_the_next_forward():
    shares = policy()
    turns, gate, engine = EngineTurns(shares, TurnLog(shares), batch=2), Gate(), BatchingEngine()
    shares.shares.charge("big", 30.0, now=asyncio.get_running_loop().time())
    first = asyncio.create_task(say(claim(turns, job(1, 0, tenant="big")), gate, engine, "first"))
    await until(lambda: gate.entered == 1, "big's segment is on the engine")
    bigs = [
        asyncio.create_task(say(claim(turns, job(n, 10, tenant="big")), gate, engine, f"big{n}")) for n in (2, 3, 4)
    ]
    await until(lambda: len(turns.waiting()) == 3, "big's claims wait")
    small = asyncio.create_task(say(claim(turns, job(5, 900, tenant="small")), gate, engine, "small"))
    await until(lambda: len(turns.waiting()) == 4, "small's claim waits behind them")
    gate.open(3)
    await asyncio.gather(first, small, *bigs)
    assert "small" in engine.calls[1], f"the tenant that used the engine least waited: {engine.calls}"


async def test_claims_that_just_made_a_segment_keep_their_places_while_they_store_it():
    """Continuous batching: two claims with work left ride together again, the forward waiting the moment
    the first takes to come back rather than going without it."""
    turns, gate, engine = EngineTurns(policy(), TurnLog(policy()), batch=2), Gate(), BatchingEngine()
    a, b = claim(turns, job(1, 100)), claim(turns, job(2, 100))
    blocker = asyncio.create_task(say(claim(turns, job(3, 0)), gate, engine, "blocker"))
    await until(lambda: gate.entered == 1, "the engine is busy")
    firsts = [asyncio.create_task(say(c, gate, engine, f"{n}-one", last=False)) for n, c in ((1, a), (2, b))]
    await until(lambda: len(turns.waiting()) == 2, "both wait")
    gate.open(2)
    await asyncio.gather(blocker, *firsts)  # both made a segment and have work left: their places are kept
    second_b = asyncio.create_task(say(b, gate, engine, "2-two"))
    await until(lambda: b.job.job_id in turns._holders, "b is back in its place")
    assert gate.entered == 2, "the forward went without a, whose place was kept"
    second_a = asyncio.create_task(say(a, gate, engine, "1-two"))
    gate.open(1)
    await asyncio.gather(second_a, second_b)
    assert sorted(engine.calls[2]) == ["1-two", "2-two"]


async def test_a_claim_joins_the_forward_being_formed_and_one_that_ends_leaves_it():
    turns, gate, engine = EngineTurns(policy(), TurnLog(policy()), batch=3), Gate(), BatchingEngine()
    a = claim(turns, job(1, 100))
    first = asyncio.create_task(say(a, gate, engine, "a-one", last=False))
    await until(lambda: gate.entered == 1, "a's segment is on the engine")
    gate.open(1)
    await first  # a has work left: the next forward is formed with a's place kept
    joiner = asyncio.create_task(say(claim(turns, job(2, 50)), gate, engine, "joiner"))
    await until(lambda: len(turns._holders) == 1, "the new claim joined the forward being formed at once")
    assert not turns.waiting()
    a.finished()  # a's attempt ends instead of coming back: its place is given up
    gate.open(1)
    await joiner
    assert engine.calls == [["a-one"], ["joiner"]]


async def test_one_segment_the_engine_cannot_speak_fails_its_own_claim_only():
    turns, gate, engine = EngineTurns(policy(), TurnLog(policy()), batch=3), Gate(), BatchingEngine()
    first = asyncio.create_task(say(claim(turns, job(1, 0)), gate, engine, "first"))
    await until(lambda: gate.entered == 1, "the engine is busy")
    texts = ("good one", "bad one", "good two")
    tasks = [asyncio.create_task(say(claim(turns, job(n, 50)), gate, engine, t)) for n, t in enumerate(texts, 2)]
    await until(lambda: len(turns.waiting()) == 3, "three wait")
    gate.open(2)
    await first
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(outcomes[1], InputRejected)
    assert [o.samples.size for o in (outcomes[0], outcomes[2])] == [len("good one"), len("good two")]
    assert engine.calls[1] == list(texts)  # tried together first, then told apart: one by one
    assert engine.calls[2:] == [["good one"], ["bad one"], ["good two"]]


async def test_a_forward_charges_each_segment_its_share_of_the_engine_time():
    shares = policy()
    turns, gate, engine = EngineTurns(shares, TurnLog(shares), batch=2), Gate(), BatchingEngine()
    first = asyncio.create_task(say(claim(turns, job(1, 0, tenant="c")), gate, engine, "first"))
    await until(lambda: gate.entered == 1, "the engine is busy")
    pair = [
        asyncio.create_task(say(claim(turns, job(n, 50, tenant=t)), gate, engine, t)) for n, t in ((2, "a"), (3, "b"))
    ]
    await until(lambda: len(turns.waiting()) == 2, "both wait")
    gate.open(2)
    await asyncio.gather(first, *pair)
    now = asyncio.get_running_loop().time()
    used_a, used_b = shares.shares.used("a", now), shares.shares.used("b", now)
    assert used_a > 0
    assert used_a == pytest.approx(used_b), "one forward, two segments: each tenant pays half"


class RecordingEngine(FakeEngine):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def render_batch(self, items):
        self.batches.append(len(items))
        return [self.render(segment, voice, speed) for segment, voice, speed in items]


async def gated_call(fn, *args):
    await asyncio.sleep(0)  # as the node's FIFO: the engine's work happens off the loop
    return fn(*args)


async def test_held_claims_of_a_runner_complete_with_their_segments_batched():
    """The job runner end to end on the fake engine: three claims of three segments each, batch 3, every job
    complete with all its segments, and segments of different claims sharing engine calls."""
    log, engine = Log(), RecordingEngine()
    runner = JobRunner(
        engine, Blobs(), log, Producer(service="worker", instance="w"), "w", RetryPolicy(3, 0.0), gated_call
    )
    turns = EngineTurns(policy(), TurnLog(policy()), batch=3)
    ledger = Ledger(timedelta(minutes=10))
    attempts = []
    for n in (1, 2, 3):
        text = f"one{n} two{n} three{n}"
        view = ledger.observe(_Builder(uuid.UUID(int=n), request_text=text).queued(), n)
        contender = Contender(view.job_id, view.fingerprint, "default", "interactive", len(text), n)
        held = HeldTurns(turns, contender, AbortSignal())
        attempts.append(Attempt(view, view.request, 1, ledger, held.abort, turns=held, wait_for_completion=True))
    outcomes = await asyncio.gather(*(runner.run(attempt) for attempt in attempts))
    assert [o.kind for o in outcomes] == ["completed"] * 3
    produced = segments_recorded(log.events)
    assert sorted((e.job_id.int, e.payload.index) for e in produced) == [(n, i) for n in (1, 2, 3) for i in range(3)]
    assert max(engine.batches, default=1) > 1, "no two claims' segments ever shared an engine call"


async def test_when_more_want_places_a_forward_takes_segments_of_one_length():
    """Padding to the longest item is a batch's waste: a batch claim whose next segment is of another length
    bucket waits a forward, while one of the first pick's length takes the place."""
    turns, gate, engine = EngineTurns(policy(), TurnLog(policy()), batch=2), Gate(), BatchingEngine()
    first = asyncio.create_task(say(claim(turns, job(1, 0, priority="batch")), gate, engine, "first"))
    await until(lambda: gate.entered == 1, "the engine is busy")
    texts = {2: "short one", 3: "a much longer segment, ten times the length of the others: " * 3, 4: "short two"}
    tasks = [
        asyncio.create_task(say(claim(turns, job(n, 50, priority="batch")), gate, engine, text))
        for n, text in texts.items()
    ]
    await until(lambda: len(turns.waiting()) == 3, "three wait")
    gate.open(3)
    await asyncio.gather(first, *tasks)
    assert engine.calls[1] == ["short one", "short two"]
    assert engine.calls[2] == [texts[3]]


async def test_an_interactive_claim_is_never_put_off_for_its_length():
    turns, gate, engine = EngineTurns(policy(), TurnLog(policy()), batch=2), Gate(), BatchingEngine()
    first = asyncio.create_task(say(claim(turns, job(1, 0)), gate, engine, "first"))
    await until(lambda: gate.entered == 1, "the engine is busy")
    long_text = "an interactive request of a length quite unlike the short ones: " * 3
    tasks = [
        asyncio.create_task(say(claim(turns, job(2, 10)), gate, engine, "short")),
        asyncio.create_task(say(claim(turns, job(3, 900)), gate, engine, long_text)),
        asyncio.create_task(say(claim(turns, job(4, 20, priority="batch")), gate, engine, "shorter")),
    ]
    await until(lambda: len(turns.waiting()) == 3, "three wait")
    gate.open(3)
    await asyncio.gather(first, *tasks)
    assert engine.calls[1] == ["short", long_text], "the interactive claims rode first, whatever their lengths"


async def test_a_forward_carries_no_more_padded_ids_than_the_device_takes():
    """Issue 37, item 3: a forward is bounded by its segments times its longest (the measured knee, the
    device's memory) as well as by its count: three 10-id segments where 20 padded ids fit go two and one."""
    turns, gate, engine = EngineTurns(policy(), TurnLog(policy()), batch=4, padded_ids=20), Gate(), BatchingEngine()
    first = asyncio.create_task(say(claim(turns, job(1, 0)), gate, engine, "first"))
    await until(lambda: gate.entered == 1, "the engine is busy")
    texts = ("ten chars1", "ten chars2", "ten chars3")
    tasks = [asyncio.create_task(say(claim(turns, job(n, 50)), gate, engine, t)) for n, t in enumerate(texts, 2)]
    await until(lambda: len(turns.waiting()) == 3, "three wait")
    gate.open(3)
    await asyncio.gather(first, *tasks)
    assert [len(call) for call in engine.calls] == [1, 2, 1]
    assert sorted(text for call in engine.calls[1:] for text in call) == sorted(texts)


async def test_short_segments_fill_the_places_a_long_one_leaves_within_the_padded_ids():
    turns, gate, engine = EngineTurns(policy(), TurnLog(policy()), batch=4, padded_ids=20), Gate(), BatchingEngine()
    first = asyncio.create_task(say(claim(turns, job(1, 0)), gate, engine, "first"))
    await until(lambda: gate.entered == 1, "the engine is busy")
    texts = {2: "a segment of 20 ids..", 3: "five1", 4: "five2", 5: "five3", 6: "five4"}
    tasks = [asyncio.create_task(say(claim(turns, job(n, 10 * n)), gate, engine, t)) for n, t in texts.items()]
    await until(lambda: len(turns.waiting()) == 5, "five wait")
    gate.open(3)
    await asyncio.gather(first, *tasks)
    assert engine.calls[1] == [texts[2]], "the long one, first in the policy's order, rode alone"
    assert engine.calls[2] == ["five1", "five2", "five3", "five4"], "four of five ids make 20"


async def test_a_claim_too_long_for_the_forward_being_formed_waits_for_the_next():
    turns, gate, engine = EngineTurns(policy(), TurnLog(policy()), batch=3, padded_ids=20), Gate(), BatchingEngine()
    a = claim(turns, job(1, 100))
    first = asyncio.create_task(say(a, gate, engine, "a-one-long", last=False))
    await until(lambda: gate.entered == 1, "a's segment is on the engine")
    gate.open(1)
    await first  # a has work left: the next forward is formed with a's place kept (10 ids)
    joiner = asyncio.create_task(say(claim(turns, job(2, 50)), gate, engine, "joiner is long"))
    await until(lambda: len(turns.waiting()) == 1, "the joiner waits: beside a, 2 x 14 ids are past 20")
    assert not turns._holders
    a.finished()  # a's attempt ends instead of coming back: the next forward is the joiner's
    gate.open(1)
    await joiner
    assert engine.calls == [["a-one-long"], ["joiner is long"]]


class HeldBlobs(Blobs):
    """A blob store whose writes wait until the test lets them through (they run off the loop)."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.writing = 0

    def put(self, data: bytes, suffix: str):
        self.writing += 1
        self.open.wait(10)
        return super().put(data, suffix)


async def test_a_claim_whose_last_segment_was_made_keeps_no_place_in_the_next_forward():
    """A one-sentence job's work left counts down only once its segment is stored: its place in the next
    forward was kept for it (read first, it was put first) while it stored it, and given up only when it
    ended, the engine idle meanwhile. Its last segment made, no place is kept for it: the next forward goes
    with the claims that wait while it stores its audio."""
    log, engine, blobs = Log(), CountingEngine(), HeldBlobs()
    runner = JobRunner(
        engine, blobs, log, Producer(service="worker", instance="w"), "w", RetryPolicy(3, 0.0), gated_call
    )
    turns = EngineTurns(policy(), TurnLog(policy()), batch=2)
    ledger = Ledger(timedelta(minutes=10))
    attempts = []
    for n in (1, 2, 3):
        text = f"sentence{n}"  # one segment
        view = ledger.observe(_Builder(uuid.UUID(int=n), request_text=text).queued(), n)
        contender = Contender(view.job_id, view.fingerprint, "default", "batch", len(text), n)
        held = HeldTurns(turns, contender, AbortSignal())
        attempts.append(Attempt(view, view.request, 1, ledger, held.abort, turns=held, wait_for_completion=True))
    runs = [asyncio.create_task(runner.run(attempt)) for attempt in attempts]
    try:
        for _ in range(2000):  # the first claim's segment alone on the idle engine, then the other two together
            if len(engine.rendered) == 3:
                break
            await asyncio.sleep(0.001)
        assert len(engine.rendered) == 3, "the next forward waited for a claim storing its last segment"
        assert turns.forwards == 2
    finally:
        blobs.open.set()
    outcomes = await asyncio.gather(*runs)
    assert [o.kind for o in outcomes] == ["completed"] * 3
    assert not turns._reserved


async def test_regression_a_batched_segment_was_charged_its_whole_forward_in_the_nodes_speed(monkeypatch):
    """Each place of a batched forward waits for the whole forward; the worker's activity counted that whole
    wait as the segment's engine time, so the node's measured speed (the backlog the API admits by) was as
    many times too slow as the forwards were large. A segment is charged its share of the forward."""
    ticks = iter(range(0, 1_000_000, 6))  # every forward takes 6 "seconds" of the forwards' clock

    monkeypatch.setattr("consumers.forwards.time", types.SimpleNamespace(monotonic=lambda: float(next(ticks))))
    log, engine = Log(), RecordingEngine()
    runner = JobRunner(
        engine, Blobs(), log, Producer(service="worker", instance="w"), "w", RetryPolicy(3, 0.0), gated_call
    )
    turns = EngineTurns(policy(), TurnLog(policy()), batch=3)
    ledger = Ledger(timedelta(minutes=10))
    attempts = []
    for n in (1, 2, 3):
        view = ledger.observe(_Builder(uuid.UUID(int=n), request_text=f"one{n} two{n} three{n}").queued(), n)
        contender = Contender(view.job_id, view.fingerprint, "default", "interactive", len(view.request.text), n)
        held = HeldTurns(turns, contender, AbortSignal())
        attempts.append(Attempt(view, view.request, 1, ledger, held.abort, turns=held, wait_for_completion=True))
    await asyncio.gather(*(runner.run(attempt) for attempt in attempts))
    batched = [size for size in engine.batches if size > 1]
    assert batched, "no forward was batched"
    # Each batched forward is 6 s of the forwards' clock, shared by its segments, so they add up to 6 s a
    # forward; the segments rendered alone are timed by the real clock (microseconds here). Timed by each
    # place's own wait, as before the fix, the batched segments added up to the real microseconds instead
    # (on a real engine: the whole forward for each of them).
    assert runner.activity.busy_s == pytest.approx(6.0 * len(batched), abs=0.5)
