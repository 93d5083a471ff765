"""Composition root of the long-running processes: api, worker, projector."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from datetime import timedelta

import asyncpg
import structlog
import uvicorn
from aiokafka import AIOKafkaConsumer, ConsumerRecord

from consumers.job_runner import JobRunner, RetryPolicy
from consumers.store import PostgresResultLookup
from consumers.worker import SynthWorker, WorkerConfig
from contracts import NodeAnnounced, NodeAnnouncedPayload, Producer, utc_now
from producers.app import create_app
from producers.deps import ApiDeps
from producers.queries import ProjectionReader
from producers.submit import LazyPublisher, Limits
from projections.migrations import migrate_database
from projections.projector import Projector, ProjectorConfig
from tts_node import Engine, load_engine
from tts_node.fifo import SynthesisQueue
from tts_node.server import serve_node
from voxlog.blobs import LocalBlobStore
from voxlog.db import open_pool
from voxlog.dlq import dead_letter
from voxlog.engine_adapter import TtsNodeSpeechEngine
from voxlog.kafka import KafkaEventPublisher, wait_for_partitions
from voxlog.lifecycle import dump_tasks_on_sigusr1, stop_on_signals
from voxlog.metrics import serve_metrics
from voxlog.settings import (
    ApiSettings,
    DatabaseSettings,
    EngineSettings,
    NodeSettings,
    ProjectorSettings,
    WorkerSettings,
)

log = structlog.get_logger("voxlog")


def _instance() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


async def _pool(settings: DatabaseSettings) -> asyncpg.Pool:
    await migrate_database(settings.database_url, settings.database_schema)
    return await open_pool(settings.database_url, settings.database_schema, min_size=1, max_size=10)


async def run_api(settings: ApiSettings) -> None:
    pool = await _pool(settings)
    publisher = LazyPublisher(
        KafkaEventPublisher, settings.kafka_bootstrap_servers, settings.jobs_topic, settings.publish_timeout_ms
    )
    deps = ApiDeps(
        reader=ProjectionReader(pool),
        publisher=publisher,
        blobs=LocalBlobStore(settings.blob_dir),
        limits=Limits(settings.max_text_chars, settings.min_speed, settings.max_speed, settings.default_engine),
        producer=Producer(service="api", instance=_instance()),
        speech_timeout_s=settings.speech_timeout_s,
        stream_poll_s=settings.stream_poll_s,
        openai_default_voice=settings.openai_default_voice,
    )
    app = create_app(deps)
    server = uvicorn.Server(
        uvicorn.Config(app, host=settings.api_host, port=settings.api_port, log_config=None, access_log=False)
    )
    try:
        await server.serve()  # uvicorn turns SIGTERM into a graceful shutdown
    finally:
        await publisher.stop()
        await pool.close()


async def load_configured_engine(settings: EngineSettings) -> Engine:
    """The one model of this process, on its device, loaded and warmed up off the event loop."""
    if settings.nice:
        os.nice(settings.nice)  # synthesis should yield the CPU to the broker and the API
    return await asyncio.to_thread(
        load_engine,
        settings.engine,
        device=settings.device,
        threads=settings.threads,
        cache_dir=settings.model_cache_dir,
        model_dir=settings.kokoro_dir,
        voices_dir=settings.voices_dir,
        bench_synth_ms=settings.bench_synth_ms,
    )


async def run_node(settings: NodeSettings) -> None:
    await serve_node(await load_configured_engine(settings), settings.node_host, settings.node_port)


async def run_worker(settings: WorkerSettings) -> None:
    worker_id = settings.worker_id or f"{socket.gethostname()}-{settings.device}"
    producer = Producer(service="worker", instance=worker_id)
    model = await load_configured_engine(settings)
    engine = TtsNodeSpeechEngine(model)
    fifo = SynthesisQueue(model)
    await fifo.start()
    serve_metrics(settings.metrics_host, settings.metrics_port)
    pool = await _pool(settings)
    publisher = KafkaEventPublisher(settings.kafka_bootstrap_servers, settings.jobs_topic, client_id=worker_id)
    await publisher.start()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap_servers,
        group_id=settings.synth_group,
        client_id=worker_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        # The loop does not poll while a job synthesizes: allow the longest job between polls,
        # and give a revocation callback its grace period plus a segment before eviction.
        max_poll_interval_ms=int(settings.max_job_s * 1000),
        rebalance_timeout_ms=int((settings.rebalance_grace_s + 60) * 1000),
    )
    stop = asyncio.Event()
    stop_on_signals(stop)
    dump_tasks_on_sigusr1()
    try:
        await _announce(publisher, settings, worker_id, producer, engine)
        runner = JobRunner(
            engine,
            LocalBlobStore(settings.blob_dir),
            publisher,
            producer,
            worker_id,
            RetryPolicy(settings.max_attempts, settings.retry_base_delay_s),
            fifo.call,
        )
        config = WorkerConfig(
            worker_id=worker_id,
            bootstrap_servers=settings.kafka_bootstrap_servers,
            jobs_topic=settings.jobs_topic,
            cache_ttl=timedelta(seconds=settings.cache_ttl),
            shutdown_grace_s=settings.shutdown_grace_s,
            rebalance_grace_s=settings.rebalance_grace_s,
            commit_interval_s=settings.commit_interval_s,
        )

        async def to_dlq(record: ConsumerRecord, reason: str) -> object:
            return await dead_letter(publisher, settings.dlq_topic, record, reason, f"worker:{worker_id}")

        worker = SynthWorker(config, consumer, runner, PostgresResultLookup(pool), to_dlq)
        await consumer.start()
        log.info("worker started", worker_id=worker_id, engine=engine.description.name, device=settings.device)
        await worker.run(stop)
    finally:
        await consumer.stop()
        await publisher.stop()
        await pool.close()
        await fifo.stop(grace_s=settings.shutdown_grace_s)
        log.info("worker stopped", worker_id=worker_id)


async def _announce(
    publisher: KafkaEventPublisher,
    settings: WorkerSettings,
    worker_id: str,
    producer: Producer,
    engine: TtsNodeSpeechEngine,
) -> None:
    d = engine.description
    now = utc_now()
    announcement = NodeAnnounced(
        event_id=uuid.uuid4(),
        occurred_at=now,
        producer=producer,
        payload=NodeAnnouncedPayload(
            worker_id=worker_id,
            engine=d.name,
            model_version=d.model_version,
            device=d.device,
            sample_rate=d.sample_rate,
            voices=d.voices,
            languages=d.languages,
            started_at=now,
        ),
    )
    await publisher.publish(announcement, topic=settings.nodes_topic)


async def run_projector(settings: ProjectorSettings) -> None:
    pool = await _pool(settings)
    publisher = KafkaEventPublisher(settings.kafka_bootstrap_servers, settings.dlq_topic, client_id="projector")
    await publisher.start()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap_servers, group_id=None, enable_auto_commit=False
    )
    stop = asyncio.Event()
    stop_on_signals(stop)
    await consumer.start()
    try:
        partitions = [
            *(await wait_for_partitions(consumer, settings.jobs_topic)),
            *(await wait_for_partitions(consumer, settings.nodes_topic)),
        ]
        consumer.assign(partitions)
        config = ProjectorConfig(
            name=settings.projector_name,
            jobs_topic=settings.jobs_topic,
            nodes_topic=settings.nodes_topic,
            cache_ttl=timedelta(seconds=settings.cache_ttl),
            max_batch=settings.projector_batch,
        )

        async def to_dlq(record: ConsumerRecord, reason: str) -> object:
            return await dead_letter(publisher, settings.dlq_topic, record, reason, f"projector:{config.name}")

        log.info("projector started", partitions=len(partitions), name=config.name)
        await Projector(config, pool, consumer, partitions, to_dlq).run(stop)
    finally:
        await consumer.stop()
        await publisher.stop()
        await pool.close()
        log.info("projector stopped")
