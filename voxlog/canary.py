"""`voxlog check`: a synthetic canary that uses the service as a client does, end to end.

One run submits a short known text, a fresh variant each time (its fingerprint is new, so no cache
answers it and a worker must synthesize it), waits for the job, downloads its audio and judges it
as speech of its text (:mod:`voxlog.canary_audio`). Its phases are milestones after the submission
was sent: ``submitted`` (the API answered), ``claimed``, ``first segment`` and ``completed`` (the log's
events, by their ``occurred_at``: the server's clock, so a skewed one shows), ``visible`` (the first
read of the job that showed it completed: how long the projection took to say so; the API holds each
read until the job changes, and one that does not is read every 0.1 s) and ``downloaded``. Every
request goes through :mod:`voxlog.client`. The run is its own trace (each request sends its
``traceparent``), printed so that the spans of a failing run can be looked up.
"""

from __future__ import annotations

import io
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, TypeVar

import numpy as np
import soundfile as sf
from pydantic import ValidationError

from contracts import JobState, new_trace
from producers.views import JobView
from voxlog.canary_audio import Verdict, judge
from voxlog.client import ApiError, Client
from voxlog.client import operations as ops

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


T = TypeVar("T")


class Canary:
    """Runs through ``client`` (:class:`voxlog.client.Client`): its retry protocol rides out a blip (no answer,
    503, 502, 504, 429) within the client's :class:`~voxlog.client.RetryPolicy`; what it does not is a failure."""

    def __init__(
        self, client: Client, *, voice: str | None = None, timeout_s: float = 60.0, listen: bool = True
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
        except ApiError as exc:
            if exc.status is None:
                return run.fail("api", f"the API did not answer: {exc}")
            return run.fail("api", f"the API refused {exc}")
        except ValidationError as exc:
            return run.fail("api", f"an answer of the API is not what the client reads: {exc}")

    def _send(self, call: ops.Call[T], traced: Mapping[str, str]) -> T:
        """One operation of the client, carrying the run's ``traceparent``."""
        result: T = self._client.run(ops.with_headers(call, traced))
        return result

    def _run(self, run: CanaryRun, traced: Mapping[str, str]) -> CanaryRun:
        voice = self._voice or self._first_voice(traced)
        if voice is None:
            return run.fail("voice", "no worker announced a voice (GET /v1/voices): is a worker running?")
        started, sent_at = time.monotonic(), datetime.now(UTC)
        submit = ops.submit_job(run.text, voice, None, {})
        accepted = self._phase(run, traced, started, submit, "submitted", "submission", "the submission was refused")
        if accepted is None:
            return run
        run.job_id = str(accepted.job_id)
        job = self._wait(run, traced, started)
        if job is None:
            return run
        self._log_phases(run, traced, job, sent_at)
        fetch = ops.fetch(ops.audio_url(job.job_id), f"audio of job {job.job_id}")
        audio = self._phase(run, traced, started, fetch, "downloaded", "download", "the audio could not be downloaded")
        if audio is None:
            return run
        try:
            samples, rate = sf.read(io.BytesIO(audio), dtype="float32", always_2d=False)
        except (sf.LibsndfileError, RuntimeError) as exc:
            return run.fail("download", f"the audio is not a readable WAV: {exc}")
        mono = np.asarray(samples if samples.ndim == 1 else samples.mean(axis=1), dtype=np.float32)
        run.verdict = judge(mono, int(rate), run.text, listen=self._listen)
        for failure in run.verdict.failures:
            run.fail(failure.split(":", 1)[0], failure)
        return run

    def _phase(
        self,
        run: CanaryRun,
        traced: Mapping[str, str],
        started: float,
        call: ops.Call[T],
        phase: str,
        check: str,
        refused: str,
    ) -> T | None:
        """``call``, its end timed as ``phase``; an answer of the API that refuses it fails ``check`` (None)."""
        try:
            result = self._send(call, traced)
        except ApiError as exc:
            if exc.status is None:
                raise
            run.phases[phase] = time.monotonic() - started
            run.fail(check, f"{refused}: {exc.status} {exc.detail[:300]}")
            return None
        run.phases[phase] = time.monotonic() - started
        return result

    def _first_voice(self, traced: Mapping[str, str]) -> str | None:
        engines = self._send(ops.voices(), traced).get("engines", [])
        return next((str(engine["voices"][0]) for engine in engines if engine.get("voices")), None)

    def _wait(self, run: CanaryRun, traced: Mapping[str, str], started: float) -> JobView | None:
        """The job once it is shown completed (``visible`` then), or ``None`` with what failed. Each read is one
        the API holds until the job changes (``Prefer: wait``); an API that answers at once is read every
        :data:`POLL_S`, as is a job not shown yet (404: not projected) or a read answered with another error."""
        deadline, job = started + self._timeout_s, None
        while (left := deadline - time.monotonic()) > 0:
            try:
                job, held = self._send(ops.job(str(run.job_id), min(ops.WAIT_S, left)), traced)
            except ApiError as exc:
                if exc.status is None:
                    raise
                held = False
            else:
                if job.state is JobState.COMPLETED:
                    run.phases["visible"] = time.monotonic() - started
                    return job
                if job.state in (JobState.FAILED, JobState.CANCELLED):
                    code, message = (job.error.code, job.error.message) if job.error else (None, None)
                    run.fail("job", f"the job {job.state.value}: {code}: {message}")
                    return None
            if not held:
                time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))
        state = job.state.value if job is not None else "not projected"
        hint = {"queued": ": no worker claimed it; is one running?", "not projected": ": is the projector running?"}
        run.fail("timeout", f"not completed within {self._timeout_s:g} s (state {state}){hint.get(state, '')}")
        return None

    def _log_phases(self, run: CanaryRun, traced: Mapping[str, str], job: JobView, sent_at: datetime) -> None:
        """Claimed, first segment and completed, from the job's events (else its projected timings)."""
        moments: dict[str, datetime | None] = {
            "claimed": job.timings.claimed_at,
            "first segment": None,  # the log's alone
            "completed": job.timings.completed_at,
        }
        try:
            history = self._send(ops.events(job.job_id), traced)
        except ApiError as exc:
            if exc.status is None:
                raise
            history = None  # the log could not be read (503) or holds no event of it: the projection's timings
        for event in history.events if history is not None else ():
            if event.type == "JobClaimed":
                moments["claimed"] = event.occurred_at
            elif event.type == "SegmentProduced" and moments["first segment"] is None:
                moments["first segment"] = event.occurred_at
            elif event.type == "JobCompleted":
                moments["completed"] = event.occurred_at
                if moments["first segment"] is None:  # a one-segment job's segment rides in its completion
                    moments["first segment"] = event.occurred_at
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
