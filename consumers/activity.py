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
    def __init__(self) -> None:
        self.current: CurrentAttempt | None = None
        self.chars_per_s: float | None = None
        self.busy_s = 0.0

    def begin(self, job_id: uuid.UUID, fingerprint: str, attempt: int, text_chars: int) -> None:
        self.current = CurrentAttempt(job_id, fingerprint, attempt, text_chars)
        self._progressed()

    def planned(self, segments: int) -> None:
        if self.current is not None:
            self.current.segments_total = segments

    def rendered(self, engine_s: float) -> None:
        """One segment done, after ``engine_s`` seconds in the engine."""
        self.busy_s += engine_s
        if self.current is not None:
            self.current.segments_done += 1
            self.current.engine_s += engine_s
            self._progressed()

    def reused(self, chars: int) -> None:
        """One segment done from the segment cache: progress, but no engine time, and its text leaves the
        job's measured speed (which would otherwise look as fast as the reuse)."""
        if self.current is not None:
            self.current.segments_done += 1
            self.current.text_chars = max(0, self.current.text_chars - chars)
            self._progressed()

    def end(self, *, completed: bool) -> None:
        current, self.current = self.current, None
        if completed and current is not None and current.engine_s > 0 and current.text_chars > 0:
            speed = current.text_chars / current.engine_s
            self.chars_per_s = (
                speed if self.chars_per_s is None else (SPEED_WEIGHT * speed + (1 - SPEED_WEIGHT) * self.chars_per_s)
            )

    def expected_s(self, text_chars: int, floor_s: float) -> float:
        """How long a text of ``text_chars`` should take on this node."""
        return expected_seconds(text_chars, self.chars_per_s, floor_s)

    def surely_within(self, text_chars: int, seconds: float) -> bool:
        """Whether this node has measured a speed at which ``text_chars`` take less than ``seconds``."""
        return self.chars_per_s is not None and text_chars < seconds * self.chars_per_s

    def overdue_by(self, factor: float, floor_s: float) -> float:
        """Seconds the current attempt is past its allowance without progress (0 when it is not)."""
        current = self.current
        if current is None:
            return 0.0
        allowance = factor * self.expected_s(current.text_chars, floor_s)
        return max(0.0, time.monotonic() - current.progress_mono - allowance)

    def _progressed(self) -> None:
        if self.current is not None:
            self.current.progress_at = utc_now()
            self.current.progress_mono = time.monotonic()
