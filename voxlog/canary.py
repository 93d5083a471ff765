"""`voxlog check`: a synthetic canary that uses the service as a client does, end to end.

One run submits a short known text, a fresh variant each time (its fingerprint is new, so no cache
answers it and a worker must synthesize it), waits for the job, downloads its audio and judges it
as speech of its text (:mod:`voxlog.canary_audio`). Its phases are milestones after the submission
was sent: ``submitted`` (the API answered), ``claimed``, ``first segment`` and ``completed`` (the log's
events, by their ``occurred_at``: the server's clock, so a skewed one shows), ``visible`` (the first
read of the job that showed it completed: how long the projection took to say so, to the poll's
0.1 s) and ``downloaded``. The run is its own trace (it sends a ``traceparent``), printed so that the
spans of a failing run can be looked up.
"""

from __future__ import annotations

import io
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import httpx
import numpy as np
import soundfile as sf

from contracts import new_trace
from voxlog.canary_audio import Verdict, judge

PHASES: Final = ("submitted", "claimed", "first segment", "completed", "visible", "downloaded")
POLL_S: Final = 0.1
_WORDS: Final = (
    "amber", "breeze", "cedar", "dawn", "ember", "falcon", "garden", "harbor", "island", "jasmine",
    "lantern", "meadow", "orchard", "pebble", "quiet", "river", "silver", "timber", "velvet", "willow",
)  # fmt: skip


def canary_text(rng: random.Random | None = None) -> str:
    """A short sentence never asked for before (with overwhelming odds): two words and a number drawn anew."""
    rng = rng or random.SystemRandom()
    first, second = rng.sample(_WORDS, 2)
    return f"Canary check {rng.randrange(1000, 10000)}: the {first} and the {second} are fine today."


@dataclass
class CanaryRun:
    """One run: what it asked, when each phase was reached (seconds after the submission was sent), what failed."""

    text: str
    trace_id: str
    job_id: str | None = None
    phases: dict[str, float] = field(default_factory=dict)
    verdict: Verdict | None = None
    failures: list[str] = field(default_factory=list)
    failed_check: str | None = None  # the first failure's kind, as the metrics count it

    @property
    def passed(self) -> bool:
        return not self.failures

    def fail(self, check: str, message: str) -> CanaryRun:
        self.failed_check = self.failed_check or check
        self.failures.append(message)
        return self


def _server_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


class Canary:
    def __init__(
        self, client: httpx.Client, *, voice: str | None = None, timeout_s: float = 60.0, listen: bool = True
    ) -> None:
        self._client = client
        self._voice = voice
        self._timeout_s = timeout_s
        self._listen = listen
        self._text: Callable[[], str] = canary_text

    def run(self) -> CanaryRun:
        trace = new_trace()
        run = CanaryRun(self._text(), trace.trace_id)
        try:
            return self._run(run, {"traceparent": trace.traceparent})
        except httpx.HTTPError as exc:
            return run.fail("api", f"the API did not answer: {exc}")

    def _run(self, run: CanaryRun, headers: dict[str, str]) -> CanaryRun:
        voice = self._voice or self._first_voice(headers)
        if voice is None:
            return run.fail("voice", "no worker announced a voice (GET /v1/voices): is a worker running?")
        started, sent_at = time.monotonic(), datetime.now(UTC)
        answer = self._client.post("/v1/jobs", json={"text": run.text, "voice": voice}, headers=headers)
        run.phases["submitted"] = time.monotonic() - started
        if answer.status_code != 202:
            return run.fail("submission", f"the submission was refused: {answer.status_code} {answer.text[:300]}")
        run.job_id = str(answer.json()["job_id"])
        job = self._wait(run, headers, started)
        if job is None:
            return run
        self._log_phases(run, headers, job, sent_at)
        audio = self._client.get(f"/v1/jobs/{run.job_id}/audio", headers=headers)
        run.phases["downloaded"] = time.monotonic() - started
        if audio.status_code != 200:
            return run.fail("download", f"the audio could not be downloaded: {audio.status_code} {audio.text[:300]}")
        try:
            samples, rate = sf.read(io.BytesIO(audio.content), dtype="float32", always_2d=False)
        except (sf.LibsndfileError, RuntimeError) as exc:
            return run.fail("download", f"the audio is not a readable WAV: {exc}")
        mono = np.asarray(samples if samples.ndim == 1 else samples.mean(axis=1), dtype=np.float32)
        run.verdict = judge(mono, int(rate), run.text, listen=self._listen)
        for failure in run.verdict.failures:
            run.fail(failure.split(":", 1)[0], failure)
        return run

    def _first_voice(self, headers: dict[str, str]) -> str | None:
        engines = self._client.get("/v1/voices", headers=headers).json().get("engines", [])
        return next((str(engine["voices"][0]) for engine in engines if engine.get("voices")), None)

    def _wait(self, run: CanaryRun, headers: dict[str, str], started: float) -> dict[str, Any] | None:
        """The job once it is shown completed (``visible`` then), or ``None`` with what failed."""
        deadline, job = started + self._timeout_s, None
        while time.monotonic() < deadline:
            response = self._client.get(f"/v1/jobs/{run.job_id}", headers=headers)
            if response.status_code == 200:
                job = response.json()
                if job["state"] == "completed":
                    run.phases["visible"] = time.monotonic() - started
                    return dict(job)
                if job["state"] in ("failed", "cancelled"):
                    error = job.get("error") or {}
                    run.fail("job", f"the job {job['state']}: {error.get('code')}: {error.get('message')}")
                    return None
            time.sleep(POLL_S)
        state = job["state"] if job is not None else "not projected"
        hint = {"queued": ": no worker claimed it; is one running?", "not projected": ": is the projector running?"}
        run.fail("timeout", f"not completed within {self._timeout_s:g} s (state {state}){hint.get(state, '')}")
        return None

    def _log_phases(self, run: CanaryRun, headers: dict[str, str], job: dict[str, Any], sent_at: datetime) -> None:
        """Claimed, first segment and completed, from the job's events (else its projected timings)."""
        moments: dict[str, datetime | None] = {
            "claimed": _server_time(job["timings"].get("claimed_at")),
            "completed": _server_time(job["timings"].get("completed_at")),
        }
        events = self._client.get(f"/v1/jobs/{run.job_id}/events", headers=headers)
        if events.status_code == 200:
            for event in events.json().get("events", []):
                at = _server_time(event.get("occurred_at"))
                if event["type"] == "JobClaimed":
                    moments["claimed"] = at
                elif event["type"] == "SegmentProduced" and "first segment" not in moments:
                    moments["first segment"] = at
                elif event["type"] == "JobCompleted":
                    moments["completed"] = at
        for phase, at in moments.items():
            if at is not None:
                run.phases[phase] = (at - sent_at).total_seconds()


def report(run: CanaryRun) -> str:
    """What a run prints: its outcome, its ids, each phase reached, what the audio measured."""
    outcome = "passed" if run.passed else "FAILED"
    lines = [f"voxlog check {outcome}: job {run.job_id or '-'}, trace {run.trace_id}", f'  text           "{run.text}"']
    lines += [f"  {phase:<14} {run.phases[phase] * 1000:8.0f} ms" for phase in PHASES if phase in run.phases]
    if (verdict := run.verdict) is not None:
        words = "not checked (no asr extra)" if verdict.words_heard is None else f"{verdict.words_heard:.0%} heard"
        lines.append(
            f"  audio          {verdict.duration_s:.2f} s, {verdict.rms_dbfs:.1f} dBFS, loudness variation "
            f"{verdict.variation:.2f}, {verdict.clipped:.2%} clipped, words {words}"
        )
    lines += [f"  failed: {failure}" for failure in run.failures]
    return "\n".join(lines)
