"""structlog setup: JSON lines on stderr, or console rendering on a terminal.

The client libraries' own complaints are held back when they repeat (:class:`RepeatsHeldBack`): aiokafka
retries every 100 ms while a broker is away, with a line each time (an orphaned worker logged 61,000 lines
in 15 minutes); the first of each passes, the repeats are counted and summarized once per interval.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Final

import structlog

_LIBRARIES: Final = ("aiokafka", "kafka", "httpx", "httpcore")
_summaries = structlog.get_logger("voxlog.logging")

SUMMARY_S: Final = 60.0
"""A process's interval between the summaries of what it held back (a library's repeated messages, an outage's
tries): an outage of an hour is 60 lines, and a summary is never more than a minute late."""


class RepeatsHeldBack(logging.Filter):
    """Lets a library's message through the first time, then holds back its repeats: one summary line per
    ``window_s`` says how many of each were held. A message quiet for a whole window passes again when it
    comes back (a new outage is news)."""

    def __init__(
        self,
        window_s: float = SUMMARY_S,
        clock: Callable[[], float] = time.monotonic,
        say: Callable[..., Any] | None = None,
    ) -> None:
        super().__init__()
        self.window_s = window_s
        self._clock = clock
        self._say = say  # None: this module's logger, looked up when used (after structlog is configured)
        self._last_seen: dict[str, float] = {}
        self._held: Counter[str] = Counter()
        self._summarized_at = clock()

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(_LIBRARIES):
            return True
        now = self._clock()
        key = f"{record.name}: {record.msg}"  # the message's format, not its arguments: one key per kind
        last, self._last_seen[key] = self._last_seen.get(key), now
        held = last is not None and now - last < self.window_s
        if held:
            self._held[key] += 1
        if self._held and now - self._summarized_at >= self.window_s:
            self._summarize(now)
        return not held

    def _summarize(self, now: float) -> None:
        held, self._held = dict(self._held.most_common()), Counter()
        window_s, self._summarized_at = round(now - self._summarized_at, 1), now
        say = self._say or _summaries.warning
        say("repeated library messages held back", repeats=sum(held.values()), window_s=window_s, held=held)


_held_back = RepeatsHeldBack()


def hold_back_repeats_for(seconds: float) -> None:
    """The interval over which repeated library messages are held back and summarized (:data:`SUMMARY_S`)."""
    _held_back.window_s = seconds


def configure_logging(level: str = "INFO", *, json: bool | None = None) -> None:
    """Route stdlib and structlog records through one renderer."""
    use_json = (not sys.stderr.isatty()) if json is None else json
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if use_json else structlog.dev.ConsoleRenderer(colors=False)
    )
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    handler.addFilter(_held_back)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in _LIBRARIES:
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
