"""The job state machine and the fencing rule, as one pure function every reader of the log shares.

States::

    queued ──claim──▶ claimed ──complete──▶ completed
                        │ ▲    ──fail──────▶ failed
                 release│ │claim (attempt + 1)
                        ▼ │
                      released          (any live state) ──cancel──▶ cancelled

A cache hit completes a job that is queued, claimed or released without a
claim of its own; any live job can fail (its request is unusable, or its
attempts are spent) or be cancelled (nobody wants its audio any more).
``completed``, ``failed`` and ``cancelled`` are terminal.

Fencing: every event speaks for one attempt of its job (``JobReleased`` for
``payload.failed_attempt``, every other event for its envelope's
``attempt``). A claim must name an attempt above the job's current one; a
cancellation, which comes from outside any attempt, names none (it applies to
whichever attempt holds the job, and keeps that attempt); every
other event must name the current attempt and find the job in a state its
rule allows. An event that does not is *fenced*: it changes nothing, and the
reason says why. So a worker declared stale cannot overwrite the newer
attempt's state, segments or result, and applying an event twice changes
nothing (a claim's attempt never comes back, a terminal state never leaves).

``CacheEvicted`` is about a completed job's *result*, not its state: it leaves
a completed job as it is, and is fenced for any other (a job that never
completed has no result to evict).

The worker's ledger and the projection (``projections.reducer``) fold events
with :func:`transition`, and property tests check that both end where
:func:`fold` does.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from contracts.events import (
    CacheEvicted,
    JobCancelled,
    JobClaimed,
    JobCompleted,
    JobEvent,
    JobFailed,
    JobQueued,
    JobReleased,
    SegmentProduced,
    type_name,
)


class JobState(StrEnum):
    QUEUED = "queued"
    CLAIMED = "claimed"
    RELEASED = "released"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_STATES: Final = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED})
LIVE_STATES: Final = frozenset(JobState) - TERMINAL_STATES


class AttemptRule(StrEnum):
    NEWER = "newer"  # the event's attempt is above the job's (a new claim)
    SAME = "same"  # the event's attempt is the job's current one
    ANY = "any"  # the event speaks for no attempt (a cancellation): the job keeps its own


@dataclass(frozen=True)
class Rule:
    """When an event of ``event_type`` applies to a job, and the state it leaves (``None``: unchanged)."""

    event_type: str
    from_states: frozenset[JobState]
    attempt: AttemptRule
    to_state: JobState | None


CACHE_HIT: Final = f"{type_name(JobCompleted)}(cache_hit)"
_CLAIMED: Final = frozenset({JobState.CLAIMED})

RULES: Final[Mapping[str, Rule]] = MappingProxyType(
    {
        type_name(JobClaimed): Rule(type_name(JobClaimed), LIVE_STATES, AttemptRule.NEWER, JobState.CLAIMED),
        type_name(SegmentProduced): Rule(type_name(SegmentProduced), _CLAIMED, AttemptRule.SAME, None),
        type_name(JobCompleted): Rule(type_name(JobCompleted), _CLAIMED, AttemptRule.SAME, JobState.COMPLETED),
        CACHE_HIT: Rule(type_name(JobCompleted), LIVE_STATES, AttemptRule.SAME, JobState.COMPLETED),
        type_name(JobReleased): Rule(type_name(JobReleased), _CLAIMED, AttemptRule.SAME, JobState.RELEASED),
        type_name(JobFailed): Rule(type_name(JobFailed), LIVE_STATES, AttemptRule.SAME, JobState.FAILED),
        type_name(JobCancelled): Rule(type_name(JobCancelled), LIVE_STATES, AttemptRule.ANY, JobState.CANCELLED),
    }
)
"""Every event type but ``JobQueued`` (which creates the job), by the name :func:`rule_name` gives it."""

STATUS_EVENT_TYPES: Final = frozenset(
    {type_name(JobQueued), *(rule.event_type for rule in RULES.values() if rule.to_state is not None)}
)
"""The event types that can change a job's status (``SegmentProduced`` cannot)."""


@dataclass(frozen=True)
class JobStatus:
    """What the log says about one job: its state and the attempt that owns it."""

    state: JobState
    attempt: int

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES


class FenceReason(StrEnum):
    UNKNOWN_JOB = "unknown_job"  # no JobQueued was seen for the job
    DUPLICATE = "duplicate"  # a JobQueued for a job already known
    TERMINAL = "terminal"  # the job already completed, failed or was cancelled
    STALE_ATTEMPT = "stale_attempt"  # not the attempt the rule needs
    WRONG_STATE = "wrong_state"  # the job is in a state the rule does not start from


@dataclass(frozen=True)
class Fenced:
    """An event that changes nothing, and why."""

    reason: FenceReason
    detail: str


def event_attempt(event: JobEvent) -> int:
    """The attempt an event speaks for."""
    return event.payload.failed_attempt if isinstance(event, JobReleased) else event.attempt


def rule_name(event: JobEvent) -> str:
    """The key of ``event``'s rule in :data:`RULES`."""
    if isinstance(event, JobCompleted) and event.payload.cache_hit:
        return CACHE_HIT
    return event.type


def transition(status: JobStatus | None, event: JobEvent) -> JobStatus | Fenced:  # noqa: C901 - listed in pyproject.toml
    """The job's status after ``event``, or why ``event`` is fenced. ``status`` ``None``: an unknown job."""
    if isinstance(event, JobQueued):
        if status is None:
            return JobStatus(JobState.QUEUED, event.attempt)
        return Fenced(FenceReason.DUPLICATE, f"job already {status.state}")
    if status is None:
        return Fenced(FenceReason.UNKNOWN_JOB, "no JobQueued precedes it")
    if isinstance(event, CacheEvicted):
        if status.state is JobState.COMPLETED:
            return status
        return Fenced(FenceReason.WRONG_STATE, f"job is {status.state}: it has no result to evict")
    if status.terminal:
        return Fenced(FenceReason.TERMINAL, f"job already {status.state}")
    rule = RULES[rule_name(event)]
    attempt = event_attempt(event)
    if rule.attempt is AttemptRule.NEWER and attempt <= status.attempt:
        return Fenced(FenceReason.STALE_ATTEMPT, f"attempt {attempt} is not above the job's {status.attempt}")
    if rule.attempt is AttemptRule.SAME and attempt != status.attempt:
        return Fenced(FenceReason.STALE_ATTEMPT, f"attempt {attempt} is not the job's {status.attempt}")
    if status.state not in rule.from_states:
        return Fenced(FenceReason.WRONG_STATE, f"job is {status.state}")
    if rule.attempt is AttemptRule.ANY:
        attempt = status.attempt
    return JobStatus(rule.to_state or status.state, attempt)


def status_implied_by(event: JobEvent) -> JobStatus:
    """What a reader that starts mid-log (the worker's tail scan) believes after a job's first event.

    The job's earlier events lie before where the reader started, so the event
    is taken at its word: the state it leads to, at the attempt it names.
    """
    if isinstance(event, CacheEvicted):
        return JobStatus(JobState.COMPLETED, event.attempt)
    rule = None if isinstance(event, JobQueued) else RULES[rule_name(event)]
    state = JobState.QUEUED if rule is None else rule.to_state or JobState.CLAIMED
    return JobStatus(state, event_attempt(event))  # a cancellation's 0: its attempts lie before the reader


def fold(events: Iterable[JobEvent]) -> dict[uuid.UUID, JobStatus]:
    """Every job's status after ``events``, in log order, from an empty log."""
    statuses: dict[uuid.UUID, JobStatus] = {}
    for event in events:
        outcome = transition(statuses.get(event.job_id), event)
        if isinstance(outcome, JobStatus):
            statuses[event.job_id] = outcome
    return statuses
