# ruff: noqa: RUF001
"""What an answer about a job shows its tenant (issue 40, item 3; producers.tenant_views): no other tenant's job
id in a cache hit's history or ``?as_of=``, the projection's tenant for a job whose JobQueued left the log, and
no entry of the server's lexicon in a request's pronunciations.

The log is a fake read by the real auditor (projections.job_log.LogAuditor, without PostgreSQL: it folds the
records that name the job), the projection the fake of tests.support.api_fakes.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from typing import Any

import httpx

from contracts import JobEvent, JobQueued, JobState
from foundation.kafka import RecordPosition
from producers.auth import KeyBook
from producers.ports import LogAudit
from projections.audit import LoggedEvent
from projections.job_log import LogAuditor
from tests.support.api_fakes import Log, Reader, client, deps
from tests.support.job_logs import _Builder
from tests.unit.test_auth import Keys, bearer

LATER = "2100-01-01T00:00:00Z"


class FakeLog:
    """The jobs topic as the auditor reads it: every record in one partition, in order."""

    topic = "jobs"

    def __init__(self, events: list[JobEvent]) -> None:
        self.logged = [LoggedEvent(RecordPosition("jobs", 0, i), e.occurred_at, e) for i, e in enumerate(events)]

    async def of_job(self, job_id: uuid.UUID, since: datetime | None = None) -> list[LoggedEvent]:
        return [e for e in self.logged if e.event.job_id == job_id]

    async def of_fingerprint(self, fingerprint: str, starts: dict[int, int] | None = None) -> list[LoggedEvent]:
        return [e for e in self.logged if e.event.fingerprint == fingerprint]


def auditor(events: list[JobEvent]) -> LogAudit:
    return LogAudit(LogAuditor(FakeLog(events), None, timedelta(days=1)))  # type: ignore[arg-type]


def as_bob(reader: Reader, events: list[JobEvent]) -> httpx.AsyncClient:
    """A client of the API holding a key of the tenant bob's (read scope), over ``reader`` and the log ``events``."""
    keys = Keys()
    key = keys.issue("bob", "read")
    http = client(deps(reader, Log(), audit=auditor(events), keys=KeyBook(keys, cache_s=0)))
    http.headers.update(bearer(key))
    return http


def owned(builder: _Builder, tenant: str) -> JobQueued:
    queued = builder.queued()
    return queued.model_copy(update={"payload": queued.payload.model_copy(update={"tenant": tenant})})


def hit_of(builder: _Builder, source: uuid.UUID) -> JobEvent:
    completed = builder.completed(0, 1, cache_hit=True)
    return completed.model_copy(update={"payload": completed.payload.model_copy(update={"source_job_id": source})})


def a_cache_hit(source_tenant: str) -> tuple[Reader, list[JobEvent], uuid.UUID, uuid.UUID]:
    """Bob's request answered by the result of a job of ``source_tenant``'s (same text, same fingerprint)."""
    alice, bob = (
        _Builder(uuid.UUID(int=1), request_text="Said once."),
        _Builder(uuid.UUID(int=2), request_text="Said once."),
    )
    source = owned(alice, source_tenant)
    mine = owned(bob, "bob")
    events: list[JobEvent] = [source, alice.claimed(1), alice.segment(1, 0), alice.completed(1, 1), mine]
    events.append(hit_of(bob, alice.job_id))
    reader = Reader()
    reader.project(source, JobState.COMPLETED)
    reader.project(mine, JobState.COMPLETED, cache_hit=True, source_job_id=alice.job_id)
    return reader, events, alice.job_id, bob.job_id


async def answers_to_bob(reader: Reader, events: list[JobEvent], job_id: uuid.UUID) -> dict[str, Any]:
    async with as_bob(reader, events) as http:
        paths = {"get": "", "as_of": f"?as_of={LATER}", "events": "/events"}
        answers = {name: await http.get(f"/v1/jobs/{job_id}{path}") for name, path in paths.items()}
    for name, answer in answers.items():
        assert answer.status_code == 200, (name, answer.text)
    return {name: answer for name, answer in answers.items()}


async def test_regression_a_cache_hit_names_another_tenants_source_job_nowhere():
    """Issue 40: a cache hit's /events (``reused_from``, JobCompleted's ``source_job_id``) and ``?as_of=``
    (``source_job_id``) named the job of the tenant that asked first, which the plain GET hides."""
    reader, events, source, job = a_cache_hit("alice")
    answers = await answers_to_bob(reader, events, job)
    history = answers["events"].json()
    assert history["reused_from"] is None
    [completed] = [e for e in history["events"] if e["type"] == "JobCompleted"]
    assert completed["payload"]["cache_hit"] is True
    assert completed["payload"]["source_job_id"] is None
    for name in ("get", "as_of"):
        assert answers[name].json()["cache_hit"] is True, name
        assert answers[name].json()["source_job_id"] is None, name
    for name, answer in answers.items():
        assert str(source) not in answer.text, name
        assert "alice" not in answer.text, name


async def test_a_cache_hit_of_the_same_tenants_job_names_its_source_everywhere():
    reader, events, source, job = a_cache_hit("bob")
    answers = await answers_to_bob(reader, events, job)
    history = answers["events"].json()
    assert history["reused_from"] == str(source)
    [completed] = [e for e in history["events"] if e["type"] == "JobCompleted"]
    assert completed["payload"]["source_job_id"] == str(source)
    assert answers["get"].json()["source_job_id"] == answers["as_of"].json()["source_job_id"] == str(source)


async def test_regression_a_job_whose_jobqueued_left_the_log_is_its_projected_tenants_not_default():
    """Issue 40: the history of a job whose JobQueued had aged out of the log (retention) was read as the tenant
    ``default``'s (its owner got a 404, and the tenant ``default`` was told it was its). Now the tenant is the
    projection's, which decided whose the job is before the log was read; ``?as_of=`` cannot fold a job without
    its JobQueued and answers 404, as for a moment before it."""
    bob = _Builder(uuid.UUID(int=3), request_text="Aged out.")
    queued = owned(bob, "bob")
    reader = Reader()
    reader.project(queued, JobState.COMPLETED)
    aged = [bob.claimed(1), bob.segment(1, 0), bob.completed(1, 1)]  # the JobQueued before them is gone
    async with as_bob(reader, aged) as http:
        history = await http.get(f"/v1/jobs/{bob.job_id}/events")
        past = await http.get(f"/v1/jobs/{bob.job_id}?as_of={LATER}")
    assert history.status_code == 200, history.text
    assert history.json()["tenant"] == "bob"
    assert history.json()["request"] is None, "the log no longer holds it"
    assert [e["type"] for e in history.json()["events"]] == ["JobClaimed", "SegmentProduced", "JobCompleted"]
    assert past.status_code == 404, past.text
    assert "default" not in history.text + past.text


async def test_a_history_whose_log_names_another_tenant_than_the_projection_is_not_shown():
    bob = _Builder(uuid.UUID(int=4), request_text="Disputed.")
    reader = Reader()
    reader.project(owned(bob, "bob"))
    async with as_bob(reader, [owned(bob, "alice")]) as http:
        history = await http.get(f"/v1/jobs/{bob.job_id}/events")
    assert history.status_code == 404, history.text
    assert "alice" not in history.text


def with_pronunciations(builder: _Builder, tenant: str, said: dict[str, str]) -> JobQueued:
    queued = owned(builder, tenant)
    request = queued.payload.request.model_copy(update={"pronunciations": said})
    return queued.model_copy(update={"payload": queued.payload.model_copy(update={"request": request})})


async def test_regression_the_server_lexicons_entries_are_not_shown_in_a_tenants_request():
    """Issue 40: the lexicon's entries (the admin's, GET /v1/lexicon needs the admin scope) showed in every
    tenant's ``request.pronunciations``, in the plain GET, ``?as_of=`` and the history. They are still applied
    (the job's request, its fingerprint and the worker have them), and shown to no tenant: only the request's
    own entries for words the lexicon never held are."""
    bob = _Builder(uuid.UUID(int=5), request_text="Acme sells tomatoes and basil.")
    said = {"acme": "ˈækmi", "basil": "bˈæzəl"}  # acme: the lexicon's; basil: the request's own
    queued = with_pronunciations(bob, "bob", said)
    reader = Reader()
    reader.project(queued, JobState.COMPLETED, lexicon_words=("acme",))
    events: list[JobEvent] = [queued, bob.claimed(1), bob.segment(1, 0), bob.completed(1, 1)]
    answers = await answers_to_bob(reader, events, bob.job_id)
    for name in ("get", "as_of"):
        assert answers[name].json()["request"]["pronunciations"] == {"basil": "bˈæzəl"}, name
    history = answers["events"].json()
    assert history["request"]["pronunciations"] == {"basil": "bˈæzəl"}
    [logged] = [e for e in history["events"] if e["type"] == "JobQueued"]
    assert logged["payload"]["request"]["pronunciations"] == {"basil": "bˈæzəl"}
    for name, answer in answers.items():
        assert "ˈækmi" not in json.dumps(answer.json(), ensure_ascii=False), name
    assert queued.payload.request.pronunciations == said, "the job is still said with the lexicon's entry"
