"""What this worker is doing: read by its heartbeats (for the sweeper) and by its own watchdog.

The expectation of a job's synthesis time comes from its text length and
this node's measured speed (characters per second of engine time, a moving
average over the attempts it completed); before the first measurement, or
for a tiny text, a floor stands in. An attempt is *overdue* when it made no
progress (its claim, or a segment) for longer than that expectation times a
factor.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import datetime

from contracts import utc_now

SPEED_WEIGHT = 0.3  # how much the latest attempt moves the average speed


@dataclass
class CurrentAttempt:
    job_id: uuid.UUID
    fingerprint: str
    attempt: int
    text_chars: int
    segments_done: int = 0
    segments_total: int | None = None
    progress_at: datetime | None = None
    progress_mono: float = 0.0
    engine_s: float = 0.0


def expected_seconds(text_chars: int, chars_per_s: float | None, floor_s: float) -> float:
    """How long a text of ``text_chars`` should take on a node measured at ``chars_per_s`` (unknown: the
    floor), and never less than ``floor_s``: what the watchdog and the sweeper allow an attempt, times their
    factor."""
    return floor_s if not chars_per_s else max(floor_s, text_chars / chars_per_s)


class Activity:
    """The attempts this worker holds, each with its progress, and the node's measured speed.

    A worker holds several claims and its engine makes one segment at a time
    (:mod:`consumers.engine_turns`): a claim waiting for its turn advances when the engine does, so its
    progress is the later of its own and the worker's last on any claim."""

    def __init__(self) -> None:
        self.claims: dict[uuid.UUID, CurrentAttempt] = {}
        self.chars_per_s: float | None = None
        self.busy_s = 0.0
        self.running: uuid.UUID | None = None  # whose segment is on the engine (set by the engine's turns)
        self._last_progress_mono = 0.0
        self._last_progress_at: datetime | None = None

    @property
    def current(self) -> CurrentAttempt | None:
        """The attempt on the engine now, else the one most recently advanced (``None`` when idle)."""
        if self.running is not None and self.running in self.claims:
            return self.claims[self.running]
        return max(self.claims.values(), key=lambda c: c.progress_mono, default=None)

    def begin(self, job_id: uuid.UUID, fingerprint: str, attempt: int, text_chars: int) -> None:
        self.claims[job_id] = CurrentAttempt(job_id, fingerprint, attempt, text_chars)
        self._progressed(job_id)

    def planned(self, job_id: uuid.UUID, segments: int) -> None:
        if (claim := self.claims.get(job_id)) is not None:
            claim.segments_total = segments

    def rendered(self, job_id: uuid.UUID, engine_s: float) -> None:
        """One segment of ``job_id`` done, after ``engine_s`` seconds in the engine."""
        self.busy_s += engine_s
        if (claim := self.claims.get(job_id)) is not None:
            claim.segments_done += 1
            claim.engine_s += engine_s
            self._progressed(job_id)

    def reused(self, job_id: uuid.UUID, chars: int) -> None:
        """One segment done from the segment cache: progress, but no engine time, and its text leaves the
        job's measured speed (which would otherwise look as fast as the reuse)."""
        if (claim := self.claims.get(job_id)) is not None:
            claim.segments_done += 1
            claim.text_chars = max(0, claim.text_chars - chars)
            self._progressed(job_id)

    def end(self, job_id: uuid.UUID, *, completed: bool) -> None:
        claim = self.claims.pop(job_id, None)
        if completed and claim is not None and claim.engine_s > 0 and claim.text_chars > 0:
            speed = claim.text_chars / claim.engine_s
            self.chars_per_s = (
                speed if self.chars_per_s is None else (SPEED_WEIGHT * speed + (1 - SPEED_WEIGHT) * self.chars_per_s)
            )

    def expected_s(self, text_chars: int, floor_s: float) -> float:
        """How long a text of ``text_chars`` should take on this node."""
        return expected_seconds(text_chars, self.chars_per_s, floor_s)

    def surely_within(self, text_chars: int, seconds: float) -> bool:
        """Whether this node has measured a speed at which ``text_chars`` take less than ``seconds``."""
        return self.chars_per_s is not None and text_chars < seconds * self.chars_per_s

    def progress_of(self, claim: CurrentAttempt) -> tuple[datetime | None, float]:
        """When ``claim`` last advanced: its own progress, or the worker's on any claim if that is later."""
        if self._last_progress_mono > claim.progress_mono:
            return self._last_progress_at, self._last_progress_mono
        return claim.progress_at, claim.progress_mono

    def overdue_by(self, job_id: uuid.UUID, factor: float, floor_s: float) -> float:
        """Seconds ``job_id``'s attempt is past its allowance without progress (0 when it is not)."""
        claim = self.claims.get(job_id)
        if claim is None:
            return 0.0
        allowance = factor * self.expected_s(claim.text_chars, floor_s)
        return max(0.0, time.monotonic() - self.progress_of(claim)[1] - allowance)

    def _progressed(self, job_id: uuid.UUID) -> None:
        claim = self.claims[job_id]
        claim.progress_at = self._last_progress_at = utc_now()
        claim.progress_mono = self._last_progress_mono = time.monotonic()
