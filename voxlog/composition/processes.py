"""The API, projector, sweeper and standalone node processes."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from datetime import timedelta

import structlog
import uvicorn
from aiokafka.structs import TopicPartition

from consumers.cache_janitor import CacheJanitor
from consumers.cache_only import BacklogSwitch
from consumers.heartbeat import HeartbeatBook
from consumers.sweeper import Sweeper
from consumers.sweeper_store import AdvisoryLeadership, PostgresBacklog, PostgresCacheStore, PostgresSweeperStore
from contracts import Producer
from foundation.blobs import LocalBlobStore, ThreadedBlobShelf
from foundation.dlq import DeadLetterSender
from foundation.errors import BrokerUnavailable
from foundation.job_changes import JobChanges
from foundation.kafka import ReconnectingPublisher, wait_for_partitions
from foundation.kafka_groups import GroupShares
from foundation.lifecycle import OwnedTasks, stop_on_signals, until_available
from foundation.metrics import serve_metrics
from foundation.settings import (
    ApiSettings,
    NodeSettings,
    ProjectorSettings,
    SweeperSettings,
)
from producers.admission import Admission
from producers.app import create_app
from producers.deps import ApiDeps
from producers.document_queries import DocumentReader
from producers.placement import BalancedPlacement
from producers.ports import LogAudit
from producers.queries import ProjectionReader
from producers.submission import Submissions
from projections.job_log import JobLogReader, LogAuditor
from projections.projector import Projector
from tts_node.server import serve_node
from voxlog.composition.configs import janitor_config, limits, projector_config, sweeper_config
from voxlog.composition.resources import (
    instance_name,
    load_configured_engine,
    open_consumer,
    open_database,
    open_publisher,
)
from voxlog.lag_monitor import Consumers, LagMonitor

log = structlog.get_logger("voxlog")


async def run_api(settings: ApiSettings) -> None:
    kafka = settings.kafka_access()
    async with AsyncExitStack() as resources:
        # Nothing is waited for: the API answers from the start, 503 for what is down (the projector
        # owns the schema's migrations).
        pool = await open_database(resources, settings, asyncio.Event(), migrate=False)
        publisher = ReconnectingPublisher(
            kafka,
            settings.jobs_topic,
            client_id="voxlog-api",
            deadline_ms=settings.publish_timeout_ms,
        )
        resources.push_async_callback(publisher.stop)
        placement: BalancedPlacement | None = None
        if settings.job_placement == "balanced":
            workers = GroupShares(kafka, settings.jobs_topic)
            resources.push_async_callback(workers.stop)
            placement = BalancedPlacement(pool, publisher, settings.placement_ttl_s, workers, settings.synth_group)
            resources.push_async_callback(placement.stop)
        document_log = ReconnectingPublisher(
            kafka,
            settings.nodes_topic,
            client_id="voxlog-api-documents",
            deadline_ms=settings.publish_timeout_ms,
        )
        resources.push_async_callback(document_log.stop)
        consumers = Consumers(settings.jobs_topic, settings.synth_group, settings.projector_name, settings.dlq_topic)
        lag = LagMonitor(kafka, pool, consumers, settings.lag_interval_s, settings.lag_stall_after_s)
        changes = JobChanges(settings.database_url.get_secret_value(), settings.database_schema, settings.stream_poll_s)
        reader = ProjectionReader(pool)
        blobs = LocalBlobStore(settings.blob_dir)
        producer = Producer(service="api", instance=instance_name())
        submissions = Submissions(
            reader,
            publisher,
            blobs,
            limits(settings),
            producer,
            admission=Admission(reader, settings.max_backlog_s),
            placement=placement,
            document_log=document_log,
        )
        deps = ApiDeps(
            reader=reader,
            submissions=submissions,
            publisher=publisher,
            blobs=blobs,
            limits=submissions.limits,
            producer=producer,
            audit=LogAudit(
                LogAuditor(
                    JobLogReader(kafka, settings.jobs_topic, within_s=settings.audit_timeout_s),
                    pool,
                    timedelta(seconds=settings.cache_ttl),
                )
            ),
            lag=lag,
            speech_timeout_s=settings.speech_timeout_s,
            changes=changes,
            openai_default_voice=settings.openai_default_voice,
            documents=DocumentReader(pool),
        )
        # The lag monitor lives as long as the app: started with it, stopped (and awaited) at its shutdown.
        stop_lag, tasks = asyncio.Event(), OwnedTasks()

        def start_lag() -> None:
            tasks.start(lag.run(stop_lag), "consumer lag")
            tasks.start(changes.run(stop_lag), "job changes")

        async def stop_lag_monitor() -> None:
            stop_lag.set()
            await tasks.close(grace_s=5)
            await deps.tasks.close(grace_s=5)  # cancellations of abandoned streams still on their way

        app = create_app(deps, on_startup=[start_lag], on_shutdown=[stop_lag_monitor])
        server = uvicorn.Server(
            uvicorn.Config(app, host=settings.api_host, port=settings.api_port, log_config=None, access_log=False)
        )
        await server.serve()  # uvicorn turns SIGTERM into a graceful shutdown


async def run_node(settings: NodeSettings) -> None:
    await serve_node(await load_configured_engine(settings), settings.node_host, settings.node_port)


async def run_projector(settings: ProjectorSettings) -> None:
    config = projector_config(settings)
    kafka = settings.kafka_access()
    stop = asyncio.Event()
    stop_on_signals(stop)
    async with AsyncExitStack() as resources:
        serve_metrics(settings.metrics_host, settings.metrics_port)
        pool = await open_database(resources, settings, stop, migrate=True)
        publisher = await open_publisher(resources, kafka, settings.dlq_topic, "projector", stop)
        consumer = await open_consumer(
            resources,
            kafka,
            stop,
            group_id=None,
            enable_auto_commit=False,
            # Never jump over records silently: an offset out of range is a gap the projector reports.
            auto_offset_reset="none",
        )

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


async def run_sweeper(settings: SweeperSettings) -> None:
    kafka = settings.kafka_access()
    stop = asyncio.Event()
    stop_on_signals(stop)
    instance = instance_name()
    async with AsyncExitStack() as resources:
        serve_metrics(settings.metrics_host, settings.metrics_port)
        pool = await open_database(resources, settings, stop, migrate=False)
        publisher = await open_publisher(resources, kafka, settings.jobs_topic, instance, stop)
        consumer = await open_consumer(resources, kafka, stop, group_id=None, enable_auto_commit=False)
        nodes = await until_available(
            "the nodes topic", lambda: wait_for_partitions(consumer, settings.nodes_topic), stop, (BrokerUnavailable,)
        )
        consumer.assign(nodes)
        blobs = LocalBlobStore(settings.blob_dir)

        shelf = ThreadedBlobShelf(blobs)
        backlog = PostgresBacklog(pool)
        producer = Producer(service="sweeper", instance=instance)
        janitor = CacheJanitor(janitor_config(settings), PostgresCacheStore(pool), shelf, publisher, producer)

        book = HeartbeatBook()
        sweeper = Sweeper(
            sweeper_config(settings),
            AdvisoryLeadership(settings.database_url.get_secret_value(), settings.database_schema),
            PostgresSweeperStore(pool),
            book,
            publisher,
            producer,
            shelf.remove_unused,
            janitor,
            BacklogSwitch(
                settings.cache_only_backlog_s,
                backlog.backlog,
                backlog.switched_on,
                lambda event: publisher.publish(event, topic=settings.nodes_topic),
                producer,
            ),
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
