"""One in-process FIFO in front of a node's engine: every synthesis waits its turn.

The model is one ONNX session sized to the node's cores, so two requests at once
would only slow each other down. Requests therefore queue (none is refused for
being concurrent), one consumer task takes them in submission order, and engine
calls run on one dedicated thread so the event loop keeps serving HTTP.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog

from tts_node.engine import Audio, Engine
from tts_node.engine_thread import EngineThread
from tts_node.errors import EngineInputError, TtsNodeError

log = structlog.get_logger("voxlog.tts_node")

T = TypeVar("T")


class QueueClosed(TtsNodeError):
    """The queue is not taking requests: not started yet, or shutting down."""


@dataclass(frozen=True)
class SegmentAudio:
    """One synthesized segment of a streamed request."""

    index: int
    start: int
    end: int
    text: str
    samples: Audio
    sample_rate: int
    synth_ms: float
    queue_wait_ms: float = 0.0
    """How long the request waited in the FIFO before the engine took it (same for all its segments)."""


def _ms_since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


class _Job:
    def __init__(self) -> None:
        self.enqueued_at = time.perf_counter()
        # Set from the caller's side; the consumer only looks at it between engine calls.
        self.abandoned = False
        self.finished = False

    async def run(self, queue: SynthesisQueue) -> bool:
        """Do the work; False when it stopped early because the caller went away."""
        raise NotImplementedError

    def fail(self, exc: BaseException) -> None:
        raise NotImplementedError


class _StreamJob(_Job):
    def __init__(self, text: str, lang: str, voice: str, speed: float) -> None:
        super().__init__()
        self.text, self.lang, self.voice, self.speed = text, lang, voice, speed
        # None marks the end. Unbounded: a slow reader only holds a few segments of audio.
        self.results: asyncio.Queue[SegmentAudio | BaseException | None] = asyncio.Queue()

    async def run(self, queue: SynthesisQueue) -> bool:
        engine = queue.engine
        wait_ms = _ms_since(self.enqueued_at)
        segments = await queue._in_thread(engine.segment, self.text, self.lang)
        for segment in segments:
            if self.abandoned:
                return False
            t0 = time.perf_counter()
            samples = await queue._in_thread(engine.synthesize, segment, self.voice, self.speed)
            self.results.put_nowait(
                SegmentAudio(
                    index=segment.index,
                    start=segment.start,
                    end=segment.end,
                    text=segment.text,
                    samples=samples,
                    sample_rate=engine.info.sample_rate,
                    synth_ms=_ms_since(t0),
                    queue_wait_ms=wait_ms,
                )
            )
        self.results.put_nowait(None)
        return True

    def fail(self, exc: BaseException) -> None:
        self.results.put_nowait(exc)


class _CallJob(_Job):
    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        super().__init__()
        self.fn, self.args = fn, args
        self.future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def run(self, queue: SynthesisQueue) -> bool:
        # A single blocking call cannot stop half-way; its result is dropped if nobody waits.
        result = await queue._in_thread(self.fn, *self.args)
        if not self.future.done():
            self.future.set_result(result)
        return True

    def fail(self, exc: BaseException) -> None:
        # Setting an exception nobody will retrieve would only log a spurious warning.
        if not self.future.done() and not self.abandoned:
            self.future.set_exception(exc)


class SynthesisQueue:
    """The node's only way to the engine: FIFO, one request at a time, off the event loop.

    On ``thread``, the one the process loaded and warmed its engine on (left open at ``stop``: its owner
    closes it); without it, on a thread of the queue's own.
    """

    def __init__(self, engine: Engine, thread: EngineThread | None = None) -> None:
        self.engine = engine
        self._given = thread
        self.submitted = 0
        self.completed = 0
        self.cancelled = 0
        self.failed = 0
        self._waiting: deque[_Job] = deque()
        self._current: _Job | None = None
        self._consumer: asyncio.Task[None] | None = None
        self._thread: EngineThread | None = None
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()
        self._closing = False

    @property
    def depth(self) -> int:
        """Requests waiting, not counting the one being synthesized."""
        return len(self._waiting)

    @property
    def busy(self) -> bool:
        return self._current is not None

    async def start(self) -> None:
        if self._consumer is not None:
            raise RuntimeError("the synthesis queue is already running")
        self._closing = False
        self._thread = self._given or EngineThread()
        self._consumer = asyncio.create_task(self._consume(), name="synthesis-queue")
        self._consumer.add_done_callback(self._consumer_ended)

    def close(self) -> None:
        """Refuse new requests and cancel the queued ones; the running one carries on."""
        self._closing = True
        while self._waiting:
            job = self._waiting.popleft()
            job.finished = True
            self.cancelled += 1
            job.fail(QueueClosed("the node is shutting down; send the request to another node"))
        self._wake.set()
        self._notify()

    async def stop(self, grace_s: float) -> None:
        """``close``, then give the running request ``grace_s`` seconds to finish before cutting it off."""
        self.close()
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            done, _ = await asyncio.wait({consumer}, timeout=grace_s)
            if not done:
                log.warning("synthesis still running at shutdown; abandoning it", grace_s=grace_s)
                consumer.cancel()
                await asyncio.wait({consumer})
        thread, self._thread = self._thread, None
        if thread is not None and thread is not self._given:
            thread.close()  # without waiting: a cut-off engine call cannot be interrupted

    async def stream(self, text: str, lang: str, voice: str, speed: float) -> AsyncGenerator[SegmentAudio, None]:
        """Segments as they are synthesized; the request joins the FIFO when iteration starts.

        Leaving the loop early, or being cancelled, withdraws a queued request and
        stops a running one at the next segment boundary.
        """
        job = _StreamJob(text, lang, voice, speed)
        self._enqueue(job)
        try:
            while (item := await job.results.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self._abandon(job)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run one blocking engine call through the same FIFO and thread."""
        job = _CallJob(fn, args)
        self._enqueue(job)
        try:
            result: T = await job.future
            return result
        finally:
            self._abandon(job)

    async def wait_until(self, predicate: Callable[[SynthesisQueue], bool]) -> None:
        """Return once ``predicate(self)`` holds; it is rechecked on every queue change."""
        while True:
            # Taken before the check, so a change between check and wait is not missed.
            changed = self._changed
            if predicate(self):
                return
            await changed.wait()

    def _notify(self) -> None:
        # A fresh event per change lets any number of waiters wake without clearing races.
        self._changed.set()
        self._changed = asyncio.Event()

    def _enqueue(self, job: _Job) -> None:
        if self._consumer is None or self._closing:
            raise QueueClosed("the synthesis queue is not running")
        self._waiting.append(job)
        self.submitted += 1
        self._wake.set()
        self._notify()

    def _abandon(self, job: _Job) -> None:
        if job.finished:
            return
        job.abandoned = True
        if job is not self._current:
            self._waiting.remove(job)
            job.finished = True
            self.cancelled += 1
            self._notify()

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        if self._thread is None:
            raise QueueClosed("the synthesis queue is not running")
        return await self._thread.run(fn, *args)

    async def _consume(self) -> None:
        while True:
            if not self._waiting:
                if self._closing:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            job = self._current = self._waiting.popleft()
            self._notify()
            try:
                finished = await job.run(self)
            except asyncio.CancelledError:
                job.fail(QueueClosed("the node shut down before this request finished"))
                raise
            except EngineInputError as exc:
                self.failed += 1
                job.fail(exc)
            except Exception as exc:
                self.failed += 1
                log.warning("synthesis failed", error=str(exc), error_type=type(exc).__name__)
                job.fail(exc)
            else:
                if finished:
                    self.completed += 1
                else:
                    self.cancelled += 1
            finally:
                job.finished = True
                self._current = None
                self._notify()

    def _consumer_ended(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("synthesis queue consumer died", error=str(exc), error_type=type(exc).__name__)
