"""The projector process: the log applied to PostgreSQL, alone or as one shard of a group."""

from __future__ import annotations

from contextlib import AsyncExitStack

import structlog
from aiokafka.structs import TopicPartition

from foundation.dlq import DeadLetterSender
from foundation.errors import BrokerUnavailable
from foundation.kafka import wait_for_partitions
from foundation.metrics import serve_metrics
from foundation.outages import until_available
from foundation.readiness import mark_started
from foundation.settings import ProjectorSettings
from foundation.shutdown import Shutdown
from projections.projector import Projector
from projections.shards import ShardListener, Shards, group_options
from voxlog.composition.configs import projector_config
from voxlog.composition.resources import export_spans, open_consumer, open_database, open_publisher

log = structlog.get_logger("voxlog")


async def run_projector(settings: ProjectorSettings) -> None:
    shutdown = Shutdown(settings.shutdown_timeout_s)
    shutdown.on_signals()
    await shutdown.run(_projector(settings, shutdown))


async def _projector(settings: ProjectorSettings, shutdown: Shutdown) -> None:
    config = projector_config(settings)
    kafka = settings.kafka_access()
    stop = shutdown.stop
    async with AsyncExitStack() as resources:
        export_spans(resources, settings, "projector", shutdown)
        serve_metrics(settings.metrics_host, settings.metrics_port)
        # The schema's migrations are the api image's: a projector started from a worker image waits for them.
        pool = await open_database(resources, settings, shutdown, migrate=settings.migrate, await_migrated=True)
        publisher = await open_publisher(resources, kafka, settings.dlq_topic, "projector", shutdown)
        sharded = bool(settings.projector_group)
        options = (
            group_options(settings.projector_group)
            if sharded
            # Never jump over records silently: an offset out of range is a gap the projector reports.
            else {"group_id": None, "enable_auto_commit": False, "auto_offset_reset": "none"}
        )
        consumer = await open_consumer(resources, kafka, shutdown, **options)

        async def topic_partitions() -> list[TopicPartition]:
            return [
                *(await wait_for_partitions(consumer, settings.jobs_topic)),
                *(await wait_for_partitions(consumer, settings.control_topic)),
            ]

        partitions = await until_available("the jobs and control topics", topic_partitions, stop, (BrokerUnavailable,))
        if sharded:
            shards = Shards(consumer, grouped=True)
            consumer.subscribe([settings.jobs_topic, settings.control_topic], listener=ShardListener(shards))
        else:
            shards = Shards(consumer, partitions)
            consumer.assign(partitions)
        dead_letter = DeadLetterSender(publisher, settings.dlq_topic, f"projector:{config.name}")
        log.info("projector started", partitions=len(partitions), name=config.name, group=settings.projector_group)
        mark_started()
        await Projector(config, pool, consumer, partitions, dead_letter, shards).run(stop)
    log.info("projector stopped")
