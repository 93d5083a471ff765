"""The projector lingers between batches only while jobs queue up (projections.linger)."""

from __future__ import annotations

import uuid

from projections.linger import Linger, LiveJobs, ends_a_job
from projections.reducer import Outcome
from tests.support.job_logs import _Builder

LINGER = Linger(seconds=0.01, backlog=3)


def applied(*events):
    return [(event, Outcome.APPLIED) for event in events]


def test_it_lingers_from_the_backlog_on_and_stops_once_jobs_end():
    jobs = [_Builder(uuid.UUID(int=i)) for i in range(3)]
    live = LiveJobs()
    live.observe(applied(jobs[0].queued(), jobs[1].queued()))
    assert live.linger_s(LINGER) == 0.0  # two live jobs: a lone client's job is never held back
    live.observe(applied(jobs[2].queued(), jobs[0].claimed(1)))
    assert live.linger_s(LINGER) == 0.01
    live.observe(applied(jobs[0].completed(1, 1)))
    assert live.count == 2
    assert live.linger_s(LINGER) == 0.0


def test_only_applied_events_count_and_every_end_counts_once():
    job, other = _Builder(uuid.UUID(int=1)), _Builder(uuid.UUID(int=2))
    live = LiveJobs()
    live.observe([(job.queued(), Outcome.APPLIED), (job.queued(), Outcome.DUPLICATE)])
    live.observe([(job.completed(1, 1), Outcome.FENCED), (other.queued(), Outcome.APPLIED)])
    assert live.count == 2
    live.observe(applied(job.cancelled(), other.failed(1)))
    assert live.count == 0
    live.observe(applied(job.completed(1, 1)))  # ended before this projector started: never below zero
    assert live.count == 0


def test_a_linger_of_zero_never_waits():
    live = LiveJobs()
    live.observe(applied(*(_Builder(uuid.UUID(int=i)).queued() for i in range(10))))
    assert live.linger_s(Linger(seconds=0.0, backlog=1)) == 0.0


def test_the_events_that_end_a_job_are_those_the_state_machine_leads_to_a_terminal_state():
    job = _Builder(uuid.UUID(int=1))
    ending = [job.completed(1, 1), job.completed(0, 1, cache_hit=True), job.failed(1), job.cancelled()]
    going_on = [job.claimed(1), job.segment(1, 0), job.released(1), job.evicted()]
    assert [ends_a_job(e) for e in ending] == [True] * 4
    assert [ends_a_job(e) for e in going_on] == [False] * 4
