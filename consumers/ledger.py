"""What a worker knows about the jobs of one partition it owns, learnt from the log.

The projection lags the log, so the worker keeps its own view: each job's
status (folded with ``contracts.job_state.transition``, the rule the
projector follows too), the request it was queued with, its latest release,
and the results completed in this partition (for coalescing duplicates, until
their TTL passes or a ``CacheEvicted`` ends their reuse). It
is filled by the recovery scan on assignment and by every record the worker
reads after.

The worker's own events count at once, before it reads them back: a duplicate
queued behind a job must coalesce onto the result the worker just produced.
But another producer (the sweeper, a zombie worker) may have written to the
partition in between, and the log's order is what the projector follows. So
the ledger keeps two things per job: the status *confirmed* by the records
read so far, in log order, and the worker's own events not read back yet,
with their offsets. A job's status is the confirmed one with those own
events folded on top; when a foreign record turns out to precede them (a
release of the attempt the worker then completed), the own events are
folded again after it, and the rule fences what it fences in the projection.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from contracts import (
    DEFAULT_TENANT,
    CacheEvicted,
    JobCompleted,
    JobEvent,
    JobQueued,
    JobReleased,
    Priority,
    SynthesisRequest,
    TraceContext,
    job_trace_of_record,
    span_id_of,
)
from contracts.job_state import JobState, JobStatus, status_implied_by, transition
from projections.reads.worker import CachedResult


@dataclass
class JobView:
    job_id: uuid.UUID
    fingerprint: str
    confirmed: JobStatus  # what the records read so far say, in log order
    status: JobStatus = field(init=False)  # the confirmed status with the worker's unread own events on top
    request: SynthesisRequest | None = None
    submitted_at: datetime | None = None  # when the API accepted it (JobQueued)
    priority: Priority = "interactive"  # JobQueued's: "batch" jobs wait for a turn (consumers.scheduling)
    tenant: str = DEFAULT_TENANT  # JobQueued's: whose share of the engine it uses (consumers.scheduling)
    release: JobReleased | None = None  # the release in force, when the job is released
    completion: JobCompleted | None = None  # the completion in force, when the job is completed
    own: list[tuple[int, JobEvent]] = field(default_factory=list)  # (offset, event) published, not read back
    confirmed_release: JobReleased | None = None
    confirmed_completion: JobCompleted | None = None
    evicted: bool = False  # a CacheEvicted was read: its result is not reused any more
    partition: int | None = None  # where its events go: the partition its JobQueued is in (None: the key's)
    trace: TraceContext | None = None  # its trace, at its JobQueued's span: the parent of its attempts

    def __post_init__(self) -> None:
        self.status = self.confirmed

    @property
    def state(self) -> JobState:
        return self.status.state

    @property
    def attempt(self) -> int:
        return self.status.attempt

    @property
    def not_before(self) -> datetime | None:
        return self.release.payload.not_before if self.release is not None else None

    @property
    def last_error(self) -> str:
        return self.release.payload.message if self.release is not None else ""


class Ledger:
    def __init__(self, cache_ttl: timedelta, max_jobs: int = 50_000) -> None:
        self._ttl = cache_ttl
        self._partition: int | None = None  # set by place(): until then, views go to the key's partition
        self._max_jobs = max_jobs
        self.jobs: dict[uuid.UUID, JobView] = {}
        self._finished: OrderedDict[uuid.UUID, None] = OrderedDict()  # terminal jobs, oldest first
        self.results: OrderedDict[str, CachedResult] = OrderedDict()  # by fingerprint, oldest expiry first

    def observe(self, event: JobEvent, offset: int | None = None, traceparent: str | None = None) -> JobView:
        """Fold in one record read from the log (at ``offset``, with the ``traceparent`` header), in log order."""
        view = self.jobs.get(event.job_id)
        if view is None:
            # The recovery scan starts at the committed offset, which may lie after the job's
            # earlier events: the first one seen is taken at its word.
            view = JobView(event.job_id, event.fingerprint, status_implied_by(event), partition=self._partition)
            self.jobs[event.job_id] = view
            self._confirm_effects(view, event)
        else:
            if offset is not None:
                view.own = [(o, e) for o, e in view.own if o > offset]  # read back: confirmed below
            outcome = transition(view.confirmed, event)
            if isinstance(outcome, JobStatus):
                view.confirmed = outcome
                self._confirm_effects(view, event)
        if isinstance(event, CacheEvicted) and view.state is JobState.COMPLETED:
            view.evicted = True  # its result answers no duplicate any more (the job stays completed)
        if view.trace is None or (isinstance(event, JobQueued) and view.request is None):
            view.trace = job_trace_of_record(event, traceparent)
        if isinstance(event, JobQueued) and view.request is None:
            view.request, view.submitted_at = event.payload.request, event.payload.submitted_at
            view.priority, view.tenant = event.payload.priority, event.payload.tenant
        self._refresh(view)
        return view

    def place(self, partition: int) -> None:
        """The partition this ledger is of: its jobs' events go there (whatever partition their key hashes to)."""
        self._partition = partition
        for view in self.jobs.values():
            view.partition = partition

    def record_own(self, event: JobEvent, offset: int) -> JobView:
        """An event this worker published, acknowledged at ``offset``: it counts before it is read back."""
        view = self.jobs[event.job_id]
        view.own.append((offset, event))
        self._refresh(view)
        return view

    def live_result(self, fingerprint: str, now: datetime) -> CachedResult | None:
        result = self.results.get(fingerprint)
        if result is not None and result.expires_at <= now:
            del self.results[fingerprint]
            return None
        return result

    def _confirm_effects(self, view: JobView, event: JobEvent) -> None:
        if isinstance(event, JobReleased):
            view.confirmed_release = event
        elif isinstance(event, JobCompleted):
            view.confirmed_completion = event

    def _refresh(self, view: JobView) -> None:
        status, release, completion = view.confirmed, view.confirmed_release, view.confirmed_completion
        for _, event in view.own:
            outcome = transition(status, event)
            if isinstance(outcome, JobStatus):
                status = outcome
                if isinstance(event, JobReleased):
                    release = event
                elif isinstance(event, JobCompleted):
                    completion = event
        view.status = status
        view.release = release if status.state is JobState.RELEASED else None
        view.completion = completion if status.state is JobState.COMPLETED else None
        self._keep_result(view)
        if status.terminal:
            self._finished[view.job_id] = None
        else:
            self._finished.pop(view.job_id, None)
        self._trim()

    def _keep_result(self, view: JobView) -> None:
        completed = view.completion
        held = self.results.get(view.fingerprint)
        if completed is not None and not completed.payload.cache_hit and not view.evicted:
            if held is None or held.job_id != view.job_id:
                self.results.pop(view.fingerprint, None)  # re-inserted last: the newest expiry
                self.results[view.fingerprint] = CachedResult(
                    view.job_id,
                    completed.payload.segment_count,
                    completed.payload.total_duration_ms,
                    completed.occurred_at + self._ttl,
                    view.trace.child(span_id_of(completed.event_id)) if view.trace is not None else None,
                )
                self._expire(completed.occurred_at)
        elif held is not None and held.job_id == view.job_id:
            del self.results[view.fingerprint]  # its completion turned out fenced: nothing to reuse

    def _expire(self, now: datetime) -> None:
        while self.results:
            fingerprint, oldest = next(iter(self.results.items()))
            if oldest.expires_at > now:
                return
            del self.results[fingerprint]

    def _trim(self) -> None:
        # Forget the oldest finished jobs first; unfinished ones are still work to do.
        while len(self.jobs) > self._max_jobs and self._finished:
            oldest, _ = self._finished.popitem(last=False)
            del self.jobs[oldest]
