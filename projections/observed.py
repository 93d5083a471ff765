"""What the projector counts of the log, once a batch is committed: job outcomes, releases, fences, visibility."""

from __future__ import annotations

from collections import Counter

from contracts import JobCompleted, JobEvent, JobFailed, JobReleased, utc_now
from foundation.metrics import JOB_EVENTS, JOB_PHASE_SECONDS, JOB_RELEASES, JOBS_COMPLETED, JOBS_FAILED
from projections.reducer import Outcome


def observe(seen: list[tuple[JobEvent, Outcome]]) -> None:
    now = utc_now()
    # Counted per kind, then added once: a child's lookup by its labels cost more than the rest of this.
    for (kind, outcome), count in Counter((event.type, outcome) for event, outcome in seen).items():
        JOB_EVENTS.labels(kind, outcome.value).inc(count)
    for event, outcome in seen:
        if outcome is not Outcome.APPLIED:
            continue
        match event:
            case JobCompleted():
                JOBS_COMPLETED.labels("cache" if event.payload.cache_hit else "synthesis").inc()
                JOB_PHASE_SECONDS.labels("visible").observe(max((now - event.occurred_at).total_seconds(), 0.0))
            case JobFailed():
                JOBS_FAILED.labels(event.payload.reason_code).inc()
            case JobReleased():
                JOB_RELEASES.labels(event.payload.reason).inc()
