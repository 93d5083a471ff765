"""The one thread a process's engine runs on, from its load to its last forward.

Torch keeps state per thread that a forward depends on: the CUDA graphs a ``graphs`` decoder records (the
compiler's graph trees are per thread), the current CUDA stream. A decoder chosen and warmed at start-up, or
batch sizes measured, on one thread and then served from another recorded its graphs again under the first
requests, the minutes of start-up work spent for nothing. So a process makes one :class:`EngineThread` and
runs on it everything it asks of its engine: the load, the warm-up, the decoder's choice, the measurements,
and then the FIFO's forwards (:class:`tts_node.fifo.SynthesisQueue`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from tts_node.errors import TtsNodeError

T = TypeVar("T")


class EngineThreadClosed(TtsNodeError):
    """The engine's thread was closed: the process is stopping."""


class EngineThread:
    """One worker thread, made when first used; ``close`` abandons a call that still runs (an engine call
    cannot be interrupted, and a process's stop must not wait on it)."""

    def __init__(self, name: str = "synth") -> None:
        self._executor: ThreadPoolExecutor | None = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on the thread, awaited without blocking the event loop."""
        if self._executor is None:
            raise EngineThreadClosed("the engine's thread is closed")
        call = functools.partial(fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    @property
    def closed(self) -> bool:
        return self._executor is None

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
