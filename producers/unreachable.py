"""What the API says when PostgreSQL or Kafka cannot be reached: the dependency's name, never the driver's words.

A driver's error names hosts, ports, users and paths of the deployment
(``connect to 10.4.2.17:5432 failed``, a broker's advertised name); an answer
to a client (a 503, ``/readyz``, which needs no key) says only which dependency
is unreachable. The error itself goes to the API's log: the first of each
dependency at once, then at most one line per ``interval_s`` with how many
answers it explains (an outage answers every request, and a line per answer
would bury the log).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Final, Literal

import structlog

log = structlog.get_logger("voxlog.api")

Dependency = Literal["postgres", "kafka"]
DATABASE_UNREACHABLE: Final = "database unreachable"
KAFKA_UNREACHABLE: Final = "kafka unreachable"
UNREACHABLE: Final[dict[Dependency, str]] = {"postgres": DATABASE_UNREACHABLE, "kafka": KAFKA_UNREACHABLE}


class UnreachableLog:
    """The driver errors behind the API's answers, logged with their details, a line per interval per
    dependency."""

    def __init__(
        self,
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        say: Callable[..., Any] | None = None,
    ) -> None:
        self._interval_s = interval_s
        self._clock = clock
        self._say = say
        self._said_at: dict[Dependency, float] = {}
        self._answers: Counter[Dependency] = Counter()

    def unreachable(self, dependency: Dependency, exc: BaseException, **context: Any) -> str:
        """Note that ``exc`` made an answer say ``dependency`` is unreachable; what the answer says."""
        self._answers[dependency] += 1
        now = self._clock()
        said_at = self._said_at.get(dependency)
        if said_at is None or now - said_at >= self._interval_s:
            self._said_at[dependency] = now
            answers, self._answers[dependency] = self._answers[dependency], 0
            say = self._say or log.warning
            say(
                "answered that a dependency is unreachable",
                dependency=dependency,
                error=f"{type(exc).__name__}: {exc}",
                answers=answers,
                **context,
            )
        return UNREACHABLE[dependency]


UNREACHABLE_LOG: Final = UnreachableLog()
"""The API process's."""


def unreachable(dependency: Dependency, exc: BaseException, **context: Any) -> str:
    """Log ``exc`` (see :class:`UnreachableLog`); the generic words an answer says instead."""
    return UNREACHABLE_LOG.unreachable(dependency, exc, **context)
