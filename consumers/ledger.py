"""What a worker knows about the jobs of one partition it owns, learnt from the log.

The projection lags the log, so the worker keeps its own view: each job's
latest attempt and state, the request it was queued with, and the results
completed in this partition (for coalescing duplicates). It is filled by the
recovery scan on assignment and by every record the worker reads after.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta

from consumers.ports import CachedResult
from contracts import JobClaimed, JobCompleted, JobEvent, JobFailed, JobQueued, JobReleased, SynthesisRequest

TERMINAL = frozenset({"completed", "failed"})


@dataclass
class JobView:
    job_id: uuid.UUID
    fingerprint: str
    attempt: int = 0
    state: str = "queued"
    request: SynthesisRequest | None = None
    not_before: datetime | None = None


class Ledger:
    def __init__(self, cache_ttl: timedelta, max_jobs: int = 50_000) -> None:
        self._ttl = cache_ttl
        self._max_jobs = max_jobs
        self.jobs: OrderedDict[uuid.UUID, JobView] = OrderedDict()
        self.results: dict[str, CachedResult] = {}

    def observe(self, event: JobEvent) -> JobView:
        """Fold one event in. Never moves a job backwards: the recovery scan may have seen its future."""
        view = self.jobs.get(event.job_id)
        if view is None:
            view = JobView(event.job_id, event.fingerprint, attempt=event.attempt)
            self.jobs[event.job_id] = view
            self._trim()
        match event:
            case JobQueued():
                view.request = event.payload.request
            case JobClaimed() if event.attempt >= view.attempt and view.state not in TERMINAL:
                view.attempt, view.state = event.attempt, "claimed"
            case JobReleased() if event.payload.failed_attempt >= view.attempt and view.state not in TERMINAL:
                view.attempt, view.state = event.payload.failed_attempt, "released"
                view.not_before = event.payload.not_before
            case JobCompleted() if view.state not in TERMINAL:
                view.attempt, view.state = max(view.attempt, event.attempt), "completed"
                if not event.payload.cache_hit:
                    self.results[event.fingerprint] = CachedResult(
                        event.job_id,
                        event.payload.segment_count,
                        event.payload.total_duration_ms,
                        event.occurred_at + self._ttl,
                    )
            case JobFailed() if view.state not in TERMINAL:
                view.attempt, view.state = max(view.attempt, event.attempt), "failed"
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
            oldest = next((k for k, v in self.jobs.items() if v.state in TERMINAL), None)
            if oldest is None:
                return
            del self.jobs[oldest]
