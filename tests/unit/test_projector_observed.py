"""What the projector counts of a committed batch (projections.observed)."""

from __future__ import annotations

from prometheus_client import REGISTRY

from bench.replay import job_events
from projections.observed import observe
from projections.reducer import Outcome


def _events(kind: str, outcome: Outcome) -> float:
    return REGISTRY.get_sample_value("voxlog_job_events_total", {"type": kind, "outcome": outcome.value}) or 0.0


def _completed(source: str) -> float:
    return REGISTRY.get_sample_value("voxlog_jobs_completed_total", {"source": source}) or 0.0


def test_a_batch_is_counted_by_type_and_outcome() -> None:
    jobs = [job_events(i) for i in range(3)]
    seen = [(event, Outcome.APPLIED) for events in jobs for event in events]
    seen += [(jobs[0][1], Outcome.DUPLICATE), (jobs[1][2], Outcome.FENCED)]  # queued, claimed, completed
    before = {
        "queued": _events("JobQueued", Outcome.APPLIED),
        "completed": _events("JobCompleted", Outcome.APPLIED),
        "duplicate": _events("JobClaimed", Outcome.DUPLICATE),
        "fenced": _events("JobCompleted", Outcome.FENCED),
        "syntheses": _completed("synthesis"),
    }
    observe(seen)
    assert _events("JobQueued", Outcome.APPLIED) - before["queued"] == 3
    assert _events("JobCompleted", Outcome.APPLIED) - before["completed"] == 3
    assert _events("JobClaimed", Outcome.DUPLICATE) - before["duplicate"] == 1
    assert _events("JobCompleted", Outcome.FENCED) - before["fenced"] == 1
    assert _completed("synthesis") - before["syntheses"] == 3  # a fenced completion is not a completion
