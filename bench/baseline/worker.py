"""The baseline worker: claim with SKIP LOCKED, synthesize through the FIFO, upsert segments, complete.

It sleeps on LISTEN/NOTIFY (a submission notifies in its own transaction)
and polls every ``poll_s`` anyway, since a notification can be lost while the
listening connection reconnects. Idle wake-ups also requeue claims whose
heartbeat is older than ``stale_s``: that is this design's sweeper.

With ``batch`` above 1 (a GPU's device, as voxlog's worker batches there) it claims up to ``batch`` jobs in
one ``FOR UPDATE SKIP LOCKED`` statement and renders them together: one engine call for the first segment of
each, then one for the second of those that have one, and so on, storing each round's audio before the next.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import structlog

from bench.baseline.queue import CHANNEL, BaselineQueue, ClaimedJob
from consumers.errors import InputRejected, TransientEngineError
from consumers.forwards import render_batch
from consumers.ports import AudioSink, PlannedSegment, Rendering, SpeechEngine
from contracts import SynthesisRequest
from foundation.audio import encode_wav

log = structlog.get_logger("bench.baseline.worker")


@dataclass(frozen=True)
class BaselineWorkerConfig:
    worker_id: str
    poll_s: float = 1.0
    stale_s: float = 60.0
    max_attempts: int = 3
    batch: int = 1  # jobs claimed together, their segments rendered in one engine call a round


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
                if self._config.batch > 1:
                    if jobs := await self._queue.claim_many(self._config.worker_id, self._config.batch):
                        await self._run_batch(jobs)
                        continue
                elif (job := await self._queue.claim(self._config.worker_id)) is not None:
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

    async def _run_batch(self, jobs: Sequence[ClaimedJob]) -> None:
        """Plan every job in one call of the engine's thread, render their segments a round at a time (one call
        for each job's next segment), store each round's audio, and complete the jobs that are left."""
        started = time.perf_counter()
        requests = [SynthesisRequest.model_validate(job.request) for job in jobs]
        plans: list[Sequence[PlannedSegment] | Exception] = await self._call(_plan_all, self._engine, requests)
        planned: dict[int, Sequence[PlannedSegment]] = {}
        for index, (job, plan) in enumerate(zip(jobs, plans, strict=True)):
            if isinstance(plan, Exception):
                await self._gave_up(job, plan)
            else:
                planned[index] = plan
        live: dict[int, list[int]] = {i: [] for i in planned}  # job's index -> its segments' durations so far
        round_ = 0
        while batch := [i for i in live if round_ < len(planned[i])]:
            items = [(planned[i][round_], requests[i].voice, requests[i].speed) for i in batch]
            outcomes = await self._call(render_batch, self._engine, items)
            for i, (segment, _, _), outcome in zip(batch, items, outcomes, strict=True):
                if isinstance(outcome, Exception):
                    await self._gave_up(jobs[i], outcome)
                    del live[i]
                elif (duration_ms := await self._store(jobs[i], segment, outcome)) is None:
                    del live[i]
                else:
                    live[i].append(duration_ms)
            round_ += 1
        for i, durations in live.items():
            if await self._queue.complete(jobs[i].job_id, self._config.worker_id, len(durations), sum(durations)):
                log.info("job completed", job_id=str(jobs[i].job_id), segments=len(durations), batch=len(jobs))
        log.debug("batch done", jobs=len(jobs), seconds=time.perf_counter() - started)

    async def _store(self, job: ClaimedJob, segment: PlannedSegment, rendered: Rendering) -> int | None:
        """One segment's audio stored and its row upserted: its duration, or None when the claim was lost."""
        rate = self._engine.description.sample_rate
        wav = encode_wav(rendered.samples, rate)
        ref = await asyncio.to_thread(self._blobs.put, wav, ".wav")
        duration_ms = round(1000 * len(rendered.samples) / rate)
        span = (segment.start, segment.end, segment.text)
        if not await self._queue.put_segment(
            job.job_id, self._config.worker_id, segment.index, span, ref, duration_ms, rate, len(wav)
        ):
            log.warning("claim lost: job requeued as stale", job_id=str(job.job_id))
            return None
        return duration_ms

    async def _gave_up(self, job: ClaimedJob, error: Exception) -> None:
        """Give ``job`` back for what the engine said of it: for good when it refused the input."""
        if not isinstance(error, InputRejected | TransientEngineError):
            raise error
        await self._give_back(job, str(error), permanent=isinstance(error, InputRejected))

    async def _give_back(self, job: ClaimedJob, error: str, *, permanent: bool) -> None:
        state = await self._queue.give_back(
            job.job_id, self._config.worker_id, error, permanent=permanent, max_attempts=self._config.max_attempts
        )
        log.warning("job given back", job_id=str(job.job_id), state=state, error=error)


def _plan_all(engine: SpeechEngine, requests: Sequence[SynthesisRequest]) -> list[Sequence[PlannedSegment] | Exception]:
    """Each request's segments, or what the engine said of it (on the engine's thread)."""
    plans: list[Sequence[PlannedSegment] | Exception] = []
    for request in requests:
        try:
            plans.append(engine.plan(request.text, request.lang))
        except (InputRejected, TransientEngineError) as exc:
            plans.append(exc)
    return plans
