"""Process lifecycle: signals set an event, loops wait on it with a timeout, tasks are owned."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable

import structlog

log = structlog.get_logger("voxlog.lifecycle")


async def wait_for_stop(stop: asyncio.Event, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``stop``; returns whether it was set (instead of sleeping blindly)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
    return stop.is_set()


def stop_on_signals(stop: asyncio.Event) -> None:
    """SIGTERM and SIGINT set ``stop``; a second signal is left to the default handler."""
    loop = asyncio.get_running_loop()

    def _handle(signum: signal.Signals) -> None:
        log.info("stopping", signal=signum.name)
        stop.set()
        loop.remove_signal_handler(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, _handle, signum)


def dump_tasks_on_sigusr1() -> None:
    """`kill -USR1 <pid>` logs every asyncio task's stack: how to see what a stuck process awaits."""
    loop = asyncio.get_running_loop()

    def _dump() -> None:
        for task in asyncio.all_tasks(loop):
            log.warning("task stack", task=task.get_name(), frames=_await_chain(task.get_coro()))

    loop.add_signal_handler(signal.SIGUSR1, _dump)


def _await_chain(coro: object) -> list[str]:
    """The frames a suspended coroutine is waiting in, outermost first (Task.get_stack shows one)."""
    frames = []
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            frames.append(f"{frame.f_code.co_filename.rsplit('/', 2)[-1]}:{frame.f_lineno} {frame.f_code.co_name}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None) or getattr(coro, "gi_yieldfrom", None)
    return frames


class Stopped(Exception):
    """The process was asked to stop while it waited for a dependency."""


class OwnedTasks:
    """Background tasks of a process: each failure is logged when it happens, and ``close`` awaits them all.

    Unlike a TaskGroup, the body that runs beside them keeps its own exceptions (a TaskGroup wraps
    them in an ExceptionGroup), and one task's failure does not cancel the others.
    """

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, work: Awaitable[None], name: str) -> None:
        task = asyncio.ensure_future(work)
        task.set_name(name)
        task.add_done_callback(self._report)
        self._tasks.add(task)

    @staticmethod
    def _report(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("background task failed", task=task.get_name(), error=repr(task.exception()))

    async def close(self, grace_s: float = 10.0) -> None:
        """Wait up to ``grace_s`` for the tasks (they end when the process's stop is set), then cancel the rest."""
        if not self._tasks:
            return
        _, pending = await asyncio.wait(self._tasks, timeout=grace_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
