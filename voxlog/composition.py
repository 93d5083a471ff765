"""The composition root: each process built from its settings, its resources opened, run until stopped.

Settings become the services' config objects here and nowhere else. Every
process opens its resources through one ``AsyncExitStack``, so a failure
half-way through start-up closes what was already open, in reverse order,
and a normal stop closes everything the same way.
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import Callable
from contextlib import AsyncExitStack
from datetime import timedelta

import asyncpg
import structlog
import uvicorn
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from aiokafka.structs import TopicPartition

from consumers.activity import Activity
from consumers.heartbeat import HeartbeatBook, beat, heartbeat
from consumers.job_runner import JobRunner, RetryPolicy
from consumers.ports import EngineDescription
from consumers.store import PostgresResultLookup
from consumers.sweeper import Sweeper, SweeperConfig
from consumers.sweeper_store import AdvisoryLeadership, PostgresSweeperStore
from consumers.worker import POLL_BUDGET_S, SynthWorker
from consumers.worker_config import WorkerConfig, synth_group
from contracts import AudioRef, NodeAnnounced, NodeAnnouncedPayload, NodeHeartbeat, Producer, utc_now
from foundation.blobs import LocalBlobStore
from foundation.db import open_pool
from foundation.dlq import DeadLetterSender
from foundation.errors import BrokerUnavailable
from foundation.kafka import KafkaEventPublisher, ReconnectingPublisher, wait_for_partitions
from foundation.lifecycle import OwnedTasks, dump_tasks_on_sigusr1, stop_on_signals, until_available
from foundation.metrics import serve_metrics
from foundation.settings import (
    ApiSettings,
    DatabaseSettings,
    EngineSettings,
    NodeSettings,
    ProjectorSettings,
    SweeperSettings,
    WorkerSettings,
)
from producers.app import create_app
from producers.deps import ApiDeps
from producers.queries import ProjectionReader
from producers.submit import Limits
from projections.errors import DatabaseUnavailable
from projections.migrations import migrate_database
from projections.projector import Projector, ProjectorConfig
from tts_node import Engine, load_engine
from tts_node.fifo import SynthesisQueue
from tts_node.server import serve_node
from voxlog.engine_adapter import TtsNodeSpeechEngine

log = structlog.get_logger("voxlog")


# -- settings → config objects ---------------------------------------------------------
def limits(settings: ApiSettings) -> Limits:
    return Limits(settings.max_text_chars, settings.min_speed, settings.max_speed, settings.default_engine)


def worker_id_of(settings: WorkerSettings) -> str:
    return settings.worker_id or f"{socket.gethostname()}-{settings.device}"


def worker_config(settings: WorkerSettings, engine: EngineDescription | None = None) -> WorkerConfig:
    return WorkerConfig(
        worker_id=worker_id_of(settings),
        bootstrap_servers=settings.kafka_bootstrap_servers,
        jobs_topic=settings.jobs_topic,
        cache_ttl=timedelta(seconds=settings.cache_ttl),
        shutdown_grace_s=settings.shutdown_grace_s,
        rebalance_grace_s=settings.rebalance_grace_s,
        commit_interval_s=settings.commit_interval_s,
        watchdog_factor=settings.watchdog_factor,
        watchdog_min_s=settings.watchdog_min_s,
        engine=engine.name if engine else "",
        model_version=engine.model_version if engine else "",
    )


def retry_policy(settings: WorkerSettings) -> RetryPolicy:
    return RetryPolicy(settings.max_attempts, settings.retry_base_delay_s)


def projector_config(settings: ProjectorSettings) -> ProjectorConfig:
    return ProjectorConfig(
        name=settings.projector_name,
        jobs_topic=settings.jobs_topic,
        nodes_topic=settings.nodes_topic,
        cache_ttl=timedelta(seconds=settings.cache_ttl),
        max_batch=settings.projector_batch,
    )


# -- shared resources ----------------------------------------------------------------------
def _instance() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


async def _pool(
    resources: AsyncExitStack, settings: DatabaseSettings, stop: asyncio.Event, *, migrate: bool
) -> asyncpg.Pool:
    """A lazy pool (no connection until one is needed); with ``migrate``, once the schema is migrated,
    waiting for PostgreSQL as long as it takes."""
    if migrate:
        url, schema = settings.database_url, settings.database_schema
        await until_available("PostgreSQL", lambda: migrate_database(url, schema), stop, (DatabaseUnavailable,))
    pool = await open_pool(settings.database_url, settings.database_schema, min_size=0, max_size=10)
    resources.push_async_callback(pool.close)
    return pool


async def _publisher(
    resources: AsyncExitStack, bootstrap: str, topic: str, client_id: str, stop: asyncio.Event
) -> KafkaEventPublisher:
    """A started producer, once Kafka answers (a stopped aiokafka producer cannot start again: a new one per try)."""

    async def started() -> KafkaEventPublisher:
        publisher = KafkaEventPublisher(bootstrap, topic, client_id=client_id)
        await publisher.start()
        return publisher

    publisher = await until_available("Kafka", started, stop, (BrokerUnavailable,))
    resources.push_async_callback(publisher.stop)
    return publisher


async def _consumer(
    resources: AsyncExitStack, make: Callable[[], AIOKafkaConsumer], stop: asyncio.Event
) -> AIOKafkaConsumer:
    """A started consumer, once Kafka answers (a new one per try, like the producer)."""

    async def started() -> AIOKafkaConsumer:
        consumer = make()
        try:
            await consumer.start()
        except BaseException:
            await consumer.stop()
            raise
        return consumer

    consumer = await until_available("Kafka", started, stop, (KafkaError, OSError))
    resources.push_async_callback(consumer.stop)
    return consumer


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
        bench_fault=settings.bench_fault,
    )


async def _fifo(resources: AsyncExitStack, model: Engine, grace_s: float) -> SynthesisQueue:
    fifo = SynthesisQueue(model)
    await fifo.start()
    resources.push_async_callback(fifo.stop, grace_s=grace_s)
    return fifo


# -- the processes ----------------------------------------------------------------------------
async def run_api(settings: ApiSettings) -> None:
    async with AsyncExitStack() as resources:
        # Nothing is waited for: the API answers from the start, 503 for what is down (the projector
        # owns the schema's migrations).
        pool = await _pool(resources, settings, asyncio.Event(), migrate=False)
        publisher = ReconnectingPublisher(
            settings.kafka_bootstrap_servers,
            settings.jobs_topic,
            client_id="voxlog-api",
            deadline_ms=settings.publish_timeout_ms,
        )
        resources.push_async_callback(publisher.stop)
        deps = ApiDeps(
            reader=ProjectionReader(pool),
            publisher=publisher,
            blobs=LocalBlobStore(settings.blob_dir),
            limits=limits(settings),
            producer=Producer(service="api", instance=_instance()),
            speech_timeout_s=settings.speech_timeout_s,
            stream_poll_s=settings.stream_poll_s,
            openai_default_voice=settings.openai_default_voice,
        )
        server = uvicorn.Server(
            uvicorn.Config(
                create_app(deps), host=settings.api_host, port=settings.api_port, log_config=None, access_log=False
            )
        )
        await server.serve()  # uvicorn turns SIGTERM into a graceful shutdown


async def run_node(settings: NodeSettings) -> None:
    await serve_node(await load_configured_engine(settings), settings.node_host, settings.node_port)


async def run_worker(settings: WorkerSettings) -> None:
    stop = asyncio.Event()
    stop_on_signals(stop)
    dump_tasks_on_sigusr1()
    async with AsyncExitStack() as resources:
        model = await load_configured_engine(settings)
        engine = TtsNodeSpeechEngine(model)
        config = worker_config(settings, engine.description)
        producer = Producer(service="worker", instance=config.worker_id)
        fifo = await _fifo(resources, model, settings.shutdown_grace_s)
        serve_metrics(settings.metrics_host, settings.metrics_port)
        pool = await _pool(resources, settings, stop, migrate=False)
        publisher = await _publisher(
            resources, settings.kafka_bootstrap_servers, settings.jobs_topic, config.worker_id, stop
        )
        await until_available(
            "Kafka (announcing this worker)",
            lambda: _announce(publisher, settings.nodes_topic, config.worker_id, producer, engine),
            stop,
            (BrokerUnavailable,),
        )
        activity = Activity()
        runner = JobRunner(
            engine,
            LocalBlobStore(settings.blob_dir),
            publisher,
            producer,
            config.worker_id,
            retry_policy(settings),
            fifo.call,
            activity,
        )
        dead_letter = DeadLetterSender(publisher, settings.dlq_topic, f"worker:{config.worker_id}")

        def make_consumer() -> AIOKafkaConsumer:
            return AIOKafkaConsumer(
                bootstrap_servers=settings.kafka_bootstrap_servers,
                group_id=synth_group(settings.synth_group, config.engine, config.model_version),
                client_id=config.worker_id,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                # The loop does not poll while a job synthesizes: allow the longest job plus the
                # handling budget after which it polls again (consumers.worker.POLL_BUDGET_S), and give
                # a revocation callback its grace period plus a segment before eviction.
                max_poll_interval_ms=int((settings.max_job_s + POLL_BUDGET_S + 30) * 1000),
                rebalance_timeout_ms=int((settings.rebalance_grace_s + 60) * 1000),
            )

        consumer = await _consumer(resources, make_consumer, stop)
        worker = SynthWorker(config, consumer, runner, PostgresResultLookup(pool), dead_letter)
        log.info("worker started", worker_id=config.worker_id, engine=engine.description.name, device=settings.device)
        started_at = utc_now()

        async def send_heartbeat(event: NodeHeartbeat) -> object:
            return await publisher.publish(event, topic=settings.nodes_topic)

        def build_heartbeat() -> NodeHeartbeat:
            return heartbeat(config.worker_id, engine.description, activity, producer, started_at)

        tasks = OwnedTasks()
        tasks.start(beat(send_heartbeat, build_heartbeat, settings.heartbeat_s, stop), "heartbeat")
        try:
            await worker.run(stop)
        finally:
            stop.set()  # ends the heartbeat too
            await tasks.close()
    log.info("worker stopped", worker_id=config.worker_id)


async def _announce(
    publisher: KafkaEventPublisher, topic: str, worker_id: str, producer: Producer, engine: TtsNodeSpeechEngine
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
    await publisher.publish(announcement, topic=topic)


async def run_projector(settings: ProjectorSettings) -> None:
    config = projector_config(settings)
    stop = asyncio.Event()
    stop_on_signals(stop)
    async with AsyncExitStack() as resources:
        pool = await _pool(resources, settings, stop, migrate=True)
        publisher = await _publisher(resources, settings.kafka_bootstrap_servers, settings.dlq_topic, "projector", stop)

        def make_consumer() -> AIOKafkaConsumer:
            return AIOKafkaConsumer(
                bootstrap_servers=settings.kafka_bootstrap_servers,
                group_id=None,
                enable_auto_commit=False,
                # Never jump over records silently: an offset out of range is a gap the projector reports.
                auto_offset_reset="none",
            )

        consumer = await _consumer(resources, make_consumer, stop)

        async def topic_partitions() -> list[TopicPartition]:
            return [
                *(await wait_for_partitions(consumer, settings.jobs_topic)),
                *(await wait_for_partitions(consumer, settings.nodes_topic)),
            ]

        partitions = await until_available("the jobs and nodes topics", topic_partitions, stop, (BrokerUnavailable,))
        consumer.assign(partitions)
        dead_letter = DeadLetterSender(publisher, settings.dlq_topic, f"projector:{config.name}")
        log.info("projector started", partitions=len(partitions), name=config.name)
        await Projector(config, pool, consumer, partitions, dead_letter).run(stop)
    log.info("projector stopped")


def sweeper_config(settings: SweeperSettings) -> SweeperConfig:
    return SweeperConfig(
        stale_after_s=settings.stale_after_s,
        stale_factor=settings.stale_factor,
        min_expected_s=settings.stale_min_s,
        sweep_interval_s=settings.sweep_interval_s,
        blob_grace_s=settings.sweep_blob_grace_s,
    )


async def run_sweeper(settings: SweeperSettings) -> None:
    stop = asyncio.Event()
    stop_on_signals(stop)
    instance = _instance()
    async with AsyncExitStack() as resources:
        serve_metrics(settings.metrics_host, settings.metrics_port)
        pool = await _pool(resources, settings, stop, migrate=False)
        publisher = await _publisher(resources, settings.kafka_bootstrap_servers, settings.jobs_topic, instance, stop)

        def make_consumer() -> AIOKafkaConsumer:
            return AIOKafkaConsumer(
                bootstrap_servers=settings.kafka_bootstrap_servers, group_id=None, enable_auto_commit=False
            )

        consumer = await _consumer(resources, make_consumer, stop)
        nodes = await until_available(
            "the nodes topic", lambda: wait_for_partitions(consumer, settings.nodes_topic), stop, (BrokerUnavailable,)
        )
        consumer.assign(nodes)
        blobs = LocalBlobStore(settings.blob_dir)

        async def remove_blob(ref: AudioRef, idle_s: float) -> bool:
            return await asyncio.to_thread(blobs.remove_unused, ref, idle_s)

        book = HeartbeatBook()
        sweeper = Sweeper(
            sweeper_config(settings),
            AdvisoryLeadership(settings.database_url, settings.database_schema),
            PostgresSweeperStore(pool),
            book,
            publisher,
            Producer(service="sweeper", instance=instance),
            remove_blob,
        )
        log.info("sweeper started", stale_after_s=settings.stale_after_s)
        tasks = OwnedTasks()
        tasks.start(book.follow(consumer, nodes, stop), "heartbeats")
        try:
            await sweeper.run(stop)
        finally:
            stop.set()
            await tasks.close()
    log.info("sweeper stopped")
