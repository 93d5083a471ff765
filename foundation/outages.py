"""How a process lives through an outage of what it depends on: one backoff rule, and few words about it.

Every loop that retries against a broker or a database that is down waits :class:`Backoff`'s delays:
exponential from a first delay, doubling per failure up to a cap, with equal jitter (each delay uniform
in its upper half), so that a retry never comes at once and processes that lost the same dependency do
not come back in step. It says so through an :class:`Outage`: one line when the dependency goes, one
when it is back (how long, how many tries), and while it stays down a summary every
``summary_s`` (the tries since the last line, the last error), never a line per try. An orphaned
worker whose broker was gone retried every 100 ms and logged 61,000 lines (10 MB) in 15 minutes.

The summary interval is the process's (:data:`foundation.logging.SUMMARY_S`, a minute; a test sets another by
:func:`summarize_every`); the client libraries' own repeated complaints are held back on the same
interval (:mod:`foundation.logging`).
"""

from __future__ import annotations

import asyncio
import random
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import structlog

from foundation.lifecycle import Stopped, wait_for_stop
from foundation.logging import SUMMARY_S, hold_back_repeats_for

log = structlog.get_logger("voxlog.outages")
T = TypeVar("T")
_DOUBLINGS = 60  # past any cap; an outage of days counts thousands of failures, and 2.0 ** 1100 overflows


def backoff_delay(first_s: float, cap_s: float, failures: int) -> float:
    """The delay after ``failures`` failures in a row (1 for the first): uniform in [c/2, c], where
    c = min(cap, first * 2^(failures-1)). Half is kept so that a retry never comes at once; the other half
    is random so that those that failed together do not come back together. Job retries use it too."""
    ceiling = min(cap_s, first_s * 2.0 ** min(max(0, failures - 1), _DOUBLINGS))
    return random.uniform(ceiling / 2, ceiling)  # noqa: S311 - jitter, not crypto


@dataclass
class Backoff:
    """The delays between tries at something that is down (see :func:`backoff_delay`)."""

    first_s: float = 0.5
    cap_s: float = 10.0
    failures: int = field(default=0, init=False)

    def next_delay(self) -> float:
        self.failures += 1
        return backoff_delay(self.first_s, self.cap_s, self.failures)

    def reset(self) -> None:
        self.failures = 0


class Outage:
    """One dependency as one loop sees it: the backoff between its tries, and a line per change of state.

    ``failed`` after each failed try (it returns how long to wait before the next), ``recovered`` after
    each try that worked.
    """

    summary_s: ClassVar[float] = SUMMARY_S  # the process's, see summarize_every
    # Those down now, for the readiness probe (foundation.readiness); weak: an outage its loop dropped
    # (the process stopped waiting) is no longer one.
    _down: ClassVar[weakref.WeakSet[Outage]] = weakref.WeakSet()

    def __init__(
        self,
        what: str,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
        logger: Any = None,
    ) -> None:
        self.what = what
        self._backoff = backoff or Backoff()
        self._clock = clock
        self._log = logger or log
        self._since: float | None = None  # when it went down; None while up
        self._said_at = 0.0
        self._tries = 0  # failed tries since the last line
        self.failures = 0  # failed tries since it went down
        self.delay_s = 0.0  # the wait the last failure asked for (0 while up)
        self._retry_at = 0.0

    @property
    def down(self) -> bool:
        return self._since is not None

    @classmethod
    def down_now(cls) -> list[str]:
        """What this process waits for now: the dependencies of its outages not over, sorted."""
        return sorted({outage.what for outage in list(cls._down)})

    def failed(self, error: BaseException | str, **context: Any) -> float:
        """A try failed: say so if it is the first since the dependency was up, or if a summary is due; returns
        the delay before the next try."""
        now = self._clock()
        self.delay_s = self._backoff.next_delay()
        self._retry_at = now + self.delay_s
        self._tries += 1
        self.failures += 1
        reason = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        if self._since is None:
            self._since = self._said_at = now
            self._tries = 0
            Outage._down.add(self)
            self._log.warning(f"waiting for {self.what}", error=reason, retry_in_s=round(self.delay_s, 2), **context)
        elif now - self._said_at >= self.summary_s:
            self._log.warning(
                f"still waiting for {self.what}",
                down_for_s=round(now - self._since, 1),
                tries=self._tries,
                tries_in_all=self.failures,
                last_error=reason,
                retry_in_s=round(self.delay_s, 2),
                **context,
            )
            self._said_at, self._tries = now, 0
        return self.delay_s

    def recovered(self) -> None:
        """A try worked: if the dependency was down, say that it is back; the backoff starts over."""
        if self._since is not None:
            down_for_s = round(self._clock() - self._since, 1)
            self._log.info(f"{self.what} available again", down_for_s=down_for_s, tries=self.failures)
            Outage._down.discard(self)
        self._since, self._tries, self.failures, self.delay_s = None, 0, 0, 0.0
        self._backoff.reset()

    def holding_off(self) -> bool:
        """Whether a caller that tries on demand (not in a loop) should not try yet: down, and the last
        failure's delay not over."""
        return self._since is not None and self._clock() < self._retry_at

    def wait_s(self, interval_s: float) -> float:
        """How long a loop that runs every ``interval_s`` waits before its next round: longer while down."""
        return max(interval_s, self.delay_s)


def summarize_every(seconds: float) -> None:
    """This process's interval between the summaries of an outage that lasts, and over which a client
    library's repeated messages are held back (:data:`foundation.logging.SUMMARY_S` unless set)."""
    Outage.summary_s = seconds
    hold_back_repeats_for(seconds)


async def until_available(
    what: str,
    attempt: Callable[[], Awaitable[T]],
    stop: asyncio.Event,
    errors: tuple[type[BaseException], ...],
    outage: Outage | None = None,
) -> T:
    """``attempt()`` until it does not raise one of ``errors``; in between, back off (and say so, once).

    How a process starts, or carries on, while a dependency is down: it waits, says what it is
    waiting for, and resumes when it answers. Raises :class:`Stopped` if ``stop`` is set first.
    ``outage`` is the caller's when the wait is part of a longer outage it reports: the caller then says
    when it is over (this attempt answering may not be the end of it).
    """
    seen = outage or Outage(what)
    while True:
        try:
            result = await attempt()
        except errors as exc:
            if await wait_for_stop(stop, seen.failed(exc)):
                raise Stopped(f"stopped while waiting for {what}") from exc
        else:
            if outage is None:
                seen.recovered()
            return result
