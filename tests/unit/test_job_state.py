"""The job state machine and the fencing rule (contracts.job_state), and the worker's ledger that folds with it."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from hypothesis import given, settings

from consumers.ledger import Ledger
from contracts import JobEvent, JobState, JobStatus, fold
from contracts.job_state import (
    RULES,
    STATUS_EVENT_TYPES,
    TERMINAL_STATES,
    Fenced,
    FenceReason,
    status_implied_by,
    transition,
)
from tests.support.job_logs import _Builder, arbitrary_logs, realistic_logs

Q, C, R, D, F = JobState.QUEUED, JobState.CLAIMED, JobState.RELEASED, JobState.COMPLETED, JobState.FAILED
X = JobState.CANCELLED
job = _Builder(uuid.UUID(int=7))


def outcome(status: JobStatus | None, event: JobEvent) -> JobStatus | FenceReason:
    result = transition(status, event)
    return result.reason if isinstance(result, Fenced) else result


@pytest.mark.parametrize(
    ("before", "event", "after"),
    [
        (None, job.queued(), JobStatus(Q, 0)),
        (JobStatus(Q, 0), job.queued(), FenceReason.DUPLICATE),
        (None, job.claimed(1), FenceReason.UNKNOWN_JOB),
        (JobStatus(Q, 0), job.claimed(1), JobStatus(C, 1)),
        (JobStatus(Q, 0), job.claimed(0), FenceReason.STALE_ATTEMPT),
        (JobStatus(C, 2), job.claimed(2), FenceReason.STALE_ATTEMPT),
        (JobStatus(C, 1), job.claimed(2), JobStatus(C, 2)),
        (JobStatus(R, 1), job.claimed(2), JobStatus(C, 2)),
        (JobStatus(D, 1), job.claimed(2), FenceReason.TERMINAL),
        (JobStatus(C, 1), job.segment(1, 0), JobStatus(C, 1)),
        (JobStatus(C, 2), job.segment(1, 0), FenceReason.STALE_ATTEMPT),
        (JobStatus(R, 1), job.segment(1, 0), FenceReason.WRONG_STATE),
        (JobStatus(C, 1), job.completed(1, 1), JobStatus(D, 1)),
        (JobStatus(D, 2), job.evicted(), JobStatus(D, 2)),
        (JobStatus(Q, 0), job.evicted(), FenceReason.WRONG_STATE),
        (JobStatus(F, 1), job.evicted(), FenceReason.WRONG_STATE),
        (None, job.evicted(), FenceReason.UNKNOWN_JOB),
        (JobStatus(C, 2), job.completed(1, 1), FenceReason.STALE_ATTEMPT),
        (JobStatus(R, 1), job.completed(1, 1), FenceReason.WRONG_STATE),
        (JobStatus(Q, 0), job.completed(0, 1), FenceReason.WRONG_STATE),
        (JobStatus(Q, 0), job.completed(0, 1, cache_hit=True), JobStatus(D, 0)),
        (JobStatus(R, 2), job.completed(2, 1, cache_hit=True), JobStatus(D, 2)),
        (JobStatus(C, 1), job.completed(1, 1, cache_hit=True), JobStatus(D, 1)),
        (JobStatus(R, 2), job.completed(1, 1, cache_hit=True), FenceReason.STALE_ATTEMPT),
        (JobStatus(C, 1), job.released(1), JobStatus(R, 1)),
        (JobStatus(R, 1), job.released(1), FenceReason.WRONG_STATE),
        (JobStatus(C, 2), job.released(1), FenceReason.STALE_ATTEMPT),
        (JobStatus(Q, 0), job.failed(0), JobStatus(F, 0)),
        (JobStatus(R, 3), job.failed(3), JobStatus(F, 3)),
        (JobStatus(C, 2), job.failed(1), FenceReason.STALE_ATTEMPT),
        (JobStatus(F, 1), job.failed(1), FenceReason.TERMINAL),
        (JobStatus(D, 1), job.completed(1, 1, cache_hit=True), FenceReason.TERMINAL),
        # A cancellation names no attempt: it ends whichever holds the live job, and keeps its number.
        (JobStatus(Q, 0), job.cancelled(), JobStatus(X, 0)),
        (JobStatus(C, 2), job.cancelled(), JobStatus(X, 2)),
        (JobStatus(R, 1), job.cancelled(), JobStatus(X, 1)),
        (JobStatus(D, 1), job.cancelled(), FenceReason.TERMINAL),
        (JobStatus(F, 1), job.cancelled(), FenceReason.TERMINAL),
        (JobStatus(X, 0), job.cancelled(), FenceReason.TERMINAL),
        (None, job.cancelled(), FenceReason.UNKNOWN_JOB),
        # After it, the attempt it cut short can record nothing more.
        (JobStatus(X, 2), job.segment(2, 1), FenceReason.TERMINAL),
        (JobStatus(X, 2), job.completed(2, 1), FenceReason.TERMINAL),
        (JobStatus(X, 0), job.completed(0, 1, cache_hit=True), FenceReason.TERMINAL),
        (JobStatus(X, 2), job.claimed(3), FenceReason.TERMINAL),
    ],
)
def test_transition(before, event, after):
    assert outcome(before, event) == after


def test_every_event_type_but_jobqueued_has_a_rule_and_segments_change_no_status():
    assert {rule.event_type for rule in RULES.values()} | {"JobQueued"} >= STATUS_EVENT_TYPES
    assert "SegmentProduced" not in STATUS_EVENT_TYPES
    assert all(rule.to_state not in {JobState.QUEUED} for rule in RULES.values())
    assert all(not (rule.from_states & TERMINAL_STATES) for rule in RULES.values()), "terminal means terminal"


@pytest.mark.parametrize(
    ("event", "status"),
    [
        (job.queued(), JobStatus(Q, 0)),
        (job.claimed(2), JobStatus(C, 2)),
        (job.segment(2, 1), JobStatus(C, 2)),
        (job.released(2), JobStatus(R, 2)),
        (job.completed(3, 1), JobStatus(D, 3)),
        (job.failed(1), JobStatus(F, 1)),
        (job.cancelled(), JobStatus(X, 0)),
    ],
)
def test_a_reader_starting_mid_log_takes_a_jobs_first_event_at_its_word(event, status):
    assert status_implied_by(event) == status


def ledger_statuses(events: list[JobEvent]) -> dict[uuid.UUID, JobStatus]:
    ledger = Ledger(timedelta(minutes=10))
    for event in events:
        if event.type in STATUS_EVENT_TYPES:  # the worker filters the rest out by header
            ledger.observe(event)
    return {job_id: view.status for job_id, view in ledger.jobs.items()}


@settings(max_examples=400)
@given(realistic_logs())
def test_the_ledger_ends_where_the_fold_does_on_realistic_logs(events):
    assert ledger_statuses(events) == fold(events)


@settings(max_examples=400)
@given(arbitrary_logs())
def test_the_ledger_ends_where_the_fold_does_on_any_sequence(events):
    assert ledger_statuses(events) == fold(events)


@settings(max_examples=400)
@given(realistic_logs())
def test_a_copy_of_an_event_delivered_again_changes_nothing(events):
    first_copies, seen = [], set()
    for event in events:
        if event.event_id not in seen:
            seen.add(event.event_id)
            first_copies.append(event)
    assert fold(events) == fold(first_copies)


@settings(max_examples=300)
@given(realistic_logs())
def test_a_stale_attempts_late_events_never_change_the_newer_attempts_status(events):
    """Whatever an older attempt says after a newer attempt's claim is fenced."""
    statuses: dict[uuid.UUID, JobStatus] = {}
    for event in events:
        before = statuses.get(event.job_id)
        after = transition(before, event)
        # JobQueued and JobCancelled speak for no attempt: their envelope's 0 is not a stale attempt's.
        if before is not None and event.attempt < before.attempt and event.type not in {"JobQueued", "JobCancelled"}:
            assert isinstance(after, Fenced), (before, event)
        if isinstance(after, JobStatus):
            statuses[event.job_id] = after


def test_the_ledger_keeps_a_synthesized_result_for_coalescing_but_not_a_cache_hit():
    ledger = Ledger(timedelta(minutes=10))
    first, second = _Builder(uuid.UUID(int=11)), _Builder(uuid.UUID(int=12))
    for event in [first.queued(), first.claimed(1), first.completed(1, 3)]:
        ledger.observe(event)
    result = ledger.live_result(first.fingerprint, first.completed(1, 3).occurred_at)
    assert result is not None
    assert (result.job_id, result.segment_count) == (first.job_id, 3)
    ledger.observe(second.queued())
    ledger.observe(second.completed(0, 2, cache_hit=True))
    assert ledger.live_result(second.fingerprint, second.queued().occurred_at) is None


def test_a_result_expires_after_the_cache_ttl():
    ledger = Ledger(timedelta(seconds=30))
    built = _Builder(uuid.UUID(int=13))
    done = built.completed(1, 1)
    for event in [built.queued(), built.claimed(1), done]:
        ledger.observe(event)
    assert ledger.live_result(built.fingerprint, done.occurred_at + timedelta(seconds=29)) is not None
    assert ledger.live_result(built.fingerprint, done.occurred_at + timedelta(seconds=30)) is None


def test_an_evicted_result_is_not_reused_even_when_the_job_is_seen_again():
    ledger = Ledger(timedelta(minutes=10))
    built = _Builder(uuid.UUID(int=14))
    done = built.completed(1, 1)
    for event in [built.queued(), built.claimed(1), done]:
        ledger.observe(event)
    assert ledger.live_result(built.fingerprint, done.occurred_at) is not None
    ledger.observe(built.evicted())
    assert ledger.live_result(built.fingerprint, done.occurred_at) is None
    ledger.observe(done)  # the completion read again (a redelivery) must not bring the result back
    assert ledger.live_result(built.fingerprint, done.occurred_at) is None
    assert ledger.jobs[built.job_id].state is JobState.COMPLETED


def test_a_reader_that_starts_at_an_eviction_knows_the_job_completed_and_reuses_nothing():
    ledger = Ledger(timedelta(minutes=10))
    built = _Builder(uuid.UUID(int=15))
    ledger.observe(built.evicted())
    assert ledger.jobs[built.job_id].state is JobState.COMPLETED
    assert ledger.live_result(built.fingerprint, built.queued().occurred_at) is None


def test_the_ledger_remembers_the_request_and_the_retry_time():
    ledger = Ledger(timedelta(minutes=10))
    built = _Builder(uuid.UUID(int=14))
    queued = built.queued()
    view = ledger.observe(queued)
    assert view.request == queued.payload.request
    ledger.observe(built.claimed(1))
    release = built.released(1).model_copy(
        update={"payload": built.released(1).payload.model_copy(update={"not_before": queued.occurred_at})}
    )
    view = ledger.observe(release)
    assert (view.state, view.attempt, view.not_before) == (JobState.RELEASED, 1, queued.occurred_at)


def test_the_ledger_forgets_the_oldest_finished_jobs_first_and_never_an_unfinished_one():
    ledger = Ledger(timedelta(minutes=10), max_jobs=2)
    unfinished, finished, newest = (_Builder(uuid.UUID(int=n)) for n in (21, 22, 23))
    ledger.observe(unfinished.queued())
    for event in [finished.queued(), finished.claimed(1), finished.completed(1, 1)]:
        ledger.observe(event)
    ledger.observe(newest.queued())
    assert set(ledger.jobs) == {unfinished.job_id, newest.job_id}


def test_the_ledger_follows_log_order_when_a_foreign_release_precedes_the_workers_own_completion():
    """The sweeper released attempt 1 while the worker finished it: in the log the release comes first, so
    the projector fences the completion; the ledger, which counted the completion at once, must agree."""
    ledger = Ledger(timedelta(minutes=10))
    built = _Builder(uuid.UUID(int=31))
    ledger.observe(built.queued(), 0)
    ledger.record_own(built.claimed(1), 1)
    done = built.completed(1, 2)
    ledger.record_own(done, 3)  # acknowledged at offset 3; the sweeper's release landed at 2
    assert ledger.jobs[built.job_id].state is JobState.COMPLETED
    assert ledger.live_result(built.fingerprint, done.occurred_at) is not None, "duplicates coalesce at once"

    ledger.observe(built.claimed(1), 1)  # read back
    view = ledger.observe(built.released(1), 2)  # the foreign release, read before the own completion
    assert (view.state, view.attempt) == (JobState.RELEASED, 1)
    assert ledger.live_result(built.fingerprint, done.occurred_at) is None, "a fenced completion is not reused"
    view = ledger.observe(done, 3)
    assert (view.state, view.attempt) == (JobState.RELEASED, 1), "what the projector shows"
