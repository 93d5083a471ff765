"""The canary (voxlog check): its speech judgement, a run against a fake API through voxlog.client, what it
prints, exports and exits with.

The fake serves whole bodies of the API's views (each checked against its model before it is sent), since the
client reads them typed."""

from __future__ import annotations

import argparse
import io
import json
import random
import uuid
from typing import Any

import httpx
import numpy as np
import pytest
import soundfile as sf
from prometheus_client import CollectorRegistry, generate_latest

from tests.support.view_bodies import accepted_body, error, history_body, job_body, voices_body
from voxlog import canary as canary_module
from voxlog import check_cli
from voxlog.canary import PHASES, Canary, CanaryRun, canary_text, report
from voxlog.canary_audio import expected_duration_s, judge
from voxlog.check_cli import CanaryMetrics, retry_policy
from voxlog.client import Client, RetryPolicy

pytestmark = pytest.mark.unit

RATE = 24000
TEXT = "Canary check 4821: the amber and the willow are fine today."
JOB_ID = uuid.UUID("a3f9c916-9ea7-5eb0-92fd-b8e7d492dd16")
FAST = RetryPolicy(attempts=3, budget_s=1.0, base_s=0.001, max_s=0.002)


def speechlike(seconds: float, peak: float = 0.3) -> np.ndarray:
    """Syllables: 150-ms bursts of a voiced sound, 80-ms pauses between them."""
    t = np.arange(round(RATE * seconds)) / RATE
    voiced = np.sin(2 * np.pi * 140 * t) + 0.5 * np.sin(2 * np.pi * 280 * t)
    envelope = ((t % 0.23) < 0.15).astype(np.float64)
    return (peak * voiced * envelope / 1.5).astype(np.float32)


def test_speech_of_the_texts_length_passes():
    verdict = judge(speechlike(expected_duration_s(TEXT)), RATE, TEXT, listen=False)
    assert verdict.passed, verdict.failures
    assert verdict.words_heard is None


@pytest.mark.parametrize(
    ("audio", "failed"),
    [
        (np.zeros(RATE * 4, dtype=np.float32), "energy: "),  # silence
        (speechlike(0.3), "duration: "),  # far too short for the text
        (speechlike(30.0), "duration: "),  # far too long
        ((0.1 * np.sin(2 * np.pi * 220 * np.arange(RATE * 4) / RATE)).astype(np.float32), "a tone, not speech"),
        (np.clip(speechlike(4.0, peak=3.0), -1, 1), "clipping: "),
    ],
    ids=["silence", "short", "long", "tone", "clipped"],
)
def test_audio_that_is_not_speech_of_the_text_fails_saying_why(audio, failed):
    verdict = judge(audio, RATE, TEXT, listen=False)
    assert not verdict.passed
    assert any(failed in failure for failure in verdict.failures), verdict.failures


def test_each_run_asks_for_a_text_not_asked_for_before():
    rng = random.Random(7)
    texts = {canary_text(rng) for _ in range(200)}
    assert len(texts) == 200


def wav(samples: np.ndarray) -> bytes:
    out = io.BytesIO()
    sf.write(out, samples, RATE, format="WAV")
    return out.getvalue()


class FakeApi:
    """The routes the canary uses; the job is claimed, produced and completed by its second read.

    ``held``: the API holds reads (answers ``Preference-Applied: wait``); ``answers``: a route's scripted
    answers, each served once before the route answers as usual (``"POST /v1/jobs": [error(503, ...)]``)."""

    def __init__(
        self,
        *,
        claim: bool = True,
        ends: str = "completed",
        audio: bytes | None = None,
        held: bool = False,
        projected: bool = True,
        answers: dict[str, list[httpx.Response]] | None = None,
    ) -> None:
        self.claim, self.ends, self.audio, self.held, self.projected = claim, ends, audio, held, projected
        self.answers = answers or {}
        self.reads, self.sent, self.text = 0, [], ""

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        path = request.url.path
        if scripted := self.answers.get(f"{request.method} {path}"):
            return scripted.pop(0)
        if path == "/v1/voices":
            return httpx.Response(200, json=voices_body("af_heart"))
        if path == "/v1/jobs" and request.method == "POST":
            self.text = json.loads(request.content)["text"]
            return httpx.Response(202, json=accepted_body(JOB_ID))
        if path == f"/v1/jobs/{JOB_ID}":
            if not self.projected:
                return error(404, f"no job {JOB_ID}")
            self.reads += 1
            done = self.claim and self.reads >= 2
            state = self.ends if done else "queued"
            failed = {"code": "engine_error", "message": "the engine broke"} if state == "failed" else None
            headers = {"Preference-Applied": "wait=25.0"} if self.held else {}
            return httpx.Response(
                200, json=job_body(JOB_ID, self.text, state, claimed=done, error=failed), headers=headers
            )
        if path == f"/v1/jobs/{JOB_ID}/events":
            return httpx.Response(200, json=history_body(JOB_ID, self.text))
        if path == f"/v1/jobs/{JOB_ID}/audio":
            return httpx.Response(200, content=self.audio or wav(speechlike(expected_duration_s(self.text))))
        return error(404, "no such route")


def client_of(api: FakeApi) -> Client:
    return Client("http://api", transport=httpx.MockTransport(api), retry=FAST)


def run_against(api: FakeApi, timeout_s: float = 5.0, voice: str | None = None) -> CanaryRun:
    with client_of(api) as client:
        return Canary(client, voice=voice, timeout_s=timeout_s, listen=False).run()


def test_a_run_that_passes_reports_every_phase_and_sends_its_trace():
    api = FakeApi()
    run = run_against(api)
    assert run.passed, run.failures
    assert set(run.phases) == set(PHASES)
    assert {r.headers["traceparent"].split("-")[1] for r in api.sent} == {run.trace_id}  # one trace, every request
    assert next(r.url.path for r in api.sent if r.method == "GET") == "/v1/voices"  # no voice given: the first one
    submitted = next(r for r in api.sent if r.method == "POST")
    assert json.loads(submitted.content)["voice"] == "af_heart"
    assert submitted.headers["idempotency-key"]  # the client's: a retried submission names the same job
    printed = report(run)
    assert printed.startswith(f"voxlog check passed: job {JOB_ID}, trace {run.trace_id}")
    assert all(f"  {phase} " in printed for phase in PHASES)
    assert "failed:" not in printed


def test_the_log_says_when_the_job_was_claimed_produced_and_completed():
    """Claimed, first segment and completed are the events' times (the first SegmentProduced), not the
    projection's timings (claimed 100 ms, completed 300 ms after the server's start)."""
    run = run_against(FakeApi())
    started = run.phases["claimed"] - 0.001  # the server's clock, relative to the run's own start
    assert run.phases["first segment"] == pytest.approx(started + 0.002)
    assert run.phases["completed"] == pytest.approx(started + 0.003)


def test_a_one_segment_jobs_first_segment_is_its_completion_which_carries_it():
    """Issue 41, item 2: the last segment rides in the ``JobCompleted`` (version 3); a one-segment job has no
    ``SegmentProduced`` of its own, and its first audio is its completion's."""
    body = history_body(JOB_ID, "One sentence.")
    body["events"] = [e for e in body["events"] if e["type"] != "SegmentProduced"]
    run = run_against(FakeApi(answers={f"GET /v1/jobs/{JOB_ID}/events": [httpx.Response(200, json=body)]}))
    assert run.passed, run.failures
    started = run.phases["claimed"] - 0.001
    assert run.phases["first segment"] == pytest.approx(started + 0.003) == run.phases["completed"]
    assert list(run.phases).index("first segment") < list(run.phases).index("completed")


def test_without_the_log_the_projections_timings_are_reported():
    api = FakeApi(answers={f"GET /v1/jobs/{JOB_ID}/events": [error(404, f"no event of job {JOB_ID} in the log")]})
    run = run_against(api)
    assert run.passed, run.failures
    assert "first segment" not in run.phases
    assert run.phases["completed"] - run.phases["claimed"] == pytest.approx(0.2)


def test_reads_the_api_holds_are_sent_again_at_once_and_others_are_paced(monkeypatch: pytest.MonkeyPatch):
    pauses: list[float] = []
    monkeypatch.setattr(canary_module.time, "sleep", pauses.append)
    held = FakeApi(held=True)
    assert run_against(held).passed
    reads = [r for r in held.sent if r.url.path == f"/v1/jobs/{JOB_ID}"]
    assert len(reads) == 2
    assert all(r.headers["prefer"].startswith("wait=") for r in reads)
    assert pauses == []
    assert run_against(FakeApi(held=False)).passed
    assert pauses == [canary_module.POLL_S]  # one read answered at once, not completed yet


def test_a_job_no_worker_claims_fails_the_run_saying_so():
    run = run_against(FakeApi(claim=False), timeout_s=0.3)
    assert not run.passed
    assert run.failed_check == "timeout"
    assert "(state queued): no worker claimed it" in report(run)


def test_a_job_never_projected_fails_the_run_naming_the_projector():
    run = run_against(FakeApi(projected=False), timeout_s=0.3)
    assert run.failed_check == "timeout"
    assert "not completed within 0.3 s (state not projected): is the projector running?" in report(run)


def test_a_failed_job_fails_the_run_with_its_error():
    run = run_against(FakeApi(ends="failed"))
    assert run.failed_check == "job"
    assert "failed: the job failed: engine_error: the engine broke" in report(run)


def test_a_refused_submission_fails_the_run_with_the_apis_detail():
    api = FakeApi(answers={"POST /v1/jobs": [error(422, "speed must be at most 4.0")]})
    run = run_against(api, voice="af_heart")
    assert run.failed_check == "submission"
    assert "failed: the submission was refused: 422 speed must be at most 4.0" in report(run)
    assert "submitted" in run.phases
    assert run.job_id is None
    assert [r.url.path for r in api.sent] == ["/v1/jobs"]  # a voice given: no GET /v1/voices


def test_a_blip_the_client_rides_out_is_no_failure():
    """A 503 (and no answer) on the submission: sent again, the same body, key and trace, and the run passes."""
    api = FakeApi(answers={"POST /v1/jobs": [error(503, "Kafka did not take the job")]})
    run = run_against(api)
    assert run.passed, run.failures
    posts = [r for r in api.sent if r.method == "POST"]
    assert len(posts) == 2
    assert len({(r.content, r.headers["idempotency-key"], r.headers["traceparent"]) for r in posts}) == 1


def test_a_download_refused_fails_the_run():
    api = FakeApi(answers={f"GET /v1/jobs/{JOB_ID}/audio": [error(410, "its audio expired")]})
    run = run_against(api)
    assert run.failed_check == "download"
    assert "failed: the audio could not be downloaded: 410 its audio expired" in report(run)
    assert "downloaded" in run.phases


def test_audio_that_is_not_a_wav_fails_the_run():
    run = run_against(FakeApi(audio=b"not audio at all"))
    assert run.failed_check == "download"
    assert "the audio is not a readable WAV" in report(run)


def test_audio_that_is_not_speech_fails_the_run():
    run = run_against(FakeApi(audio=wav(np.zeros(RATE * 4, dtype=np.float32))))
    assert run.failed_check == "energy"
    assert "failed: energy" in report(run)


def test_no_voice_announced_fails_the_run():
    api = FakeApi(answers={"GET /v1/voices": [httpx.Response(200, json=voices_body())]})
    run = run_against(api)
    assert run.failed_check == "voice"
    assert "no worker announced a voice" in report(run)


def test_an_api_that_is_not_there_fails_the_run_saying_it_did_not_answer():
    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    with Client("http://api", transport=httpx.MockTransport(refused), retry=FAST) as client:
        run = Canary(client, timeout_s=5, listen=False).run()
    assert run.failed_check == "api"
    printed = report(run)
    assert printed.startswith(f"voxlog check FAILED: job -, trace {run.trace_id}")
    assert "failed: the API did not answer: the voices: no answer (ConnectError: [Errno 111] Connection refused)" in (
        printed
    )


def test_an_answer_that_is_not_the_apis_view_fails_the_run():
    """The client reads answers typed: a 202 without JobAccepted's fields fails the run, as the API's fault."""
    api = FakeApi(answers={"POST /v1/jobs": [httpx.Response(202, json={"job_id": str(JOB_ID)})]})
    run = run_against(api)
    assert run.failed_check == "api"
    assert "failed: an answer of the API is not what the client reads" in report(run)


def test_the_metrics_say_whether_the_last_run_passed_and_what_failed():
    registry = CollectorRegistry()
    metrics = CanaryMetrics(registry)
    metrics.observe(run_against(FakeApi()), 100.0)
    metrics.observe(run_against(FakeApi(claim=False), timeout_s=0.3), 200.0)
    text = generate_latest(registry).decode()
    assert "voxlog_canary_up 0.0" in text
    assert 'voxlog_canary_runs_total{result="passed"} 1.0' in text
    assert 'voxlog_canary_failures_total{check="timeout"} 1.0' in text
    assert "voxlog_canary_last_success_timestamp_seconds 100.0" in text
    assert "voxlog_canary_last_run_timestamp_seconds 200.0" in text
    assert 'voxlog_canary_phase_seconds{phase="claimed"} NaN' in text  # the failed run never got there


def check_args(**given: Any) -> argparse.Namespace:
    values = {"api": "http://api", "voice": None, "timeout": 5.0, "every": None, "metrics_host": "127.0.0.1",
              "metrics_port": 9464, "no_asr": True, **given}  # fmt: skip
    return argparse.Namespace(**values)


@pytest.mark.parametrize(("api", "code", "first"), [(FakeApi(), 0, "voxlog check passed"),
                                                    (FakeApi(ends="failed"), 1, "voxlog check FAILED")])  # fmt: skip
def test_voxlog_check_prints_the_run_and_exits_0_when_it_passed_else_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], api: FakeApi, code: int, first: str
):
    """Through voxlog.client's Client: the API given, the key of VOXLOG_API_KEY, the retries bounded by the run."""
    built: list[dict[str, Any]] = []

    def client(base_url: str, **options: Any) -> Client:
        built.append({"base_url": base_url, **options})
        return Client(base_url, **options, transport=httpx.MockTransport(api))

    monkeypatch.setenv("VOXLOG_API_KEY", "vxl_k1_secret")
    monkeypatch.setattr(check_cli, "Client", client)
    assert check_cli.run(check_args()) == code
    printed = capsys.readouterr().out
    assert printed.startswith(first)
    assert [b["base_url"] for b in built] == ["http://api"]
    assert built[0]["retry"] == retry_policy(5.0)
    assert {r.headers["authorization"] for r in api.sent} == {"Bearer vxl_k1_secret"}


def test_the_check_retries_within_a_quarter_of_the_run_at_most_10_s():
    assert retry_policy(60.0).budget_s == 10.0
    assert retry_policy(2.0).budget_s == 0.5
