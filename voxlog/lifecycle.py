"""Process lifecycle: signals set an event, loops wait on it with a timeout, tasks are owned."""

from __future__ import annotations

import asyncio
import contextlib
import signal

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
