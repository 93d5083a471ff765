"""The canary (voxlog check): its speech judgement, a run against a fake API, what it prints and exports."""

from __future__ import annotations

import io
import json
import random
from typing import Any

import httpx
import numpy as np
import pytest
import soundfile as sf
from prometheus_client import CollectorRegistry, generate_latest

from voxlog.canary import PHASES, Canary, canary_text, report
from voxlog.canary_audio import expected_duration_s, judge
from voxlog.check_cli import CanaryMetrics

pytestmark = pytest.mark.unit

RATE = 24000
TEXT = "Canary check 4821: the amber and the willow are fine today."


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
    """The routes the canary uses; the job is claimed, produced and completed by its second read."""

    def __init__(self, *, claim: bool = True, audio: bytes | None = None) -> None:
        self.claim, self.audio, self.reads, self.sent = claim, audio, 0, []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        path = request.url.path
        if path == "/v1/voices":
            return httpx.Response(200, json={"engines": [{"voices": ["af_heart"]}]})
        if path == "/v1/jobs" and request.method == "POST":
            self.text = json.loads(request.content)["text"]
            return httpx.Response(202, json={"job_id": "j1"})
        if path == "/v1/jobs/j1":
            self.reads += 1
            done = self.claim and self.reads >= 2
            timings = {"claimed_at": "2030-01-01T00:00:00.1Z" if done else None, "completed_at": None}
            return httpx.Response(200, json={"state": "completed" if done else "queued", "timings": timings})
        if path == "/v1/jobs/j1/events":
            events: list[dict[str, Any]] = [
                {"type": t, "occurred_at": f"2030-01-01T00:00:00.{ms}Z"}
                for t, ms in (("JobQueued", 0), ("JobClaimed", 1), ("SegmentProduced", 2), ("JobCompleted", 3))
            ]
            return httpx.Response(200, json={"events": events})
        if path == "/v1/jobs/j1/audio":
            return httpx.Response(200, content=self.audio or wav(speechlike(expected_duration_s(self.text))))
        return httpx.Response(404)


def test_a_run_that_passes_reports_every_phase_and_sends_its_trace():
    api = FakeApi()
    with httpx.Client(base_url="http://api", transport=httpx.MockTransport(api)) as client:
        run = Canary(client, timeout_s=5, listen=False).run()
    assert run.passed, run.failures
    assert set(run.phases) == set(PHASES)
    assert {r.headers["traceparent"].split("-")[1] for r in api.sent} == {run.trace_id}  # one trace, every request
    printed = report(run)
    assert printed.startswith(f"voxlog check passed: job j1, trace {run.trace_id}")
    assert all(f"  {phase} " in printed for phase in PHASES)


def test_a_job_no_worker_claims_fails_the_run_saying_so():
    api = FakeApi(claim=False)
    with httpx.Client(base_url="http://api", transport=httpx.MockTransport(api)) as client:
        run = Canary(client, timeout_s=0.3, listen=False).run()
    assert not run.passed
    assert run.failed_check == "timeout"
    assert "(state queued): no worker claimed it" in report(run)


def test_audio_that_is_not_speech_fails_the_run():
    api = FakeApi(audio=wav(np.zeros(RATE * 4, dtype=np.float32)))
    with httpx.Client(base_url="http://api", transport=httpx.MockTransport(api)) as client:
        run = Canary(client, timeout_s=5, listen=False).run()
    assert run.failed_check == "energy"
    assert "failed: energy" in report(run)


def test_the_metrics_say_whether_the_last_run_passed_and_what_failed():
    registry = CollectorRegistry()
    metrics = CanaryMetrics(registry)
    with httpx.Client(base_url="http://api", transport=httpx.MockTransport(FakeApi())) as client:
        metrics.observe(Canary(client, timeout_s=5, listen=False).run(), 100.0)
    with httpx.Client(base_url="http://api", transport=httpx.MockTransport(FakeApi(claim=False))) as client:
        metrics.observe(Canary(client, timeout_s=0.3, listen=False).run(), 200.0)
    text = generate_latest(registry).decode()
    assert "voxlog_canary_up 0.0" in text
    assert 'voxlog_canary_runs_total{result="passed"} 1.0' in text
    assert 'voxlog_canary_failures_total{check="timeout"} 1.0' in text
    assert "voxlog_canary_last_success_timestamp_seconds 100.0" in text
    assert "voxlog_canary_last_run_timestamp_seconds 200.0" in text
    assert 'voxlog_canary_phase_seconds{phase="claimed"} NaN' in text  # the failed run never got there
