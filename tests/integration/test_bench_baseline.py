"""The benchmark's baseline queue on the real PostgreSQL: it must be correct to be a fair comparison."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest_asyncio

from bench.baseline.queue import BaselineQueue, install
from bench.baseline.worker import BaselineWorker, BaselineWorkerConfig
from contracts import AudioRef
from foundation.blobs import LocalBlobStore
from projections.migrations import drop_schema
from tts_node.bench_sleep import BenchSleepEngine
from tts_node.fifo import SynthesisQueue
from voxlog.engine_adapter import TtsNodeSpeechEngine

REQUEST = {
    "text": "Hello there.",
    "voice": "bench_tone",
    "speed": 1.0,
    "lang": "en-us",
    "engine": "bench-sleep",
    "model_version": "sleep-0ms",
    "format": "wav",
    "sample_rate": 24000,
}
AUDIO = AudioRef(sha256="0" * 64, uri="file:///nowhere.wav")


@pytest_asyncio.fixture
async def bl_schema(stack) -> AsyncIterator[str]:
    name = f"bl_{uuid.uuid4().hex[:16]}"
    await install(stack.database_url, name)
    yield name
    await drop_schema(stack.database_url, name)


@pytest_asyncio.fixture
async def queue(stack, bl_schema) -> AsyncIterator[BaselineQueue]:
    pool = await asyncpg.create_pool(
        stack.database_url, min_size=4, max_size=4, server_settings={"search_path": bl_schema}
    )
    yield BaselineQueue(pool)
    await pool.close()


async def test_concurrent_claims_never_hand_out_a_job_twice(queue):
    jobs = [uuid.uuid4() for _ in range(40)]
    for i, job_id in enumerate(jobs):
        assert await queue.submit(job_id, f"fp-{i}", REQUEST) is None

    async def claimer(name: str) -> list[uuid.UUID]:
        got = []
        while (job := await queue.claim(name)) is not None:
            got.append(job.job_id)
        return got

    claimed = await asyncio.gather(*(claimer(f"w{i}") for i in range(4)))
    flat = [job_id for per_worker in claimed for job_id in per_worker]
    assert sorted(flat) == sorted(jobs)  # every job once, none twice


async def test_a_duplicate_points_at_the_live_job_and_shares_its_outcome(queue):
    first, second = uuid.uuid4(), uuid.uuid4()
    assert await queue.submit(first, "fp", REQUEST) is None
    assert await queue.submit(second, "fp", REQUEST) == first
    assert (await queue.status(second))["state"] == "queued"
    job = await queue.claim("w1")
    assert job is not None
    assert job.job_id == first
    assert await queue.claim("w2") is None  # the duplicate is never queued itself
    assert await queue.put_segment(first, "w1", 0, (0, 12, "Hello there."), AUDIO, 900, 24000, 100)
    assert await queue.complete(first, "w1", 1, 900)
    status = await queue.status(second)
    assert status["state"] == "completed"
    assert [s["segment_index"] for s in status["segments"]] == [0]


async def test_a_failed_job_does_not_absorb_later_submissions(queue):
    failed, retry = uuid.uuid4(), uuid.uuid4()
    await queue.submit(failed, "fp", REQUEST)
    await queue.claim("w1")
    assert await queue.give_back(failed, "w1", "bad input", permanent=True, max_attempts=3) == "failed"
    assert await queue.submit(retry, "fp", REQUEST) is None
    assert (await queue.claim("w1")).job_id == retry


async def test_a_stale_claim_is_requeued_and_its_old_owner_fenced_out(queue):
    job_id = uuid.uuid4()
    await queue.submit(job_id, "fp", REQUEST)
    assert (await queue.claim("w1")).attempt == 1
    assert await queue.requeue_stale(0.0) == 1
    assert not await queue.put_segment(job_id, "w1", 0, (0, 1, "H"), AUDIO, 1, 24000, 1)
    assert not await queue.complete(job_id, "w1", 1, 1)
    again = await queue.claim("w2")
    assert (again.job_id, again.attempt) == (job_id, 2)


async def test_an_idle_worker_is_woken_by_notify_not_by_its_poll(queue, stack, bl_schema, tmp_path):
    engine = BenchSleepEngine()
    fifo = SynthesisQueue(engine)
    await fifo.start()
    listener = await asyncpg.connect(stack.database_url)
    stop = asyncio.Event()
    config = BaselineWorkerConfig("w1", poll_s=60.0)  # far beyond this test's deadline
    worker = BaselineWorker(config, queue, TtsNodeSpeechEngine(engine), LocalBlobStore(tmp_path), fifo.call)
    task = asyncio.create_task(worker.run(listener, stop))
    try:
        await asyncio.wait_for(worker.idle.wait(), 20)
        deadline = time.monotonic() + 20
        job_id = uuid.uuid4()
        await queue.submit(job_id, "fp-notify", REQUEST)
        while (status := await queue.status(job_id))["state"] != "completed":
            assert time.monotonic() < deadline, f"not woken: {status}"
            await asyncio.sleep(0.05)
        assert status["segment_count"] == 1
        await asyncio.wait_for(worker.idle.wait(), 10)  # back to waiting, not stuck in the job
        assert (tmp_path / status["segments"][0]["audio_sha256"][:2]).is_dir()
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
        await listener.close()
        await fifo.stop(grace_s=1)


async def test_a_batching_worker_claims_up_to_its_batch_in_one_statement_and_speaks_them_in_one_call(
    queue, stack, tmp_path
):
    """At a GPU's batched pace (scenario (n)): 40 queued jobs, one of two segments, a batch of 32: the first
    claim takes the 32 oldest, one engine call speaks their first segments and one more the second."""
    jobs = [uuid.uuid4() for _ in range(40)]
    for i, job_id in enumerate(jobs):
        text = f"Job number {i} here." + (" And a second sentence." if i == 0 else "")
        assert await queue.submit(job_id, f"fp-batch-{i}", {**REQUEST, "text": text}) is None
    claimed = await queue.claim_many("w0", 32)
    assert [job.job_id for job in claimed] == jobs[:32]  # the oldest, in submission order
    assert await queue.requeue_stale(0.0) == 32  # back in the queue for the worker below

    engine = BenchSleepEngine(batch_ms=1.0, ms_per_id=0.001)
    fifo = SynthesisQueue(engine)
    await fifo.start()
    listener = await asyncpg.connect(stack.database_url)
    stop = asyncio.Event()
    config = BaselineWorkerConfig("w1", poll_s=60.0, batch=32)
    worker = BaselineWorker(config, queue, TtsNodeSpeechEngine(engine), LocalBlobStore(tmp_path), fifo.call)
    task = asyncio.create_task(worker.run(listener, stop))
    try:
        deadline = time.monotonic() + 30
        while {(await queue.status(job_id))["state"] for job_id in jobs} != {"completed"}:
            assert time.monotonic() < deadline, "not all completed"
            await asyncio.sleep(0.05)
        assert (await queue.status(jobs[0]))["segment_count"] == 2
        # 32 first segments, then the first job's second alone, then the 8 left: 3 forwards, 41 segments.
        assert (engine.forwards, engine.forward_segments) == (3, 41)
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
        await listener.close()
        await fifo.stop(grace_s=1)
