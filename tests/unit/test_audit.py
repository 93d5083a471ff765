"""The audit fold (projections.audit): outcomes, attempts and time in state, and agreement with the shared fold."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings

from contracts import DegradedFrom, JobEvent, JobQueued, JobState, fold
from contracts.scheduling import EngineTurns, WaitedBehind
from foundation.kafka import RecordPosition
from projections.audit import LoggedEvent, Outcome, as_json, history_of
from tests.support.api_fakes import Log, Reader, client, deps
from tests.support.job_logs import _Builder, realistic_logs


def logged(events: list[JobEvent]) -> list[LoggedEvent]:
    now = datetime(2026, 11, 30, tzinfo=UTC)
    return [LoggedEvent(RecordPosition("jobs", 0, i), now, e) for i, e in enumerate(events)]


def test_a_retried_job_shows_each_attempt_how_it_ended_and_the_stalled_attempts_late_work_as_fenced():
    job = _Builder(uuid.UUID(int=5))
    first_claim = job.claimed(1)
    events = [
        job.queued(),
        first_claim,
        job.segment(1, 0),
        job.released(1),
        job.claimed(2),
        job.segment(1, 1),  # the first attempt's worker, late
        first_claim,  # a copy delivered again
        job.segment(2, 0),
        job.segment(2, 1),
        job.completed(2, 2),
    ]
    history = history_of(job.job_id, logged(events))

    assert [(e.outcome, e.reason) for e in history.entries if e.outcome != Outcome.APPLIED] == [
        (Outcome.FENCED, "stale_attempt: attempt 1 is not the job's 2"),
        (Outcome.DUPLICATE, "repeats 0:1"),
    ]
    first, second = history.attempts[1], history.attempts[2]
    assert (first.ended_by, first.segments, first.fenced) == ("released: transient", 1, 1)
    assert (second.ended_by, second.segments, second.fenced) == ("completed", 2, 0)
    Q, C, R, D = JobState.QUEUED, JobState.CLAIMED, JobState.RELEASED, JobState.COMPLETED
    assert [s.state for s in history.spans] == [Q, C, R, C, D]
    assert history.spans[0].seconds == (first_claim.occurred_at - events[0].occurred_at).total_seconds()
    assert history.spans[-1].seconds == 0.0, "a terminal state lasts no time"
    assert history.reused_from is None
    body = as_json(history)
    assert [e["attempt"] for e in body["events"]] == [0, 1, 1, 1, 2, 1, 1, 2, 2, 2]
    assert body["events"][1]["producer"]["engine"] == "kokoro-onnx"
    assert body["events"][0]["producer"]["engine"] is None, "JobQueued comes from the API, before any claim"


def test_a_completion_carrying_its_last_segment_counts_it_in_its_attempt_and_says_so():
    """Issue 41, item 2: an attempt's last segment rides in its ``JobCompleted`` (version 3)."""
    from voxlog.audit_cli import job_report

    job = _Builder(uuid.UUID(int=6))
    events = [job.queued(), job.claimed(1), job.segment(1, 0), job.completed(1, 2, last=True)]
    history = history_of(job.job_id, logged(events))
    attempt = history.attempts[1]
    assert (attempt.ended_by, attempt.segments) == ("completed", 2)
    lines = job_report(history)
    assert any("SegmentProduced #0" in line for line in lines)
    assert any("JobCompleted +#1" in line for line in lines), lines


def test_a_cache_served_job_names_the_job_whose_audio_it_reused():
    job = _Builder(uuid.UUID(int=6))
    history = history_of(job.job_id, logged([job.queued(), job.completed(0, 1, cache_hit=True)]))
    assert history.reused_from == uuid.UUID(int=1)
    assert history.attempts == {}
    assert as_json(history)["reused_from"] == str(uuid.UUID(int=1))


def test_other_jobs_events_are_left_out_and_an_unknown_job_has_no_history():
    mine, other = _Builder(uuid.UUID(int=8)), _Builder(uuid.UUID(int=9))
    history = history_of(mine.job_id, logged([other.queued(), mine.queued(), other.claimed(1)]))
    assert [e.logged.event.job_id for e in history.entries] == [mine.job_id]
    assert not history_of(uuid.UUID(int=10), logged([mine.queued()])).found


@settings(max_examples=150, deadline=None)
@given(realistic_logs())
def test_the_audit_ends_every_job_where_the_shared_fold_does(log: list[JobEvent]):
    expected = fold(log)
    for job_id, status in expected.items():
        history = history_of(job_id, logged(log))
        assert history.status == status
        applied = [e for e in history.entries if e.outcome == Outcome.APPLIED]
        assert applied[-1].state == status.state
        assert len(history.entries) == sum(1 for e in log if e.job_id == job_id)


def _degraded() -> tuple[_Builder, JobQueued, JobQueued]:
    """A job's JobQueued as degraded mode records it, and as it would have been."""
    job = _Builder(uuid.UUID(int=11))
    queued = job.queued()
    asked = queued.payload.request
    degraded = asked.model_copy(update={"speed": 1.15, "sample_rate": 16000})
    was = DegradedFrom(speed=asked.speed, sample_rate=asked.sample_rate, reason="operator: launch day")
    payload = queued.payload.model_copy(update={"request": degraded, "degraded_from": was})
    event = queued.model_copy(update={"payload": payload})
    assert isinstance(event, JobQueued)
    return job, queued, event


def test_a_degraded_job_says_what_degraded_mode_changed_on_its_queued_line():
    from voxlog.audit_cli import job_report

    job, queued, event = _degraded()
    asked = queued.payload.request
    history = history_of(job.job_id, logged([event]))
    lines = job_report(history)
    [line] = [line for line in lines if "JobQueued" in line]
    changed = f"speed {asked.speed:g} -> 1.15, {asked.sample_rate} -> 16000 Hz (operator: launch day)"
    assert line.endswith(f"applied -> queued, degraded ({changed})")
    assert f"degraded {changed}" in lines
    assert as_json(history)["degraded_from"] == {"speed": asked.speed, "sample_rate": asked.sample_rate,
                                                 "reason": "operator: launch day"}  # fmt: skip
    assert as_json(history_of(job.job_id, logged([queued])))["degraded_from"] is None


async def test_regression_the_api_tells_a_degraded_jobs_history_as_the_cli_does():
    """GET /v1/jobs/{id}/events dropped degraded_from, which `voxlog audit --json` shows (e2e test_audit)."""
    job, _, event = _degraded()
    told = as_json(history_of(job.job_id, logged([event])))

    class Audit:
        async def events(self, job_id: uuid.UUID, since: datetime | None = None) -> dict[str, Any] | None:
            return told if job_id == job.job_id else None

    reader = Reader()
    reader.project(event)  # the projection says whose the job is before the log is read
    async with client(deps(reader, Log(), audit=Audit())) as http:
        answer = await http.get(f"/v1/jobs/{job.job_id}/events")
    assert answer.status_code == 200, answer.text
    assert answer.json() == json.loads(json.dumps(told, default=str))


LONG, OTHERS = uuid.UUID(int=31), uuid.UUID(int=32)


def _waited_job() -> tuple[_Builder, list[JobEvent]]:
    """A short job that waited behind a long one of its own tenant and another tenant's, then was interleaved."""
    job = _Builder(uuid.UUID(int=30))
    before = WaitedBehind(
        policy="fair-srpt",
        jobs=(
            EngineTurns(job_id=LONG, tenant="default", priority="batch", segments=2, rule="log_order"),
            EngineTurns(job_id=OTHERS, tenant="globex", priority="interactive", segments=1, rule="interactive_first"),
        ),
        job_count=3,
        segment_count=4,
        waited_ms=4200,
    )
    during = WaitedBehind(
        policy="fair-srpt",
        jobs=(EngineTurns(job_id=LONG, tenant="default", priority="batch", segments=1, rule="batch_turn"),),
        job_count=1,
        segment_count=1,
        waited_ms=900,
        complete=False,
    )
    claimed, completed = job.claimed(1), job.completed(1, 1)
    claimed = claimed.model_copy(update={"payload": claimed.payload.model_copy(update={"waited": before})})
    completed = completed.model_copy(update={"payload": completed.payload.model_copy(update={"waited": during})})
    return job, [job.queued(), claimed, job.segment(1, 0), completed]


def test_the_audit_tells_what_a_job_waited_behind_before_its_claim_and_while_claimed_and_by_which_rule():
    from voxlog.audit_cli import job_report

    job, events = _waited_job()
    history = history_of(job.job_id, logged(events))
    body = as_json(history)
    assert [
        (w["attempt"], w["stretch"], w["job_count"], w["segment_count"], w["waited_ms"]) for w in body["waited"]
    ] == [
        (1, "queued", 3, 4, 4200),
        (1, "claimed", 1, 1, 900),
    ]
    assert [(t["job_id"], t["segments"], t["rule"]) for t in body["waited"][0]["jobs"]] == [
        (str(LONG), 2, "log_order"),
        (str(OTHERS), 1, "interactive_first"),
    ]
    lines = job_report(history)
    at = lines.index("waited behind (on its worker, by the worker's record)")
    assert lines[at + 1 : at + 9] == [
        "  attempt 1 before its claim: 3 job(s), 4 segment(s), 4.20s (policy fair-srpt)",
        f"    {LONG}  default/batch  2 segment(s)  by log_order",
        f"    {OTHERS}  globex/interactive  1 segment(s)  by interactive_first",
        "    and 1 more job(s)",
        "  attempt 1 while claimed: 1 job(s), 1 segment(s), 0.90s (policy fair-srpt)",
        f"    {LONG}  default/batch  1 segment(s)  by batch_turn",
        "    (the worker's memory of turns did not reach back to the start: counts of what it remembers)",
        "",
    ]
    [claim_line] = [line for line in lines if "JobClaimed" in line]
    assert claim_line.endswith("applied -> claimed, waited behind 3 job(s), 4 segment(s), 4.20s")


def test_a_job_recorded_before_workers_said_what_it_waited_behind_waited_behind_nothing_recorded():
    job = _Builder(uuid.UUID(int=33))
    history = history_of(job.job_id, logged([job.queued(), job.claimed(1), job.segment(1, 0), job.completed(1, 1)]))
    assert as_json(history)["waited"] == []


async def test_the_api_tells_what_a_job_waited_behind_as_the_cli_does_but_names_no_other_tenants_job():
    job, events = _waited_job()
    told = as_json(history_of(job.job_id, logged(events)))

    class Audit:
        async def events(self, job_id: uuid.UUID, since: datetime | None = None) -> dict[str, Any] | None:
            return told if job_id == job.job_id else None

    reader = Reader()
    reader.project(job.queued())  # the projection says whose the job is before the log is read
    async with client(deps(reader, Log(), audit=Audit())) as http:
        answer = await http.get(f"/v1/jobs/{job.job_id}/events")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    unnamed = {"job_id": None, "tenant": None, "priority": "interactive", "segments": 1, "rule": "interactive_first"}
    assert body["waited"][0]["jobs"] == [told["waited"][0]["jobs"][0], unnamed], "the own tenant's job is named"
    assert body["waited"][1] == json.loads(json.dumps(told["waited"][1]))
    [claim] = [e for e in body["events"] if e["type"] == "JobClaimed"]
    assert claim["payload"]["waited"]["jobs"][1] == unnamed, "nor in the event's own payload"
    assert str(OTHERS) not in answer.text
    assert "globex" not in answer.text
    for history in (body, told):
        del history["waited"][0]["jobs"][1]
        del next(e for e in history["events"] if e["type"] == "JobClaimed")["payload"]["waited"]["jobs"][1]
    assert body == json.loads(json.dumps(told, default=str)), "the rest as the CLI tells it"


def test_the_audit_names_the_jobs_trace_and_its_webhook_deliveries_which_it_says_are_the_projections():
    """issue 39, item 2: `voxlog audit` shows the job's trace id (the log's) and its webhook deliveries (the
    projection's webhook_deliveries, said so in the output, text and --json)."""
    from projections.audit import deliveries_json
    from projections.rows import WebhookDeliveryRow
    from voxlog.audit_cli import job_report

    job = _Builder(uuid.UUID(int=39))
    traced = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    queued = job.queued()
    queued = queued.model_copy(update={"payload": queued.payload.model_copy(update={"traceparent": traced})})
    claimed = job.claimed(1)
    history = history_of(job.job_id, logged([queued, claimed, job.completed(1, 0)]))
    assert history.trace_id == "0af7651916cd43dd8448eb211c80319c", "the request's trace, from its JobQueued"
    assert as_json(history)["trace_id"] == history.trace_id
    # Without its JobQueued (left the log), a record's traceparent header says the trace.
    header = "00-11111111111111111111111111111111-2222222222222222-01"
    later = [LoggedEvent(RecordPosition("jobs", 0, 1), datetime(2026, 11, 30, tzinfo=UTC), claimed, header)]
    assert history_of(job.job_id, later).trace_id == "11111111111111111111111111111111"

    at = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    endpoint = uuid.UUID(int=7)
    rows = [
        WebhookDeliveryRow(
            uuid.UUID(int=2), endpoint, "default", "job.completed", job.job_id, None, "{}", traced, at, "given_up",
            8, None, 503, "HTTP 503", 40, at, uuid.uuid4(),
        ),
        WebhookDeliveryRow(
            uuid.UUID(int=1), endpoint, "default", "job.completed", job.job_id, None, "{}", traced, at, "delivered",
            1, None, 200, "", 12, at, uuid.uuid4(),
        ),
    ]  # fmt: skip
    lines = job_report(history, rows)
    assert f"trace {history.trace_id}" in lines
    start = lines.index("webhook deliveries, from the projection's webhook_deliveries (each delivery's latest"
                        " record), not the log")  # fmt: skip
    assert lines[start + 1 :] == [
        f"  {uuid.UUID(int=1)}  job.completed to endpoint {endpoint}: delivered, 1 attempt(s), last HTTP 200 in 12 ms",
        f"  {uuid.UUID(int=2)}  job.completed to endpoint {endpoint}: given_up, 8 attempt(s), last HTTP 503 in 40 ms,"
        " error: HTTP 503",
    ]
    assert not any("webhook" in line for line in job_report(history, [])), "no section for a job with none"
    assert job_report(history, None)[-1] == "  unknown: PostgreSQL could not be read"
    shown = deliveries_json(rows)
    assert "not the log" in shown["source"]
    fields = ("delivery_id", "state", "attempts", "last_status", "last_error")
    assert [tuple(d[f] for f in fields) for d in shown["deliveries"]] == [
        (str(uuid.UUID(int=1)), "delivered", 1, 200, None), (str(uuid.UUID(int=2)), "given_up", 8, 503, "HTTP 503"),
    ]  # fmt: skip
    assert deliveries_json(None)["deliveries"] is None
