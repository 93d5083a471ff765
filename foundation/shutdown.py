"""A process's stop, bounded: from the signal on it has ``VOXLOG_SHUTDOWN_TIMEOUT_S`` to exit, whatever is down.

Stopping waits for what needs the broker or the database: the acknowledgement of the events handed to
Kafka, an offset commit, a producer's flush (an idempotent producer retries a record for as long as the
broker is away). A worker sent SIGTERM while its broker was down had not exited 110 s later. Now each
step of the stop runs within the time left (:meth:`Shutdown.closing`), the process's work is cancelled
when the time is up (:meth:`Shutdown.run`), and whatever was still pending is abandoned and said: safe,
since the log still holds every job (an event not acknowledged is acted on again by whoever owns its
partition next, an offset not committed only means a longer tail for the next owner to read, a claim
left behind goes stale and the sweeper releases it). A thread the interpreter would wait for at exit (an
engine hung in its synthesis) cannot hold the process either: a timer a few seconds past the deadline
ends it (exit code :data:`EXIT_SHUTDOWN_OVERRAN`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import signal
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final, TypeVar

import structlog
import uvicorn

log = structlog.get_logger("voxlog.shutdown")
T = TypeVar("T")
EXIT_SHUTDOWN_OVERRAN: Final = 4
BACKSTOP_S: Final = 5.0  # past the deadline, what still holds the process (a thread) is cut off
LAST_CHANCE_S: Final = 0.5  # what a step left after the deadline may take (closing a pool that answers)


class Shutdown:
    """The stop of one process: its ``stop`` event, the deadline from the signal on, and what it may abandon."""

    def __init__(self, timeout_s: float, *, backstop_s: float | None = BACKSTOP_S, logger: Any = None) -> None:
        self.timeout_s = timeout_s
        self._backstop_s = backstop_s  # None: no timer (a test's process must outlive its stop)
        self._log = logger or log
        self.stop = asyncio.Event()
        self._pending: dict[str, Callable[[], str | None]] = {}
        self._deadline: float | None = None  # the event loop's clock
        self._main: asyncio.Future[Any] | None = None
        self.expired = False

    def holds(self, what: str, left: Callable[[], str | None]) -> None:
        """Name what the stop may have to abandon; ``left()`` says how much of it is left (``None``: nothing)."""
        self._pending[what] = left

    def on_signals(self) -> None:
        """SIGTERM and SIGINT begin the stop; a second signal is left to the default handler."""
        loop = asyncio.get_running_loop()

        def _signalled(signum: signal.Signals) -> None:
            loop.remove_signal_handler(signum)
            self._log.info("stopping", signal=signum.name, within_s=self.timeout_s)
            self.begin()

        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, _signalled, signum)

    def begin(self) -> None:
        """Set ``stop`` and start the clock (once: the first call counts)."""
        self.stop.set()
        if self._deadline is not None:
            return
        loop = asyncio.get_running_loop()
        self._deadline = loop.time() + self.timeout_s
        loop.call_at(self._deadline, self._expire)
        if self._backstop_s is not None:
            backstop = threading.Timer(self.timeout_s + self._backstop_s, self._exit_now)
            backstop.daemon = True
            backstop.start()

    def remaining_s(self) -> float:
        """The time left to stop in (all of it before the clock starts)."""
        if self._deadline is None:
            return self.timeout_s
        return max(0.0, self._deadline - asyncio.get_running_loop().time())

    def left(self) -> list[str]:
        """What would be abandoned now, in words."""
        return [f"{what}: {left}" for what, describe in self._pending.items() if (left := describe())]

    def closing(self, what: str, close: Callable[[], Awaitable[object]]) -> Callable[[], Awaitable[None]]:
        """``close`` as a step of the stop (an exit stack's callback): run within the time left, abandoned (and
        said) at the deadline; a step that comes after it gets :data:`LAST_CHANCE_S`. Closing is stopping,
        whatever began it: the clock starts if it has not."""

        async def bounded() -> None:
            self.begin()
            try:
                async with asyncio.timeout(max(self.remaining_s(), LAST_CHANCE_S if self.expired else 0.0)):
                    await close()
            except TimeoutError:
                self._log.warning("shutdown abandoned a step", step=what, timeout_s=self.timeout_s)
            except asyncio.CancelledError:
                if self.expired:  # the deadline cancelled the process in this very step
                    self._log.warning("shutdown abandoned a step", step=what, timeout_s=self.timeout_s)
                raise

        return bounded

    async def run(self, main: Coroutine[Any, Any, T]) -> T | None:
        """Run ``main``; once the stop began, it has until the deadline, then it is cancelled (``None``)."""
        self._main = task = asyncio.ensure_future(main)
        try:
            return await task
        except asyncio.CancelledError:
            if self.expired and task.cancelled():
                return None
            raise

    def _expire(self) -> None:
        if self._main is None or self._main.done():
            return
        self.expired = True
        self._log.warning(
            "shutdown timed out: abandoning what is left (the log still holds every job)",
            timeout_s=self.timeout_s,
            abandoned=self.left(),
        )
        self._main.cancel()

    def _exit_now(self) -> None:
        """On a timer thread: the process outlived its deadline by :data:`BACKSTOP_S` (a thread it waits for)."""
        self._log.error("shutdown overran its timeout; exiting now", timeout_s=self.timeout_s, abandoned=self.left())
        for handler in logging.getLogger().handlers:
            handler.flush()
        os._exit(EXIT_SHUTDOWN_OVERRAN)


class BoundedServer(uvicorn.Server):
    """uvicorn whose SIGTERM begins the process's bounded stop: open responses get half of its time
    (uvicorn's graceful timeout), the app's own shutdown the rest."""

    def __init__(self, config: uvicorn.Config, shutdown: Shutdown) -> None:
        config.timeout_graceful_shutdown = max(1, math.ceil(shutdown.timeout_s / 2))
        super().__init__(config)
        self._shutdown = shutdown
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: Any = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: Any) -> None:
        super().handle_exit(sig, frame)
        if self._loop is not None:  # a signal handler: hand the clock's start to the loop
            self._loop.call_soon_threadsafe(self._shutdown.begin)
