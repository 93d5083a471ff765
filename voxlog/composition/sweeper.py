"""The sweeper process: stale claims released, the cache kept under its cap, the backlog switches."""

from __future__ import annotations

from contextlib import AsyncExitStack

import structlog

from consumers.backlog_switch import BacklogSwitch
from consumers.cache_janitor import CacheJanitor
from consumers.heartbeat import HeartbeatBook
from consumers.leadership import AdvisoryLeadership
from consumers.sweeper import Sweeper
from contracts import Producer
from foundation.blobs import LocalBlobStore, ThreadedBlobShelf
from foundation.errors import BrokerUnavailable
from foundation.kafka import wait_for_partitions
from foundation.lifecycle import OwnedTasks
from foundation.metrics import serve_metrics
from foundation.outages import Outage, until_available
from foundation.readiness import mark_started
from foundation.settings import SweeperSettings
from foundation.shutdown import Shutdown
from projections.reads.sweeper import PostgresBacklog, PostgresCacheStore, PostgresSweeperStore
from voxlog.composition.configs import backlog_thresholds, janitor_config, sweeper_config
from voxlog.composition.resources import export_spans, open_consumer, open_database, open_publisher
from voxlog.instance import instance_name

log = structlog.get_logger("voxlog")


async def run_sweeper(settings: SweeperSettings) -> None:
    shutdown = Shutdown(settings.shutdown_timeout_s)
    shutdown.on_signals()
    await shutdown.run(_sweeper(settings, shutdown))


async def _sweeper(settings: SweeperSettings, shutdown: Shutdown) -> None:
    kafka = settings.kafka_access()
    stop = shutdown.stop
    instance = instance_name()
    async with AsyncExitStack() as resources:
        export_spans(resources, settings, "sweeper", shutdown)
        serve_metrics(settings.metrics_host, settings.metrics_port)
        pool = await open_database(resources, settings, shutdown, migrate=False)
        publisher = await open_publisher(resources, kafka, settings.jobs_topic, instance, shutdown)
        consumer = await open_consumer(resources, kafka, shutdown, group_id=None, enable_auto_commit=False)
        control = await until_available(
            "the control topic",
            lambda: wait_for_partitions(consumer, settings.control_topic),
            stop,
            (BrokerUnavailable,),
        )
        consumer.assign(control)
        blobs = LocalBlobStore(settings.blob_dir)

        shelf = ThreadedBlobShelf(blobs)
        backlog = PostgresBacklog(pool)
        producer = Producer(service="sweeper", instance=instance)
        janitor = CacheJanitor(janitor_config(settings), PostgresCacheStore(pool), shelf, publisher, producer)

        book = HeartbeatBook()
        outage = Outage("PostgreSQL or Kafka (the sweeper)")
        config = sweeper_config()
        sweeper = Sweeper(
            config,
            AdvisoryLeadership(settings.database_url.get_secret_value(), settings.database_schema, outage),
            PostgresSweeperStore(pool),
            book,
            publisher,
            producer,
            shelf.remove_unused,
            janitor,
            [
                BacklogSwitch(
                    mode,
                    threshold_s,
                    backlog.backlog,
                    backlog.switched_on,
                    lambda event: publisher.publish(event, topic=settings.control_topic),
                    producer,
                )
                for mode, threshold_s in backlog_thresholds(settings)
            ],
            outage,
        )
        log.info("sweeper started", stale_after_s=config.stale_after_s)
        mark_started()
        tasks = OwnedTasks()
        tasks.start(book.follow(consumer, control, stop), "heartbeats")
        try:
            await sweeper.run(stop)
        finally:
            stop.set()
            await tasks.close(grace_s=shutdown.remaining_s())
    log.info("sweeper stopped")
