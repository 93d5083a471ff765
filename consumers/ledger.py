"""What a worker knows about the jobs of one partition it owns, learnt from the log.

The projection lags the log, so the worker keeps its own view: each job's
status (folded with ``contracts.job_state.transition``, the rule the
projector follows too), the request it was queued with, and the results
completed in this partition (for coalescing duplicates). It is filled by the
recovery scan on assignment and by every record the worker reads or
publishes after.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta

from consumers.ports import CachedResult
from contracts import JobCompleted, JobEvent, JobQueued, JobReleased, SynthesisRequest
from contracts.job_state import Fenced, JobState, JobStatus, status_implied_by, transition


@dataclass
class JobView:
    job_id: uuid.UUID
    fingerprint: str
    status: JobStatus
    request: SynthesisRequest | None = None
    not_before: datetime | None = None

    @property
    def state(self) -> JobState:
        return self.status.state

    @property
    def attempt(self) -> int:
        return self.status.attempt


class Ledger:
    def __init__(self, cache_ttl: timedelta, max_jobs: int = 50_000) -> None:
        self._ttl = cache_ttl
        self._max_jobs = max_jobs
        self.jobs: OrderedDict[uuid.UUID, JobView] = OrderedDict()
        self.results: dict[str, CachedResult] = {}

    def observe(self, event: JobEvent) -> JobView:
        """Fold one event in; a fenced event changes nothing."""
        view = self.jobs.get(event.job_id)
        if view is None:
            # The recovery scan starts at the committed offset, which may lie after the job's
            # earlier events: the first one seen is taken at its word.
            view = JobView(event.job_id, event.fingerprint, status_implied_by(event))
            self.jobs[event.job_id] = view
            self._trim()
        else:
            outcome = transition(view.status, event)
            if isinstance(outcome, Fenced):
                return view
            view.status = outcome
        match event:
            case JobQueued():
                view.request = event.payload.request
            case JobReleased():
                view.not_before = event.payload.not_before
            case JobCompleted() if not event.payload.cache_hit:
                self.results[event.fingerprint] = CachedResult(
                    event.job_id,
                    event.payload.segment_count,
                    event.payload.total_duration_ms,
                    event.occurred_at + self._ttl,
                )
        return view

    def live_result(self, fingerprint: str, now: datetime) -> CachedResult | None:
        result = self.results.get(fingerprint)
        if result is not None and result.expires_at <= now:
            del self.results[fingerprint]
            return None
        return result

    def _trim(self) -> None:
        # Forget the oldest finished jobs first; unfinished ones are still work to do.
        while len(self.jobs) > self._max_jobs:
            oldest = next((k for k, v in self.jobs.items() if v.status.terminal), None)
            if oldest is None:
                return
            del self.jobs[oldest]
