"""The worker's scheduling (consumers.scheduling, run_queue, engine_turns): which job to claim, whose segment
goes next, and what each job is told it waited behind. No services: the real runner over a fake engine."""

from __future__ import annotations

import asyncio
import collections
import random
import time
import uuid
from datetime import timedelta

import pytest
from aiokafka.structs import TopicPartition

from consumers.attempts import Abort, AbortSignal, Attempt
from consumers.engine_turns import EngineTurns, HeldTurns, TurnWithdrawn
from consumers.job_runner import JobRunner, RetryPolicy
from consumers.ledger import Ledger
from consumers.run_queue import RunQueue, Waiting
from consumers.scheduling import Contender, FairShares, Policy, Turn, TurnLog
from contracts import JobClaimed, Producer, SegmentProduced
from contracts.scheduling import MAX_NAMED, NAMED, WaitedBehind
from contracts.scheduling import EngineTurns as EngineTurns_
from tests.support.job_logs import _Builder
from tests.unit.test_job_runner import Blobs, FakeEngine, Log

pytestmark = pytest.mark.unit
TP = TopicPartition("jobs", 0)


def policy(weights: dict[str, float] | None = None, per_batch: int = 4) -> Policy:
    return Policy(FairShares(weights or {}, half_life_s=60.0), per_batch, aging_s=30.0)


def job(
    n: int, chars: int = 100, tenant: str = "a", priority: str = "interactive", since: float | None = None
) -> Contender:
    waiting_since = time.monotonic() if since is None else since
    return Contender(uuid.UUID(int=n), f"{n:064x}", tenant, priority, chars, seq=n, since=waiting_since)  # type: ignore[arg-type]


def test_interactive_work_goes_first_but_batch_work_gets_its_turn():
    p = policy(per_batch=2)
    batch, interactive = job(1, 10, priority="batch"), job(2, 500)
    assert p.pick([batch, interactive], interactive_in_a_row=0, now=0.0) is interactive
    assert p.pick([batch, interactive], interactive_in_a_row=2, now=0.0) is batch
    assert p.rule(interactive, batch, 0.0) == "interactive_first"
    assert p.rule(batch, interactive, 0.0) == "batch_turn"


def test_the_tenant_that_used_the_engine_least_goes_first_by_its_weight():
    p = policy(weights={"big": 4.0})
    p.shares.charge("a", 10.0, now=0.0)
    p.shares.charge("big", 20.0, now=0.0)  # 20 s over a weight of 4: less than a's 10 s
    mine, theirs = job(1, 10, tenant="a"), job(2, 900, tenant="big")
    assert p.pick([mine, theirs], 0, now=0.0) is theirs
    assert p.rule(theirs, mine, 0.0) == "fair_share"


def test_a_tenants_use_is_forgotten_with_its_half_life():
    shares = FairShares({}, half_life_s=10.0)
    shares.charge("a", 8.0, now=0.0)
    assert shares.used("a", now=10.0) == pytest.approx(4.0)
    assert shares.used("nobody", now=10.0) == 0.0


def test_within_a_tenant_the_shorter_job_goes_first_and_a_long_wait_ages_a_long_job():
    p = policy()
    long, short = job(1, 1200, since=0.0), job(2, 30, since=100.0)
    assert p.pick([long, short], 0, now=100.0) is short
    assert p.rule(short, long, 100.0) == "shorter_first"
    # Waiting 30 min, the long job's 1200 characters count as 1200 / 61: less than a fresh 30.
    assert p.pick([long, job(3, 30, since=1800.0)], 0, now=1800.0) is long


def test_equal_jobs_go_in_the_order_they_were_read():
    p = policy()
    first, second = job(1, 50), job(2, 50)
    assert p.pick([second, first], 0, now=0.0) is first
    assert p.rule(first, second, 0.0) == "log_order"


def waiting(c: Contender, offset: int | None = None) -> Waiting:
    return Waiting(TP, c.seq if offset is None else offset, c)


def test_the_run_queue_takes_jobs_by_the_policy_not_in_the_order_read():
    queue = RunQueue(policy(), lookahead=10)
    for c in (job(1, 1200), job(2, 20), job(3, 20, tenant="b"), job(4, 5, priority="batch")):
        queue.add(waiting(c))
    taken = [queue.take(set()) for _ in range(4)]
    assert [e.job.seq for e in taken if e] == [2, 3, 1, 4]
    assert queue.take(set()) is None
    assert len(queue) == 0


def test_a_job_whose_fingerprint_is_held_waits_and_batch_work_can_be_held_back():
    queue = RunQueue(policy(), lookahead=10)
    held, other = job(1, 10), job(2, 10, priority="batch")
    queue.add(waiting(held))
    queue.add(waiting(other))
    assert queue.take({held.fingerprint}, allow_batch=False) is None
    assert queue.take({held.fingerprint}).job is other
    assert queue.take(set()).job is held


def test_the_run_queue_counts_and_shows_what_waits_and_drops_a_revoked_partition():
    queue = RunQueue(policy(), lookahead=3)
    queue.add(waiting(job(1, 100, tenant="a")))
    queue.add(waiting(job(2, 40, tenant="a")))
    queue.add(Waiting(TopicPartition("jobs", 1), 0, job(3, 10, tenant="b", priority="batch")))
    assert queue.full
    assert [(c.tenant, c.priority, c.jobs, c.text_chars) for c in queue.counts()] == [
        ("a", "interactive", 2, 140),
        ("b", "batch", 1, 10),
    ]
    assert [q.job_id.int for q in queue.shown()] == [2, 1, 3]
    queue.drop({TopicPartition("jobs", 1)})
    assert len(queue) == 2
    assert not queue.full


def test_what_a_job_waited_behind_names_each_job_its_segments_and_the_rule():
    p = policy()
    log = TurnLog(p)
    waiter = job(9, 500)
    start = log.count
    for _ in range(3):
        log.record(job(1, 20), now=0.0)
    log.record(job(2, 20, tenant="b"), now=0.0)
    log.record(waiter, now=0.0)  # its own turns do not count
    behind = log.behind(waiter, start, waited_s=1.5)
    assert behind is not None
    assert [(j.job_id.int, j.segments, j.rule) for j in behind.jobs] == [(1, 3, "shorter_first"), (2, 1, "fair_share")]
    assert (behind.job_count, behind.segment_count, behind.waited_ms, behind.complete) == (2, 4, 1500, True)
    assert log.behind(waiter, log.count, 0.0) is None


def test_a_worker_names_the_jobs_that_held_the_engine_most_and_counts_the_rest():
    """Issue 41: a claim and a completion each named up to 32 jobs (3.9 KB) under a backlog; a worker now
    names the NAMED that took the most segments, and counts them all."""
    p = policy()
    log = TurnLog(p)
    waiter = job(99, 500)
    start = log.count
    for n in range(1, 21):
        for _ in range(n):  # job n takes n segments: jobs 20 down to 13 took the most
            log.record(job(n, 20), now=0.0)
    behind = log.behind(waiter, start, waited_s=1.0)
    assert behind is not None
    assert NAMED == 8
    assert [(j.job_id.int, j.segments) for j in behind.jobs] == [(n, n) for n in range(20, 12, -1)]
    assert (behind.job_count, behind.segment_count) == (20, sum(range(1, 21)))


def test_regression_a_record_naming_32_jobs_as_workers_wrote_them_before_stays_readable():
    named = tuple(
        EngineTurns_(job_id=uuid.UUID(int=n), tenant="a", priority="batch", segments=1, rule="log_order")
        for n in range(1, MAX_NAMED + 1)
    )
    behind = WaitedBehind(policy="fair-srpt", jobs=named, job_count=40, segment_count=40)
    assert WaitedBehind.model_validate_json(behind.model_dump_json()).jobs == named
    with pytest.raises(ValueError, match="at most 32"):
        WaitedBehind(policy="fair-srpt", jobs=(*named, named[0]))


def test_a_turn_log_that_no_longer_reaches_back_says_so():
    log = TurnLog(policy(), capacity=2)
    for n in range(5):
        log.record(job(n + 1, 10), now=0.0)
    behind = log.behind(job(9), since_turn=0, waited_s=1.0)
    assert behind is not None
    assert not behind.complete
    assert behind.segment_count == 2


class SegmentWatchingLog(Log):
    def __init__(self) -> None:
        super().__init__()
        self.first_segment = asyncio.Event()

    async def publish(self, event, *, partition=None):
        if isinstance(event, SegmentProduced):
            self.first_segment.set()
        return await super().publish(event, partition=partition)


async def yielding_call(fn, *args):
    """As the node's FIFO: the engine's work happens off the loop, so other tasks run meanwhile."""
    await asyncio.sleep(0)
    return fn(*args)


def held(
    turns: EngineTurns, builder: _Builder, ledger: Ledger, runner_text: str, seq: int
) -> tuple[Attempt, HeldTurns]:
    view = ledger.observe(builder.queued(), seq)
    contender = Contender(builder.job_id, view.fingerprint, "default", "interactive", len(runner_text), seq)
    claim = HeldTurns(turns, contender, AbortSignal(), claimed_turn=turns.log.count)
    return Attempt(view, view.request, 1, ledger, claim.abort, turns=claim, wait_for_completion=True), claim


async def test_a_short_job_claimed_behind_a_long_one_takes_the_engine_at_the_next_segment():
    """The heart of issue 27: with both claims held, the short job's segments go before the rest of the long
    one's, and the long job's completion says what it waited behind, and why."""
    log = SegmentWatchingLog()
    runner = JobRunner(
        FakeEngine(), Blobs(), log, Producer(service="worker", instance="w"), "w", RetryPolicy(3, 0.0), yielding_call
    )
    turns = EngineTurns(policy(), TurnLog(policy()))
    ledger = Ledger(timedelta(minutes=10))
    long_text = " ".join(f"word{i}" for i in range(12))
    long_job = _Builder(uuid.UUID(int=1), request_text=long_text)
    short_job = _Builder(uuid.UUID(int=2), request_text="Two words.")
    long_attempt, _ = held(turns, long_job, ledger, long_text, 1)
    short_attempt, _ = held(turns, short_job, ledger, "Two words.", 2)

    long_run = asyncio.create_task(runner.run(long_attempt))
    await asyncio.wait_for(log.first_segment.wait(), 5)  # the long job is under way
    short_outcome = await runner.run(short_attempt)
    long_outcome = await long_run

    assert (short_outcome.kind, long_outcome.kind) == ("completed", "completed")
    order = [(e.job_id.int, type(e).__name__) for e in log.events if not isinstance(e, JobClaimed)]
    short_done = order.index((2, "JobCompleted"))
    long_segments_before = sum(1 for n, kind in order[:short_done] if n == 1 and kind == "SegmentProduced")
    # The long job's segments made meanwhile: the one in hand when it came, and those made while the short one
    # was planned and while each of its own was stored (the engine is never left idle for those; how many is
    # up to the threads that store the audio). Never the long job's whole twelve and its completion.
    long_segments = sum(1 for n, kind in order if n == 1 and kind == "SegmentProduced")
    assert long_segments_before < long_segments, f"the short job waited behind the long one: {order}"
    assert order.index((2, "JobCompleted")) < order.index((1, "JobCompleted"))
    # What each was told it waited behind is pinned below, where both wait at once.


async def test_when_both_wait_the_shorter_claim_gets_the_engine_and_the_longer_is_told_why():
    turns = EngineTurns(policy(), TurnLog(policy()))
    holder = HeldTurns(turns, job(1, 50), AbortSignal())
    long, short = HeldTurns(turns, job(2, 900), AbortSignal()), HeldTurns(turns, job(3, 40), AbortSignal())
    order: list[int] = []

    async def segment(claim: HeldTurns) -> None:
        async with claim.engine():
            order.append(claim.job.seq)
        claim.finished()  # its last segment

    async with holder.engine():
        waiting = [asyncio.create_task(segment(long)), asyncio.create_task(segment(short))]
        await asyncio.sleep(0)
        assert sorted(turns.waiting()) == sorted([long.job.job_id, short.job.job_id])
    holder.finished()
    await asyncio.gather(*waiting)
    assert order == [3, 2]
    told = long.waited()
    assert told is not None
    assert [(j.job_id.int, j.rule) for j in told.jobs] == [(1, "log_order"), (3, "shorter_first")]


async def segment_then_done(claim: HeldTurns, done: asyncio.Event, hold: asyncio.Event | None = None) -> None:
    async with claim.engine():
        if hold is not None:
            await hold.wait()
    claim.finished()  # its only segment
    done.set()


async def test_regression_a_claim_that_lost_the_engine_is_told_so_when_the_winner_is_done_before_it_asks_again():
    """tests/e2e/test_fair_scheduling.py, on a loaded machine: the long job's completion said it waited behind
    nothing, though the short one took the engine between its segments. The long claim asks for its next turn
    only once its segment is stored; by then the short job's only segment was done, so nothing held the engine
    and nothing was recorded."""
    turns = EngineTurns(policy(), TurnLog(policy()))
    long, short = HeldTurns(turns, job(1, 900), AbortSignal()), HeldTurns(turns, job(2, 40), AbortSignal())
    done = asyncio.Event()
    async with long.engine():
        waiter = asyncio.create_task(segment_then_done(short, done))
        await asyncio.sleep(0)
    await asyncio.wait_for(done.wait(), 5)  # the short job's segment went first, and is done
    async with long.engine():  # the long one asks again: the engine is free
        pass
    await waiter
    told = long.waited()
    assert told is not None, "the long claim was not told the short one took its turn"
    assert [(j.job_id.int, j.segments, j.rule) for j in told.jobs] == [(2, 1, "shorter_first")]


async def test_a_turn_that_passed_a_claim_counts_once_when_it_asks_while_the_winner_still_holds_it():
    turns = EngineTurns(policy(), TurnLog(policy()))
    long, short = HeldTurns(turns, job(1, 900), AbortSignal()), HeldTurns(turns, job(2, 40), AbortSignal())
    done, hold = asyncio.Event(), asyncio.Event()
    async with long.engine():
        waiter = asyncio.create_task(segment_then_done(short, done, hold))
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert turns.running == short.job.job_id
    asking = asyncio.create_task(long.engine().__aenter__())  # while the short one's segment is on the engine
    await asyncio.sleep(0)
    hold.set()
    await asyncio.wait_for(asking, 5)
    await waiter
    told = long.waited()
    assert told is not None
    assert [(j.job_id.int, j.segments) for j in told.jobs] == [(2, 1)], "one turn, counted once"


async def test_the_claim_the_policy_still_puts_first_keeps_the_engine_between_its_segments():
    """Going round the claims would finish none until all were nearly done (every completion, and every
    offset commit, later: tests/e2e/test_lag.py saw a healthy backlog judged a STALL): the turn is kept for
    the claim that just made a segment while the policy still puts it first, and goes on when it finishes."""
    turns = EngineTurns(policy(), TurnLog(policy()))
    ahead, behind = HeldTurns(turns, job(1, 100), AbortSignal()), HeldTurns(turns, job(2, 100), AbortSignal())
    order: list[int] = []
    async with ahead.engine():
        waiter = asyncio.create_task(behind.engine().__aenter__())
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert not waiter.done(), "kept for the claim read first, which has work left"
    async with ahead.engine():
        order.append(1)
    ahead.finished()
    await asyncio.wait_for(waiter, 5)  # granted once the first finished
    assert order == [1]


async def test_a_claim_given_back_while_it_waits_for_the_engine_stops_waiting():
    turns = EngineTurns(policy(), TurnLog(policy()))
    first = HeldTurns(turns, job(1, 0), AbortSignal())  # its last segment: the turn is not kept for it
    second = HeldTurns(turns, job(2), AbortSignal())
    async with first.engine():
        waiter = asyncio.create_task(second.engine().__aenter__())
        await asyncio.sleep(0)
        assert turns.waiting() == [second.job.job_id]
        second.abort.give_back(Abort("shutdown", "the worker is stopping"))
        with pytest.raises(TurnWithdrawn):
            await waiter
    assert turns.running is None
    assert turns.waiting() == []


async def test_regression_a_claim_cancelled_just_as_its_turn_came_does_not_keep_the_engine():
    turns = EngineTurns(policy(), TurnLog(policy()))
    first, second = HeldTurns(turns, job(1, 0), AbortSignal()), HeldTurns(turns, job(2), AbortSignal())
    async with first.engine():
        waiter = asyncio.create_task(second.engine().__aenter__())
        await asyncio.sleep(0)
    waiter.cancel()  # granted on release, cancelled before it ran (a hung engine's watchdog, say)
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert turns.running is None
    async with first.engine():
        assert turns.running == first.job.job_id


def _behind_by_scanning(turns, policy_, waiter, since_turn):
    """What a claim waited behind, read turn by turn (the turn log's answer as it was first written)."""
    counts: dict[uuid.UUID, tuple[object, int]] = {}
    for turn in reversed(turns):
        if turn.number <= since_turn:
            break
        if turn.job.job_id == waiter.job_id:
            continue
        counts[turn.job.job_id] = (turn, counts.get(turn.job.job_id, (turn, 0))[1] + 1)
    ranked = sorted(counts.values(), key=lambda item: -item[1])
    named = [(t.job.job_id, n, policy_.rule(t.job, waiter, t.at)) for t, n in ranked[:NAMED]]
    return named, len(counts), sum(n for _, n in counts.values())


@pytest.mark.parametrize("capacity", [3, 40, 8192])
def test_what_a_job_waited_behind_is_what_reading_every_turn_since_says(capacity):
    """Behind a deep backlog a claim waited hundreds of turns: the log answers from its jobs' turns, without
    reading each turn since, and says the same as reading them (jobs of one turn and of many, the waiter's own
    turns, a log that no longer reaches back)."""
    rng = random.Random(capacity)
    p = policy()
    log = TurnLog(p, capacity=capacity)
    kept: collections.deque = collections.deque(maxlen=capacity)
    jobs = [job(n, chars=rng.choice([10, 100, 1000]), tenant=rng.choice("ab")) for n in range(1, 120)]
    for step in range(600):
        picked = rng.choice(jobs[:8]) if rng.random() < 0.4 else jobs[step % len(jobs)]
        log.record(picked, now=float(step))
        kept.append(Turn(log.count, picked, float(step)))
        if step % 7:
            continue
        waiter, since = rng.choice(jobs), rng.randrange(0, log.count + 1)
        behind = log.behind(waiter, since, waited_s=0.5)
        named, job_count, segment_count = _behind_by_scanning(kept, p, waiter, since)
        if not job_count:
            assert behind is None
            continue
        assert behind is not None
        assert [(j.job_id, j.segments, j.rule) for j in behind.jobs] == named
        assert (behind.job_count, behind.segment_count) == (job_count, segment_count)
        assert behind.complete == (kept[0].number <= since + 1)
