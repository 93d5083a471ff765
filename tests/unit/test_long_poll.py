"""``Prefer: wait=N`` on GET /v1/jobs/{id}: the answer comes when the job changed, not on a client's poll.

The change feed here is a fake whose waits are held by the test (a gate), so that "the answer waited" and
"the change woke it" are each shown by an event, not by a clock."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator

import pytest

from contracts import JobQueued, JobState
from producers.long_poll import WAIT_MAX_S, preferred_wait
from tests.support.api_fakes import Reader, client, deps
from tests.support.job_logs import _Builder


class GatedFeed:
    """A change feed whose waiters return only when the test says the job changed (``change``)."""

    def __init__(self) -> None:
        self.watching = asyncio.Event()
        self.watched: list[uuid.UUID] = []
        self._changed: dict[uuid.UUID, asyncio.Event] = {}

    @contextlib.contextmanager
    def watch(self, job_id: uuid.UUID) -> Iterator[GatedFeed.Waiter]:
        self.watched.append(job_id)
        changed = self._changed.setdefault(job_id, asyncio.Event())
        self.watching.set()
        yield GatedFeed.Waiter(changed)

    def change(self, job_id: uuid.UUID) -> None:
        self._changed.setdefault(job_id, asyncio.Event()).set()

    class Waiter:
        def __init__(self, changed: asyncio.Event) -> None:
            self._changed = changed

        async def wait(self) -> None:
            await self._changed.wait()
            self._changed.clear()


def queued() -> JobQueued:
    return _Builder(uuid.uuid4()).queued()


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("wait=5", 5.0),
        ("respond-async, wait=10", 10.0),
        ("wait=2.5; foo", 2.5),
        ('wait="7"', 7.0),
        ("WAIT=3", 3.0),
        ("wait=100000", WAIT_MAX_S),
        (None, None),
        ("", None),
        ("handling=lenient", None),
        ("wait=soon", None),
        ("await=5", None),
        ("wait=-1", None),
    ],
)
def test_the_wait_preference_is_read_leniently_and_capped(header: str | None, seconds: float | None) -> None:
    assert preferred_wait(header) == seconds


async def test_a_waiting_read_answers_when_the_job_changes_and_says_it_waited() -> None:
    reader, feed = Reader(), GatedFeed()
    event = queued()
    reader.project(event)
    async with client(deps(reader, changes=feed)) as http:
        answer = asyncio.create_task(http.get(f"/v1/jobs/{event.job_id}", headers={"Prefer": "wait=30"}))
        await asyncio.wait_for(feed.watching.wait(), 10)
        assert not answer.done()  # held: nothing changed yet
        reader.project(event, JobState.CLAIMED, attempt=1, worker_id="w1")
        feed.change(event.job_id)
        response = await asyncio.wait_for(answer, 10)
    assert response.status_code == 200, response.text
    assert response.json()["state"] == "claimed"
    assert response.headers["Preference-Applied"] == "wait=30"
    assert feed.watched
    assert set(feed.watched) == {event.job_id}


async def test_a_change_made_between_the_first_read_and_the_watch_is_not_missed() -> None:
    """The watch is registered before the read that decides to wait: a job that changed meanwhile answers at once,
    even though its notification went to no one."""
    reader, feed = Reader(), GatedFeed()
    event = queued()
    reader.project(event)
    real_job = reader.job
    reads = 0

    async def job_changing_on_the_first_read(job_id: uuid.UUID, tenant: str | None = None):  # type: ignore[no-untyped-def]
        nonlocal reads
        reads += 1
        found = await real_job(job_id, tenant)
        if reads == 2:  # the first read of the wait; the job completes right after it, unannounced
            reader.project(event, JobState.COMPLETED, attempt=1)
        return found

    reader.job = job_changing_on_the_first_read  # type: ignore[method-assign]
    async with client(deps(reader, changes=feed)) as http:
        response = await asyncio.wait_for(http.get(f"/v1/jobs/{event.job_id}", headers={"Prefer": "wait=30"}), 10)
    assert response.json()["state"] == "completed"


async def test_an_ended_job_answers_at_once_without_watching() -> None:
    reader, feed = Reader(), GatedFeed()
    event = queued()
    reader.project(event, JobState.FAILED, attempt=1, error_code="engine_error", error_message="boom")
    async with client(deps(reader, changes=feed)) as http:
        response = await asyncio.wait_for(http.get(f"/v1/jobs/{event.job_id}", headers={"Prefer": "wait=30"}), 10)
    assert response.json()["state"] == "failed"
    assert feed.watched == []


async def test_a_wait_that_passes_answers_the_job_as_it_is() -> None:
    reader, feed = Reader(), GatedFeed()  # nothing ever changes
    event = queued()
    reader.project(event)
    async with client(deps(reader, changes=feed)) as http:
        response = await asyncio.wait_for(http.get(f"/v1/jobs/{event.job_id}", headers={"Prefer": "wait=0.2"}), 10)
    assert response.status_code == 200
    assert response.json()["state"] == "queued"
    assert response.headers["Preference-Applied"] == "wait=0.2"


async def test_without_a_preference_the_answer_is_immediate_and_says_nothing() -> None:
    reader, feed = Reader(), GatedFeed()
    event = queued()
    reader.project(event)
    async with client(deps(reader, changes=feed)) as http:
        response = await http.get(f"/v1/jobs/{event.job_id}", headers={"Prefer": "handling=strict"})
    assert response.status_code == 200
    assert "Preference-Applied" not in response.headers
    assert feed.watched == []


async def test_another_tenants_job_is_404_before_any_wait() -> None:
    reader, feed = Reader(), GatedFeed()
    event = queued()
    reader.project(event, tenant="other")
    async with client(deps(reader, changes=feed)) as http:
        response = await asyncio.wait_for(http.get(f"/v1/jobs/{event.job_id}", headers={"Prefer": "wait=30"}), 10)
    assert response.status_code == 404
    assert feed.watched == []
