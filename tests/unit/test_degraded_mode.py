"""Degraded mode in the submission pipeline (producers.submission, producers.degradation) on fakes: what is
rewritten to the degraded settings, what is answered at the quality asked for, and what the job shows."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from contracts import DegradedFrom, DocumentSubmitted, JobQueued
from foundation.metrics import SUBMISSIONS_DEGRADED
from producers.admission import Admission
from producers.app import create_app
from producers.auth import ANONYMOUS
from producers.degradation import DegradedSettings, DegradedSettingsInvalid, degrade
from producers.idempotency import scoped_key
from producers.requests import JobRequest
from producers.submission import Answer, Item, Submission, Submissions
from producers.submission_log import SubmissionLog
from projections.errors import ProjectionUnavailable
from tests.support.api_fakes import LIMITS, PRODUCER, Blobs, Documents, Log, Reader, deps, live, request_of

pytestmark = pytest.mark.unit

SETTINGS = DegradedSettings(sample_rate=16000, speed_factor=1.15, max_speed=2.0)
LAUNCH = {"degraded": [("operator", "launch day")]}


def pipeline(reader: Reader, log: Log, settings: DegradedSettings | None = SETTINGS) -> Submissions:
    admission = Admission(reader, max_backlog_s=0, refresh_s=0)  # type: ignore[arg-type]
    return Submissions(
        reader,  # type: ignore[arg-type]
        SubmissionLog(log, LIMITS.max_record_bytes),  # type: ignore[arg-type]
        Blobs(),  # type: ignore[arg-type]
        LIMITS,
        PRODUCER,
        admission=admission,
        degraded=settings,
    )


async def submit(pipe: Submissions, *texts: str, key: str = "k", **fields: object):
    items = [Item(JobRequest(text=text, voice="af_heart", **fields), "interactive") for text in texts]  # type: ignore[arg-type]
    return await pipe.submit(Submission(items, scoped_key(key, None), True, ANONYMOUS))


def test_degrade_speeds_up_within_the_models_range_and_lowers_the_rate_only_where_the_format_can_go():
    asked = request_of("Hello.")
    degraded, was = degrade(asked, SETTINGS, "operator: launch day")  # type: ignore[misc]
    assert (degraded.speed, degraded.sample_rate) == (1.15, 16000)
    assert was == DegradedFrom(speed=1.0, sample_rate=24000, reason="operator: launch day")
    assert was.requested(degraded) == asked
    fast = degrade(asked.model_copy(update={"speed": 1.9}), SETTINGS, "")
    assert fast is not None
    assert fast[0].speed == 2.0, "capped at VOXLOG_MAX_SPEED"
    opus = asked.model_copy(update={"format": "opus", "sample_rate": 48000})
    odd_rate = DegradedSettings(sample_rate=22050, speed_factor=1.15, max_speed=2.0)
    kept = degrade(opus, odd_rate, "")
    assert kept is not None
    assert kept[0].sample_rate == 48000, "opus cannot be delivered at 22050 Hz"
    cheap = asked.model_copy(update={"speed": 2.0, "sample_rate": 16000})
    assert degrade(cheap, SETTINGS, "") is None, "nothing gets cheaper: not degraded"


async def test_while_degraded_a_new_synthesis_is_queued_at_the_degraded_settings_and_says_why():
    reader, log = Reader(), Log()
    reader.modes = LAUNCH
    before = SUBMISSIONS_DEGRADED._value.get()
    submitted = await submit(pipeline(reader, log), "Hello there.")
    [queued] = log.published
    assert isinstance(queued, JobQueued)
    request = queued.payload.request
    assert (request.speed, request.sample_rate) == (1.15, 16000)
    assert queued.payload.degraded_from == DegradedFrom(speed=1.0, sample_rate=24000, reason="operator: launch day")
    assert queued.fingerprint == request.fingerprint() == submitted.answers[0].fingerprint
    assert SUBMISSIONS_DEGRADED._value.get() == before + 1


async def test_degraded_mode_off_or_unset_takes_the_request_as_asked():
    reader, log = Reader(), Log()
    await submit(pipeline(reader, log), "Off.")
    reader.modes = LAUNCH
    await submit(pipeline(reader, log, settings=None), "Not configured.")
    assert [e.payload.degraded_from for e in log.published] == [None, None]
    assert {e.payload.request.speed for e in log.published} == {1.0}


async def test_what_is_cached_or_in_flight_at_full_quality_is_answered_at_full_quality():
    reader, log = Reader(), Log()
    reader.modes = LAUNCH
    cached, flying = request_of("Cached."), request_of("Flying.")
    source = await submit(pipeline(Reader(), Log()), "whatever")  # only for a job id
    reader.cached[cached.fingerprint()] = live(source.answers[0].job_id)
    reader.flying = {flying.fingerprint()}
    submitted = await submit(pipeline(reader, log), "Cached.", "Flying.", "New.")
    answers = submitted.answers
    assert [a.answer for a in answers] == [Answer.CACHED, Answer.QUEUED, Answer.QUEUED]
    assert answers[0].fingerprint == cached.fingerprint()
    assert answers[1].fingerprint == flying.fingerprint(), "a duplicate of a job in flight coalesces onto it"
    queued = [e for e in log.published if isinstance(e, JobQueued)]
    assert [e.payload.degraded_from is not None for e in queued] == [False, False, True]


async def test_a_degraded_request_whose_degraded_audio_is_cached_is_answered_from_it():
    reader, log = Reader(), Log()
    reader.modes = LAUNCH
    first = await submit(pipeline(reader, Log()), "Again.", key="a")
    reader.cached[first.answers[0].fingerprint] = live(first.answers[0].job_id)
    again = await submit(pipeline(reader, log), "Again.", key="b")
    assert again.answers[0].answer is Answer.CACHED
    assert again.answers[0].fingerprint == first.answers[0].fingerprint


async def test_a_retry_of_a_degraded_job_after_the_mode_is_off_names_the_same_job_not_a_409():
    reader, log = Reader(), Log()
    reader.modes = LAUNCH
    first = await submit(pipeline(reader, log), "Once.", key="order-9")
    reader.project(log.published[0])
    reader.modes = {}
    again = await submit(pipeline(reader, log), "Once.", key="order-9")
    assert (again.answers[0].answer, again.answers[0].job_id) == (Answer.KNOWN, first.answers[0].job_id)


async def test_nothing_is_degraded_while_the_projection_cannot_be_read():
    reader, log = Reader(), Log()
    reader.modes = LAUNCH
    reader.down = ProjectionUnavailable("PostgreSQL is down")
    await submit(pipeline(reader, log), "Down.")
    [queued] = log.published
    assert queued.payload.degraded_from is None, "taken unjudged, as asked (the log is the write side)"
    assert queued.payload.request.speed == 1.0


def test_the_job_view_shows_what_degraded_mode_changed_and_documents_record_what_was_asked():
    reader, log = Reader(), Log()
    reader.modes = LAUNCH
    app = create_app(deps(reader, log, documents=Documents(), degraded=SETTINGS, admission=Admission(reader, 0, 0)))  # type: ignore[arg-type]
    with TestClient(app) as http:
        accepted = http.post("/v1/jobs", json={"text": "Shown.", "voice": "af_heart"})
        assert accepted.status_code == 202, accepted.text
        assert accepted.json()["degraded"] == {"speed": 1.0, "sample_rate": 24000, "reason": "operator: launch day"}
        reader.project(log.published[0])
        view = http.get(f"/v1/jobs/{accepted.json()['job_id']}").json()
        document = http.post("/v1/documents", json={"text": "# Book\n\nOne part.", "voice": "af_heart"})
        assert document.status_code == 202, document.text
    assert view["degraded"] == {"speed": 1.0, "sample_rate": 24000, "reason": "operator: launch day"}
    assert (view["request"]["speed"], view["request"]["sample_rate"]) == (1.15, 16000)
    record, *parts = log.published[1:]
    assert isinstance(record, DocumentSubmitted)
    assert (record.payload.request.speed, record.payload.request.sample_rate) == (1.0, 24000)
    assert all(p.payload.degraded_from is not None for p in parts), "a document's parts degrade too"


def test_a_degraded_sample_rate_voxlog_cannot_deliver_stops_the_api_at_start_saying_what_to_use():
    with pytest.raises(DegradedSettingsInvalid, match=r"VOXLOG_DEGRADED_SAMPLE_RATE=11025 .* 16000, 22050"):
        DegradedSettings(sample_rate=11025, speed_factor=1.15, max_speed=2.0)
    assert DegradedSettings(sample_rate=0, speed_factor=1.0, max_speed=2.0).sample_rate == 0
