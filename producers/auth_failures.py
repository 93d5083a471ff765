"""Failed authentications, counted per subject over a sliding window, in a map of bounded size.

A subject is ``(client address, key id)`` for a presented key that parses (it
names a key id, whether or not that key exists), and ``(client address, None)``
for a credential that cannot be parsed. Past ``per_window`` failures within
``window_s`` a subject's next failure is refused (its Retry-After is when the
oldest of those it holds leaves the window); every failure is counted, refused
or not, so a client that keeps failing stays refused.

The map is bounded: a subject holds at most ``per_window`` times, a subject
whose last failure left the window is dropped, and past ``max_entries`` the
subject that failed least recently is forgotten (its count starts again). The
map is kept in the order of each subject's last failure, so both prunings take
from its front.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import TypeAlias

Subject: TypeAlias = tuple[str, str | None]
"""(client address, key id), or (client address, None) for a credential that cannot be parsed."""


class FailureLimit:
    def __init__(
        self,
        per_window: int,
        *,
        window_s: float = 60.0,
        max_entries: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._per_window = per_window
        self._window_s = window_s
        self._max_entries = max_entries
        self._clock = clock
        self._failures: OrderedDict[Subject, deque[float]] = OrderedDict()  # least recently failing first

    def __len__(self) -> int:
        return len(self._failures)

    def over(self, subject: Subject) -> bool:
        """Whether ``subject``'s next failure would be refused."""
        failures = self._failures.get(subject)
        if failures is None:
            return False
        self._leave_window(failures, self._clock())
        if not failures:
            del self._failures[subject]
            return False
        return len(failures) >= self._per_window

    def failed(self, subject: Subject) -> int | None:
        """Count a failure of ``subject``: ``None`` while within the limit, else the seconds to wait."""
        now = self._clock()
        self._prune(now)
        failures = self._failures.pop(subject, None)
        if failures is None:
            failures = deque(maxlen=self._per_window)
        self._leave_window(failures, now)
        refused = len(failures) >= self._per_window
        failures.append(now)
        self._failures[subject] = failures  # at the end: the most recent failure
        while len(self._failures) > self._max_entries:
            self._failures.popitem(last=False)
        if not refused:
            return None
        return max(1, math.ceil(self._window_s - (now - failures[0])))

    def _leave_window(self, failures: deque[float], now: float) -> None:
        while failures and now - failures[0] >= self._window_s:
            failures.popleft()

    def _prune(self, now: float) -> None:
        """Drop the subjects whose last failure left the window (they are at the front)."""
        while self._failures:
            subject, failures = next(iter(self._failures.items()))
            if failures and now - failures[-1] < self._window_s:
                return
            del self._failures[subject]
