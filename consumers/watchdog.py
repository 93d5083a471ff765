"""The worker's watchdog over the attempt in hand: when to give it back, and when its engine is hung.

Checked about once a second while an attempt runs:

- on shutdown, the attempt gets ``shutdown_grace_s``, then is given back at its
  next segment boundary;
- an attempt without progress (a claim, a segment) for longer than its allowance
  (this node's expected time for its text, times ``factor``; see
  :class:`consumers.worker_activity.Activity`) is given back at the next boundary, for a
  retry after a backoff;
- if no boundary comes within a second allowance, the engine is hung: the job
  must be given back at once, and the engine's thread cannot be stopped.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from consumers.attempts import Abort
from consumers.worker_activity import Activity


@dataclass(frozen=True)
class Hung:
    message: str


class Watchdog:
    def __init__(
        self, activity: Activity, job_id: uuid.UUID, factor: float, min_s: float, shutdown_grace_s: float
    ) -> None:
        self._activity = activity
        self._job_id = job_id
        self._factor = factor
        self._min_s = min_s
        self._grace_s = shutdown_grace_s
        self._shutdown_deadline: float | None = None

    def check(self, *, stopping: bool, aborting: bool) -> Abort | Hung | None:
        """What to do about the attempt now: ``aborting`` says a give-back is already asked for."""
        if stopping:
            self._shutdown_deadline = self._shutdown_deadline or time.monotonic() + self._grace_s
            if time.monotonic() >= self._shutdown_deadline and not aborting:
                return Abort("shutdown", "the worker is stopping")
        current = self._activity.claims.get(self._job_id)
        if current is None:
            return None
        overdue = self._activity.overdue_by(self._job_id, self._factor, self._min_s)
        allowance = self._factor * self._activity.expected_s(current.text_chars, self._min_s)
        stalled = overdue + allowance
        if overdue > allowance:
            return Hung(f"engine hung: no segment for {stalled:.0f}s")
        if overdue > 0 and not aborting:
            return Abort("transient", f"watchdog: no progress for {stalled:.0f}s (allowed {allowance:.0f}s)", True)
        return None
