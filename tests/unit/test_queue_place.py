"""A queued job's place and estimated start (producers.queue_place), and GET /v1/jobs/{id} showing them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from litestar.testing import TestClient

from contracts import JobQueued, JobState
from contracts.scheduling import HeldClaim
from producers.app import create_app
from producers.queue_place import queue_place, remaining_chars
from projections.reads.queue_place import QueueRow
from tests.support.api_fakes import Log, Reader, deps
from tests.support.events import one_of_each

pytestmark = pytest.mark.unit


def queued(text: str) -> JobQueued:
    event = one_of_each(text)[0]
    assert isinstance(event, JobQueued)
    return event


NOW = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


def claim(text_chars: int, done: int = 0, total: int | None = None, running: bool = False) -> HeldClaim:
    return HeldClaim(
        job_id=uuid.uuid4(), fingerprint="ab" * 32, attempt=1, segments_done=done, segments_total=total,
        text_chars=text_chars, running=running,
    )  # fmt: skip


def test_a_held_claims_remaining_text_is_its_share_of_segments_not_done():
    assert remaining_chars(claim(1200, done=1, total=4)) == 900
    assert remaining_chars(claim(1200)) == 1200, "segments not known yet: all of it"
    assert remaining_chars(claim(1200, done=4, total=4)) == 0


def test_the_position_counts_the_claims_held_and_the_jobs_listed_before_and_the_start_is_their_text_over_the_speed():
    held = [claim(1200, done=1, total=4, running=True), claim(300)]
    sent = NOW - timedelta(seconds=2)
    place = queue_place("w1", sent, 100.0, held, place=3, chars_before=300, now=NOW)
    assert place.position == 5, "two claims held, then two jobs listed before it"
    assert place.estimated_start == NOW + timedelta(seconds=(900 + 300 + 300) / 100)
    assert (place.worker, place.heartbeat_at, place.heartbeat_age_s) == ("w1", sent, 2.0)


def test_first_in_an_idle_workers_queue_it_is_first_and_starts_now():
    place = queue_place("w1", NOW, 50.0, [], place=1, chars_before=0, now=NOW)
    assert (place.position, place.estimated_start) == (1, NOW)


def test_a_worker_without_a_measured_speed_gives_a_position_and_no_estimate():
    place = queue_place("w1", NOW, None, [claim(10)], place=1, chars_before=0, now=NOW)
    assert (place.position, place.estimated_start) == (2, None)


def place_of(position: int) -> QueueRow:
    """A listing ``position``-th in worker w1's queue, behind no claim, by a worker with no measured speed."""
    return QueueRow(worker="w1", sent_at=NOW, chars_per_s=None, claims=[], place=position, chars_before=0)


@pytest.mark.parametrize("state", [JobState.QUEUED, JobState.RELEASED])
def test_get_job_shows_a_waiting_jobs_place_and_nothing_of_the_jobs_ahead(state):
    reader, event = Reader(), queued("Waits its turn.")
    reader.project(event, state)
    reader.places[event.job_id] = place_of(3)
    with TestClient(create_app(deps(reader, Log()))) as http:
        body = http.get(f"/v1/jobs/{event.job_id}").json()
    age = body["queue"].pop("heartbeat_age_s")
    assert body["queue"] == {
        "worker": "w1",
        "position": 3,
        "estimated_start": None,
        "heartbeat_at": "2026-12-02T09:00:00Z",
    }
    assert age > 0, "dated by the heartbeat"


def test_get_job_shows_no_place_for_a_job_no_worker_lists_nor_for_one_that_is_not_waiting():
    reader, waiting, running = Reader(), queued("Not read yet."), queued("On the engine.")
    reader.project(waiting)
    reader.project(running, JobState.CLAIMED)
    reader.places[running.job_id] = place_of(1)  # a stale listing: the job is claimed since
    with TestClient(create_app(deps(reader, Log()))) as http:
        unlisted = http.get(f"/v1/jobs/{waiting.job_id}").json()
        claimed = http.get(f"/v1/jobs/{running.job_id}").json()
    assert (unlisted["state"], unlisted["queue"]) == ("queued", None)
    assert (claimed["state"], claimed["queue"]) == ("claimed", None)
    assert reader.place_reads == [waiting.job_id], "a job not waiting is not looked for in the queues"
