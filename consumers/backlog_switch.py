"""Service modes switched by the backlog: the leading sweeper's half of backpressure.

The API refuses new syntheses with 429 once the work ahead passes
``VOXLOG_MAX_BACKLOG_S``; that is per submission, and a flood of clients that
retry still keeps every API instance busy reading and refusing. Past a
threshold of its own, each mode is switched on for the whole deployment by the
sweeper, recorded as a ``ServiceModeSet`` on the control topic (source
``backlog``) so that every API instance follows it, and switched off once the
backlog is under half that threshold (the gap keeps it from flapping around
one value):

- ``degraded`` past ``VOXLOG_DEGRADE_BACKLOG_S`` (0, the default: never; the
  operator opts in): new syntheses are made at the API's degraded settings, so
  the fleet drains faster instead of refusing;
- ``cache_only`` past ``VOXLOG_CACHE_ONLY_BACKLOG_S``: new syntheses are refused.

An operator's own switch (``voxlog admin cache-only``, ``voxlog admin
degraded``) is a separate record that this never touches.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Final

import structlog

from contracts import ModeSource, Producer, ServiceMode, ServiceModeSet, ServiceModeSetPayload, node_event
from projections.reads.backlog import Backlog

log = structlog.get_logger("voxlog.sweeper")

# After a switch, trust what was published over the projection for this long (it may lag the log).
PUBLISHED_FRESH_S: Final = 30.0


def mode_event(mode: ServiceMode, enabled: bool, source: ModeSource, reason: str, producer: Producer) -> ServiceModeSet:
    payload = ServiceModeSetPayload(mode=mode, enabled=enabled, source=source, reason=reason)
    return node_event(ServiceModeSet, producer, payload)


class BacklogSwitch:
    """The backlog's switch of one mode (``threshold_s`` 0: never switched)."""

    def __init__(
        self,
        mode: ServiceMode,
        threshold_s: float,
        read_backlog: Callable[[], Awaitable[Backlog]],
        read_state: Callable[[ServiceMode], Awaitable[bool]],
        publish: Callable[[ServiceModeSet], Awaitable[object]],
        producer: Producer,
    ) -> None:
        self.mode = mode
        self.threshold_s = threshold_s
        self._read_backlog = read_backlog
        self._read_state = read_state  # whether the projection shows the backlog's switch of a mode on
        self._publish = publish
        self._producer = producer
        self._published: tuple[bool, float] | None = None  # what this sweeper last switched, when (monotonic)

    async def check(self) -> bool | None:
        """Switch the mode if the backlog calls for it; returns the state switched to (None: no change)."""
        if not self.threshold_s:
            return None
        work_s = (await self._read_backlog()).work_s()
        if work_s is None:
            return None  # no worker has measured its speed yet: nothing to judge by
        if self._published is not None and time.monotonic() - self._published[1] < PUBLISHED_FRESH_S:
            on = self._published[0]
        else:
            on = await self._read_state(self.mode)
        if not on and work_s > self.threshold_s:
            reason = f"the backlog is {work_s:.0f} s of work, over {self.threshold_s:g} s"
        elif on and work_s < self.threshold_s / 2:
            reason = f"the backlog is {work_s:.0f} s of work, under {self.threshold_s / 2:g} s"
        else:
            return None
        await self._publish(mode_event(self.mode, not on, "backlog", reason, self._producer))
        self._published = (not on, time.monotonic())
        log.warning(f"{self.mode.replace('_', '-')} mode " + ("on" if not on else "off"), reason=reason)
        return not on
