"""voxlog.client against a scripted API (httpx.MockTransport): the retry protocol, waiting, downloads, webhook
signatures. tests/e2e/test_client.py runs it against real processes with the broker killed."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import standardwebhooks

from tests.support.view_bodies import history_body
from voxlog.client import (
    ApiError,
    AsyncClient,
    Client,
    RetryPolicy,
    WaitTimeout,
    WebhookVerificationError,
    sign_webhook,
    verify_webhook,
)
from voxlog.client import operations as ops
from voxlog.client.protocol import Sleep, retry_after

JOB_ID = uuid.UUID(int=7)
FAST = RetryPolicy(attempts=4, budget_s=5.0, base_s=0.001, max_s=0.002)
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def accepted(state: str = "queued") -> dict[str, Any]:
    return {"job_id": str(JOB_ID), "fingerprint": "ab" * 32, "state": state, "degraded": None, "links": {}}


def job_body(state: str) -> dict[str, Any]:
    request = {
        "text": "Hi.", "voice": "af_heart", "speed": 1.0, "lang": "en-us", "engine": "kokoro-onnx",
        "model_version": "m1", "format": "wav", "sample_rate": 24000,
    }  # fmt: skip
    return {
        "job_id": str(JOB_ID), "state": state, "attempt": 1, "fingerprint": "ab" * 32, "request": request,
        "degraded": None, "cache_hit": False, "segments_reused": 0, "source_job_id": None, "worker_id": None,
        "segment_count": None, "total_duration_ms": None, "error": None, "release": None, "cancellation": None,
        "timings": {"submitted_at": "2026-12-04T00:00:00Z", "claimed_at": None, "completed_at": None,
                    "failed_at": None, "cancelled_at": None, "queue_wait_ms": None, "total_ms": None},
        "segments": [], "links": {}, "queue": None,
    }  # fmt: skip


class Script:
    """Answers each request with the next scripted answer (the last repeats); records every request."""

    def __init__(self, *answers: httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer(request) if callable(answer) else answer

    def client(self, retry: RetryPolicy = FAST) -> Client:
        return Client("http://api", api_key="vxl_k_s", retry=retry, transport=httpx.MockTransport(self))


def answer(status: int, body: Any = None, **headers: str) -> httpx.Response:
    named = {name.replace("_", "-"): value for name, value in headers.items()}
    return httpx.Response(status, json=body if body is not None else {"detail": f"said {status}"}, headers=named)


def test_a_submission_that_got_a_503_is_sent_again_with_the_same_idempotency_key():
    script = Script(answer(503, Retry_After="0"), answer(202, accepted()))
    with script.client() as client:
        job = client.submit_job("Hello.", "af_heart", speed=1.2)
    assert job.job_id == JOB_ID
    keys = [r.headers["Idempotency-Key"] for r in script.requests]
    assert len(keys) == 2
    assert keys[0] == keys[1]
    assert keys[0]
    assert [json.loads(r.content) for r in script.requests] == [
        {"text": "Hello.", "voice": "af_heart", "speed": 1.2}
    ] * 2
    assert script.requests[0].headers["Authorization"] == "Bearer vxl_k_s"


def test_no_answer_is_retried_and_the_callers_key_is_kept():
    script = Script(httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), answer(200, accepted("completed")))
    with script.client() as client:
        job = client.submit_job("Hello.", "af_heart", idempotency_key="mine")
    assert job.state.value == "completed"
    assert [r.headers["Idempotency-Key"] for r in script.requests] == ["mine"] * 3


def test_two_logical_submissions_carry_two_keys():
    script = Script(answer(202, accepted()))
    with script.client() as client:
        client.submit_job("One.", "af_heart")
        client.submit_job("One.", "af_heart")
    assert script.requests[0].headers["Idempotency-Key"] != script.requests[1].headers["Idempotency-Key"]


def test_a_client_error_is_raised_at_once_with_the_apis_detail():
    script = Script(answer(422, {"detail": "speed 9 is outside 0.25-4.0"}))
    with script.client() as client, pytest.raises(ApiError) as raised:
        client.submit_job("Hello.", "af_heart", speed=9)
    assert raised.value.status == 422
    assert "speed 9 is outside 0.25-4.0" in str(raised.value)
    assert len(script.requests) == 1


def test_an_openai_shaped_error_is_read_too():
    script = Script(answer(400, {"error": {"message": "voice 'x' is unknown", "type": "invalid_request_error"}}))
    with script.client() as client, pytest.raises(ApiError, match="voice 'x' is unknown"):
        client.speech("Hello.", "x")


def test_the_retries_are_bounded_by_attempts():
    script = Script(answer(503))
    with script.client() as client, pytest.raises(ApiError, match="gave up after 4 attempts") as raised:
        client.job(JOB_ID)
    assert raised.value.status == 503
    assert len(script.requests) == 4


def test_a_retry_after_past_the_budget_ends_the_retries_at_once():
    script = Script(answer(429, {"detail": "over the quota"}, Retry_After="3600"))
    with script.client() as client, pytest.raises(ApiError, match=r"over the quota.*retry budget") as raised:
        client.submit_job("Hello.", "af_heart")
    assert raised.value.status == 429
    assert len(script.requests) == 1


def test_a_wait_is_jittered_below_its_bound_and_never_shorter_than_retry_after():
    policy = RetryPolicy(base_s=1.0, max_s=8.0, random=lambda: 0.5)
    assert [policy.delay(n, None) for n in (1, 2, 3, 4, 5, 6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert policy.delay(1, 3.0) == 3.0
    assert RetryPolicy(random=lambda: 0.0).delay(3, None) == 0.0


def test_retry_after_is_read_as_seconds_or_a_date():
    assert retry_after(httpx.Response(503, headers={"Retry-After": "7"})) == 7.0
    dated = httpx.Response(503, headers={"Retry-After": "Fri, 04 Dec 2026 00:00:10 GMT"})
    assert retry_after(dated, now=datetime(2026, 12, 4, tzinfo=UTC).timestamp()) == 10.0
    assert retry_after(httpx.Response(503, headers={"Retry-After": "soon"})) is None
    assert retry_after(httpx.Response(503)) is None


def test_waiting_asks_the_api_to_hold_each_read_and_never_sleeps_when_it_does():
    waited = {"Preference-Applied": "wait=25"}
    script = Script(answer(200, job_body("queued"), **waited), answer(200, job_body("claimed"), **waited),
                    answer(200, job_body("completed"), **waited))  # fmt: skip
    steps = _drive(ops.wait_job(JOB_ID, 600.0), script)
    assert [type(s).__name__ for s in steps] == ["Call"] * 3
    with script.client() as client:
        script.answers = [answer(200, job_body("completed"), **waited)]
        assert client.wait(JOB_ID).state.value == "completed"
    assert all(r.headers["Prefer"].startswith("wait=") for r in script.requests)


def test_against_an_api_that_answers_at_once_reads_are_paced_not_tight():
    script = Script(answer(200, job_body("queued")), answer(200, job_body("queued")), answer(200, job_body("queued")),
                    answer(200, job_body("completed")))  # fmt: skip
    steps = _drive(ops.wait_job(JOB_ID, 600.0), script)
    sleeps = [s.seconds for s in steps if isinstance(s, Sleep)]
    assert sleeps == [0.2, 0.4, 0.8]


def test_a_job_not_projected_yet_is_waited_for_and_a_long_unknown_one_is_not():
    script = Script(answer(404), answer(200, job_body("completed"), **{"Preference-Applied": "wait=25"}))
    steps = _drive(ops.wait_job(JOB_ID, 600.0), script)
    assert [type(s).__name__ for s in steps] == ["Call", "Sleep", "Call"]
    clock = iter([0.0, 0.0, 31.0, 31.0, 31.0]).__next__
    with pytest.raises(ApiError) as raised:
        _drive(ops.wait_job(JOB_ID, 600.0, clock), Script(answer(404)))
    assert raised.value.status == 404


def test_a_wait_past_its_timeout_says_the_job_goes_on():
    now = [0.0]

    def clock() -> float:
        now[0] += 10.0
        return now[0]

    script = Script(answer(200, job_body("queued"), **{"Preference-Applied": "wait=25"}))
    with pytest.raises(WaitTimeout, match="did not end within 30 s; it goes on on the server"):
        _drive(ops.wait_job(JOB_ID, 30.0, clock), script)


def test_a_download_lands_whole_or_not_at_all(tmp_path: Path):
    script = Script(httpx.Response(200, content=b"RIFF" + b"\0" * 100))
    dest = tmp_path / "a.wav"
    with script.client() as client:
        assert client.download(f"/v1/jobs/{JOB_ID}/audio", dest) == dest
    assert dest.read_bytes() == b"RIFF" + b"\0" * 100
    assert not dest.with_name("a.wav.part").exists()
    script.answers = [answer(409, {"detail": "job is claimed, not completed"})]
    other = tmp_path / "b.wav"
    with script.client() as client, pytest.raises(ApiError) as raised:
        client.download(f"/v1/jobs/{JOB_ID}/audio", other)
    assert raised.value.status == 409
    assert not other.exists()
    assert not other.with_name("b.wav.part").exists()


def test_speech_streams_in_chunks_after_a_retried_503():
    script = Script(answer(503, Retry_After="0"), httpx.Response(200, content=b"x" * 5000))
    with script.client() as client:
        chunks = list(client.stream_speech("Hello.", "af_heart", response_format="pcm"))
    assert b"".join(chunks) == b"x" * 5000
    assert json.loads(script.requests[-1].content)["stream"] is True
    assert script.requests[0].headers["Idempotency-Key"] == script.requests[1].headers["Idempotency-Key"]


def test_speak_raises_with_the_jobs_error_when_it_failed():
    failed = {**job_body("failed"), "error": {"code": "engine_error", "message": "the engine broke"}}
    script = Script(answer(202, accepted()), answer(200, failed, **{"Preference-Applied": "wait=25"}))
    with script.client() as client, pytest.raises(ApiError, match="ended failed: the engine broke"):
        client.speak("Hello.", "af_heart")


async def test_the_async_client_follows_the_same_protocol(tmp_path: Path):
    script = Script(
        httpx.ConnectError("refused"), answer(503, Retry_After="0"), answer(202, accepted()),
        answer(200, job_body("completed"), **{"Preference-Applied": "wait=25"}), httpx.Response(200, content=b"RIFF"),
    )  # fmt: skip
    async with AsyncClient("http://api", retry=FAST, transport=httpx.MockTransport(script)) as client:
        job = await client.submit_job("Hello.", "af_heart")
        done = await client.wait(job.job_id)
        path = await client.download(f"/v1/jobs/{job.job_id}/audio", tmp_path / "a.wav")
    assert done.state.value == "completed"
    assert path.read_bytes() == b"RIFF"
    assert len({r.headers["Idempotency-Key"] for r in script.requests[:3]}) == 1
    await asyncio.sleep(0)  # the transport closed without a warning


async def test_a_jobs_history_is_read_typed_on_both_clients_with_headers_added_to_a_call():
    """``events``: GET /v1/jobs/{id}/events as the API's JobHistoryView; ``with_headers`` adds a header (a run's
    traceparent) to a call, kept on its retries, the call's own headers kept too."""
    history = history_body(JOB_ID, "Hi.")
    script = Script(answer(503, Retry_After="0"), answer(200, history))
    traced = {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"}
    with script.client() as client:
        read = client.run(ops.with_headers(ops.events(JOB_ID), traced))
        submitted = ops.with_headers(ops.submit_job("Hi.", "af_heart", "k", {}), traced)
    assert [e.type for e in read.events] == ["JobQueued", "JobClaimed", "SegmentProduced", "SegmentProduced",
                                             "JobCompleted"]  # fmt: skip
    assert read.attempts[0].worker_id == "w-1"
    assert [r.url.path for r in script.requests] == [f"/v1/jobs/{JOB_ID}/events"] * 2
    assert {r.headers["traceparent"] for r in script.requests} == {traced["traceparent"]}
    assert dict(submitted.headers) == {"Idempotency-Key": "k", **traced}
    again = Script(answer(200, history))
    async with AsyncClient("http://api", retry=FAST, transport=httpx.MockTransport(again)) as aio:
        assert await aio.events(str(JOB_ID)) == read
    await asyncio.sleep(0)


DOC_ID = uuid.UUID(int=9)


def document_accepted() -> dict[str, Any]:
    chapters = [{"index": 0, "title": "One", "parts": 2}]
    return {"document_id": str(DOC_ID), "title": "Book", "parts": 2, "chars": 40, "chapters": chapters, "links": {}}


def test_a_replayed_document_submission_says_so():
    script = Script(answer(503, Retry_After="0"), answer(200, document_accepted()), answer(202, document_accepted()))
    with script.client() as client:
        again = client.submit_document("# One\n\nText.", idempotency_key="k")
        new = client.submit_document("# One\n\nText.", idempotency_key="k2")
    assert again.document_id == new.document_id == DOC_ID
    assert (again.replayed, new.replayed) == (True, False)
    assert [r.headers["Idempotency-Key"] for r in script.requests] == ["k", "k", "k2"]


def test_a_documents_table_of_contents_and_captions_are_read_typed(tmp_path: Path):
    toc = {
        "document_id": str(DOC_ID), "title": "Book", "duration_ms": 900,
        "chapters": [{"index": 0, "title": "One", "start_ms": 0, "duration_ms": 900, "parts": 2, "audio": "/a"}],
    }  # fmt: skip
    script = Script(answer(200, toc), httpx.Response(200, content="WEBVTT\n\nété".encode()))
    with script.client() as client:
        read = client.toc(DOC_ID)
        vtt = client.captions(fmt="vtt", document_id=DOC_ID, chapter=0)
        with pytest.raises(TypeError):
            client.captions(JOB_ID, document_id=DOC_ID)
    assert read.chapters[0].duration_ms == 900
    assert vtt == "WEBVTT\n\nété"
    assert [(r.url.path, dict(r.url.params)) for r in script.requests] == [
        (f"/v1/documents/{DOC_ID}/toc", {}),
        (f"/v1/documents/{DOC_ID}/chapters/0/captions", {"format": "vtt"}),
    ]


async def test_the_async_client_reads_documents_as_the_blocking_one_does():
    toc = {"document_id": str(DOC_ID), "title": "Book", "duration_ms": 0, "chapters": []}
    script = Script(answer(200, document_accepted()), answer(200, toc), httpx.Response(200, content=b"1\n"))
    async with AsyncClient("http://api", retry=FAST, transport=httpx.MockTransport(script)) as client:
        submitted = await client.submit_document("Text.", voice="af_heart")
        read = await client.toc(DOC_ID)
        srt = await client.captions(document_id=DOC_ID)
    assert submitted.replayed
    assert read.document_id == DOC_ID
    assert srt == "1\n"
    assert script.requests[-1].url.path == f"/v1/documents/{DOC_ID}/captions"
    await asyncio.sleep(0)


def test_a_signature_of_ours_verifies_with_the_standard_webhooks_library_and_theirs_with_ours():
    body = b'{"type":"job.completed","data":{"job_id":"7"}}'
    stamp = datetime.now(UTC).replace(microsecond=0)
    theirs = standardwebhooks.Webhook(SECRET)
    headers = {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(int(stamp.timestamp())),
        "webhook-signature": sign_webhook(SECRET, "msg_1", int(stamp.timestamp()), body),
    }
    assert theirs.verify(body, headers) == json.loads(body)
    headers["webhook-signature"] = theirs.sign("msg_1", stamp, body.decode())
    verify_webhook({k.upper(): v for k, v in headers.items()}, body, SECRET)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda h, b: (h, b + b" "), "no signature"),
        (lambda h, b: ({**h, "webhook-id": "msg_2"}, b), "no signature"),
        (lambda h, b: ({**h, "webhook-timestamp": str(int(h["webhook-timestamp"]) - 600)}, b), "replayed or skewed"),
        (lambda h, b: ({k: v for k, v in h.items() if k != "webhook-signature"}, b), "no webhook-signature header"),
        (lambda h, b: ({**h, "webhook-timestamp": "noon"}, b), "not a number"),
    ],
)
def test_a_delivery_altered_or_replayed_does_not_verify(change: Any, message: str):
    body, stamp = b'{"type":"job.failed"}', int(datetime.now(UTC).timestamp())
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(stamp),
               "webhook-signature": sign_webhook(SECRET, "msg_1", stamp, body)}  # fmt: skip
    verify_webhook(headers, body, SECRET)
    altered, altered_body = change(headers, body)
    with pytest.raises(WebhookVerificationError, match=message):
        verify_webhook(altered, altered_body, SECRET)


def test_a_rotated_secret_verifies_with_either_signature():
    body, stamp = b"{}", int(datetime.now(UTC).timestamp())
    old, new = SECRET, "whsec_" + "QUJD" * 8
    both = f"{sign_webhook(new, 'msg_1', stamp, body)} {sign_webhook(old, 'msg_1', stamp, body)}"
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(stamp), "webhook-signature": both}
    verify_webhook(headers, body, old)
    verify_webhook(headers, body, new)


def _drive(program: Any, script: Script) -> list[Any]:
    """Carry a program out against ``script`` without sleeping: the steps it took, in order."""
    steps: list[Any] = []
    with script.client() as client:
        result: Any = None
        thrown: ApiError | None = None
        while True:
            try:
                step = program.throw(thrown) if thrown else program.send(result)
            except StopIteration:
                return steps
            steps.append(step)
            thrown, result = None, None
            if isinstance(step, ops.Call):
                try:
                    result = client.run(step)
                except ApiError as exc:
                    thrown = exc
