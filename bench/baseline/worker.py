"""The baseline worker: claim with SKIP LOCKED, synthesize through the FIFO, upsert segments, complete.

It sleeps on LISTEN/NOTIFY (a submission notifies in its own transaction)
and polls every ``poll_s`` anyway, since a notification can be lost while the
listening connection reconnects. Idle wake-ups also requeue claims whose
heartbeat is older than ``stale_s``: that is this design's sweeper.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import structlog

from bench.baseline.queue import CHANNEL, BaselineQueue, ClaimedJob
from consumers.errors import InputRejected, TransientEngineError
from consumers.ports import AudioSink, SpeechEngine
from contracts import SynthesisRequest
from foundation.audio import encode_wav

log = structlog.get_logger("bench.baseline.worker")


@dataclass(frozen=True)
class BaselineWorkerConfig:
    worker_id: str
    poll_s: float = 1.0
    stale_s: float = 60.0
    max_attempts: int = 3


class BaselineWorker:
    def __init__(
        self,
        config: BaselineWorkerConfig,
        queue: BaselineQueue,
        engine: SpeechEngine,
        blobs: AudioSink,
        call: Callable[..., Awaitable[Any]],
    ) -> None:
        self._config = config
        self._queue = queue
        self._engine = engine
        self._blobs = blobs
        self._call = call
        self._wake = asyncio.Event()
        self.idle = asyncio.Event()  # set while it waits for a NOTIFY or the next poll

    def _notified(self, *_: object) -> None:
        self._wake.set()

    async def run(self, listener: asyncpg.Connection, stop: asyncio.Event) -> None:
        """Work until ``stop`` is set; a job in hand is finished first."""
        await listener.add_listener(CHANNEL, self._notified)
        try:
            while not stop.is_set():
                self._wake.clear()  # before the claim: a NOTIFY during it still wakes the next wait
                job = await self._queue.claim(self._config.worker_id)
                if job is not None:
                    await self._run_job(job)
                    continue
                if await self._queue.requeue_stale(self._config.stale_s):
                    continue
                await self._idle(stop)
        finally:
            await listener.remove_listener(CHANNEL, self._notified)

    async def _idle(self, stop: asyncio.Event) -> None:
        waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._wake.wait())]
        self.idle.set()
        try:
            await asyncio.wait(waiters, timeout=self._config.poll_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.idle.clear()
            for waiter in waiters:
                waiter.cancel()

    async def _run_job(self, job: ClaimedJob) -> None:
        worker_id = self._config.worker_id
        request = SynthesisRequest.model_validate(job.request)
        started = time.perf_counter()
        try:
            plan = await self._call(self._engine.plan, request.text, request.lang)
            total_ms = 0
            rate = self._engine.description.sample_rate
            for segment in plan:
                rendered = await self._call(self._engine.render, segment, request.voice, request.speed)
                samples = rendered.samples
                wav = encode_wav(samples, rate)
                ref = await asyncio.to_thread(self._blobs.put, wav, ".wav")
                duration_ms = round(1000 * len(samples) / rate)
                total_ms += duration_ms
                span = (segment.start, segment.end, segment.text)
                if not await self._queue.put_segment(
                    job.job_id, worker_id, segment.index, span, ref, duration_ms, rate, len(wav)
                ):
                    log.warning("claim lost: job requeued as stale", job_id=str(job.job_id))
                    return
        except InputRejected as exc:
            await self._give_back(job, str(exc), permanent=True)
            return
        except TransientEngineError as exc:
            await self._give_back(job, str(exc), permanent=False)
            return
        if await self._queue.complete(job.job_id, worker_id, len(plan), total_ms):
            log.info("job completed", job_id=str(job.job_id), segments=len(plan), seconds=time.perf_counter() - started)

    async def _give_back(self, job: ClaimedJob, error: str, *, permanent: bool) -> None:
        state = await self._queue.give_back(
            job.job_id, self._config.worker_id, error, permanent=permanent, max_attempts=self._config.max_attempts
        )
        log.warning("job given back", job_id=str(job.job_id), state=state, error=error)
