"""POST /v1/batches in process (the real handler, a scripted projection and log): refusals and retries."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from foundation.offload import OverBudget
from producers import requests as requests_module
from projections.errors import ProjectionUnavailable
from tests.support.api_fakes import OFFLOAD, Blobs, Log, Reader, client, deps, live, ref


def reader(cached: dict[str, uuid.UUID] | None = None, down: Exception | None = None) -> Reader:
    projection = Reader(down)
    projection.cached = {fp: live(job) for fp, job in (cached or {}).items()}
    return projection


async def post(
    projection: Reader, log: Log, requests: list[dict[str, Any]], blobs: Blobs | None = None, **headers: str
) -> httpx.Response:
    async with client(deps(projection, log, blobs=blobs)) as api:
        return await api.post("/v1/batches", json={"requests": requests}, headers=headers)


def requests(*texts: str) -> list[dict[str, Any]]:
    return [{"text": text, "voice": "af_heart"} for text in texts]


async def test_a_batch_the_log_took_in_part_is_a_503_whose_key_names_the_same_jobs_on_the_retry():
    batch = requests("One.", "Two.", "Three.")
    partial = Log(takes=1)
    refused = await post(reader(), partial, batch)
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "5"
    detail = refused.json()["detail"]
    assert "part of it may be recorded" in detail
    key = detail.split("Idempotency-Key: ")[1].split()[0]
    first_try = [event.job_id for event in partial.published]

    retry = Log()
    answer = await post(reader(), retry, batch, **{"Idempotency-Key": key})
    assert answer.status_code == 202, answer.text
    assert [event.job_id for event in retry.published][:1] == first_try, "the retry names the job already recorded"
    assert [job["job_id"] for job in answer.json()["jobs"]] == [str(e.job_id) for e in retry.published]


async def test_the_same_key_names_the_same_jobs_and_another_key_other_ones():
    batch = requests("One.", "Two.")
    ids = []
    for key in ("k1", "k1", "k2"):
        log = Log()
        assert (await post(reader(), log, batch, **{"Idempotency-Key": key})).status_code == 202
        ids.append([event.job_id for event in log.published])
    assert ids[0] == ids[1]
    assert set(ids[0]).isdisjoint(ids[2])


async def test_live_results_answer_with_jobs_of_the_clients_own_completed_at_once_and_only_the_rest_is_queued():
    log = Log()
    probe = Log()
    await post(reader(), probe, requests("Cached."))
    fingerprint, done = probe.published[0].fingerprint, uuid.uuid4()
    answer = await post(reader({fingerprint: done}), log, requests("Cached.", "Not cached."))
    assert answer.status_code == 202, answer.text
    body = answer.json()
    assert (body["queued"], body["cached"]) == (1, 1)
    own = body["jobs"][0]
    assert (own["fingerprint"], own["state"]) == (fingerprint, "completed")
    assert own["job_id"] != str(done), "the client's own job, never the job of whoever asked first"
    cached_queued, completed, fresh = log.published
    assert (cached_queued.type, str(cached_queued.job_id)) == ("JobQueued", own["job_id"])
    assert (completed.type, completed.job_id, completed.payload.cache_hit) == (
        "JobCompleted",
        cached_queued.job_id,
        True,
    )
    assert completed.payload.source_job_id == done
    assert fresh.payload.request.text == "Not cached."


async def test_a_cached_result_is_marked_used_before_it_is_handed_out_and_one_whose_audio_is_gone_is_queued():
    probe = Log()
    await post(reader(), probe, requests("Kept.", "Evicted."))
    kept, evicted = (event.fingerprint for event in probe.published)
    kept_job, evicted_job = uuid.uuid4(), uuid.uuid4()
    blobs, log = Blobs(gone={ref(str(evicted_job)).sha256}), Log()
    answer = await post(reader({kept: kept_job, evicted: evicted_job}), log, requests("Kept.", "Evicted."), blobs)
    assert answer.status_code == 202, answer.text
    assert [job["state"] for job in answer.json()["jobs"]] == ["completed", "queued"]
    assert blobs.touched == [ref(str(kept_job)).sha256]
    synthesized = [e.payload.request.text for e in log.published if e.type == "JobQueued"]
    completed = [e for e in log.published if e.type == "JobCompleted"]
    assert synthesized == ["Kept.", "Evicted."], "each its own job"
    assert [e.payload.source_job_id for e in completed] == [kept_job], "only the kept result answers"


async def test_without_the_projection_every_request_is_queued():
    log = Log()
    answer = await post(reader(down=ProjectionUnavailable("down")), log, requests("One.", "Two."))
    assert answer.status_code == 202
    assert len(log.published) == 2


async def test_a_batch_over_the_limit_or_empty_is_a_413_and_nothing_is_published():
    log = Log()
    assert (await post(reader(), log, requests(*(f"Text {i}." for i in range(11))))).status_code == 413
    assert (await post(reader(), log, [])).status_code == 413
    assert log.published == []


class Recording:
    """The offload, with what it was asked to run noted."""

    def __init__(self, error: Exception | None = None) -> None:
        self.ran: list[str] = []
        self.error = error

    async def run(self, work, *args):
        self.ran.append(work.__name__)
        if self.error is not None:
            raise self.error
        return await OFFLOAD.run(work, *args)


async def test_regression_a_large_batch_was_validated_on_the_event_loop(monkeypatch):
    """10,000 requests of 5,000 characters held the loop for seconds: past INLINE_CHARS, a submission is
    validated in an offload process (here every one is), refusals included."""
    monkeypatch.setattr(requests_module, "INLINE_CHARS", 0)
    offload, log = Recording(), Log()
    async with client(deps(reader(), log, offload=offload)) as api:
        accepted = await api.post("/v1/batches", json={"requests": requests("One  two.", "Three.")})
        refused = await api.post("/v1/batches", json={"requests": requests("Fine.", "", "Also fine.")})
    assert accepted.status_code == 202, accepted.text
    assert [e.payload.request.text for e in log.published] == ["One two.", "Three."]
    assert refused.status_code == 422
    assert [(e["index"], e["status"]) for e in refused.json()["errors"]] == [(1, 422)]
    assert offload.ran == ["validate_each", "validate_each"]


async def test_a_short_submission_is_validated_inline():
    offload = Recording()
    async with client(deps(reader(), Log(), offload=offload)) as api:
        assert (await api.post("/v1/batches", json={"requests": requests("One.", "Two.")})).status_code == 202
    assert offload.ran == []


async def test_validation_past_the_offload_budget_is_a_413_that_names_it(monkeypatch):
    monkeypatch.setattr(requests_module, "INLINE_CHARS", 0)
    offload, log = Recording(OverBudget("cpu", "30 CPU seconds")), Log()
    async with client(deps(reader(), log, offload=offload)) as api:
        refused = await api.post("/v1/batches", json={"requests": requests("One.", "Two.")})
    assert refused.status_code == 413
    assert refused.json()["detail"] == (
        "validating the requests took more than 30 CPU seconds (VOXLOG_OFFLOAD_CPU_S): send fewer or shorter ones"
    )
    assert log.published == []
