"""``python -m bench.baseline api|worker``: run one baseline process until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import socket

import asyncpg
import structlog
import uvicorn

from bench import paced
from bench.baseline.api import BaselineDeps, create_baseline_app
from bench.baseline.queue import BaselineQueue, install
from bench.baseline.settings import BaselineApiSettings, BaselineWorkerSettings
from bench.baseline.worker import BaselineWorker, BaselineWorkerConfig
from foundation.blobs import LocalBlobStore
from foundation.db import open_pool
from foundation.job_changes import FALLBACK_POLL_S
from foundation.lifecycle import stop_on_signals
from foundation.logging import configure_logging
from foundation.metrics import serve_metrics
from producers.requests import Limits
from tts_node.engine_thread import EngineThread
from tts_node.fifo import SynthesisQueue
from voxlog.composition.configs import MAX_SPEED, MIN_SPEED, batch_and_claims
from voxlog.composition.resources import load_configured_engine
from voxlog.engine_adapter import TtsNodeSpeechEngine

log = structlog.get_logger("bench.baseline")


async def _pool(url: str, schema: str, size: int) -> asyncpg.Pool:
    await install(url, schema)
    return await open_pool(url, schema, min_size=size, max_size=size)


async def run_api(settings: BaselineApiSettings) -> None:
    pool = await _pool(settings.database_url.get_secret_value(), settings.database_schema, 10)
    deps = BaselineDeps(
        queue=BaselineQueue(pool),
        blobs=LocalBlobStore(settings.blob_dir),
        limits=Limits(settings.max_text_chars, MIN_SPEED, MAX_SPEED, settings.default_engine),
        stream_poll_s=FALLBACK_POLL_S,  # voxlog's API polls as often while it cannot listen
        stream_timeout_s=settings.speech_timeout_s,
    )
    app = create_baseline_app(deps)
    config = uvicorn.Config(app, host=settings.api_host, port=settings.api_port, log_config=None, access_log=False)
    try:
        await uvicorn.Server(config).serve()
    finally:
        await pool.close()


async def run_worker(settings: BaselineWorkerSettings) -> None:
    worker_id = settings.worker_id or f"{socket.gethostname()}-{settings.device}"
    thread = EngineThread()  # as voxlog's worker: the engine's load and its forwards on one thread
    model = await load_configured_engine(settings, thread)
    engine = TtsNodeSpeechEngine(model)
    fifo = SynthesisQueue(model, thread)
    await fifo.start()
    serve_metrics(settings.metrics_host, settings.metrics_port)
    pool = await _pool(settings.database_url.get_secret_value(), settings.database_schema, 2)
    listener = await asyncpg.connect(settings.database_url.get_secret_value())
    stop = asyncio.Event()
    stop_on_signals(stop)
    try:
        queue = BaselineQueue(pool)
        await queue.announce(worker_id, engine.description)
        batch, _ = batch_and_claims(settings, model.info.device)  # as voxlog's worker batches: 32 on a GPU
        config = BaselineWorkerConfig(
            worker_id, settings.baseline_poll_s, settings.baseline_stale_s, settings.max_attempts, batch
        )
        log.info("baseline worker started", worker_id=worker_id, engine=engine.description.name)
        await BaselineWorker(config, queue, engine, LocalBlobStore(settings.blob_dir), fifo.call).run(listener, stop)
    finally:
        await listener.close()
        await pool.close()
        await fifo.stop(grace_s=settings.shutdown_grace_s)
        thread.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.baseline", description=__doc__)
    parser.add_argument("process", choices=["api", "worker"])
    args = parser.parse_args()
    configure_logging("INFO")
    paced.install()  # the benchmark engine paced by VOXLOG_BENCH_*, as voxlog's processes are (bench.paced)
    if args.process == "api":
        asyncio.run(run_api(BaselineApiSettings()))
    else:
        asyncio.run(run_worker(BaselineWorkerSettings()))


if __name__ == "__main__":
    main()
