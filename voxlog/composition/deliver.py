"""The delivery process, `voxlog deliver`: webhook deliveries made from the jobs' outcomes and tried.

Every copy reads the jobs topic in the ``voxlog-webhooks.<jobs topic>`` group (its share of the partitions; a new group
from the start: an endpoint is told only of outcomes after it was registered) and records
each outcome's deliveries (:mod:`consumers.webhook_reader`); the copy that holds the delivery lock tries the
deliveries due (:mod:`consumers.webhook_dispatch`), the others stand by and take over when it goes.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Final

import structlog

from consumers.leadership import AdvisoryLeadership
from consumers.webhook_dispatch import Dispatcher
from consumers.webhook_reader import OutcomeReader, group_of
from consumers.webhook_retries import RetrySchedule
from consumers.webhook_sender import Sender
from contracts import Producer
from foundation.kafka import ReconnectingPublisher
from foundation.lifecycle import OwnedTasks
from foundation.metrics import serve_metrics
from foundation.outages import Outage
from foundation.outbound import parse_networks
from foundation.readiness import mark_started
from foundation.settings import DeliverySettings
from foundation.shutdown import Shutdown
from projections.reads.webhooks import PgWebhookStore
from voxlog.composition.resources import export_spans, open_consumer, open_database
from voxlog.instance import instance_name

log = structlog.get_logger("voxlog")
LOCK: Final = 0x77686B73  # "whks": the delivery lock, beside the sweeper's


async def run_deliver(settings: DeliverySettings) -> None:
    shutdown = Shutdown(settings.shutdown_timeout_s)
    shutdown.on_signals()
    await shutdown.run(_deliver(settings, shutdown))


async def _deliver(settings: DeliverySettings, shutdown: Shutdown) -> None:
    kafka, stop, instance = settings.kafka_access(), shutdown.stop, instance_name()
    signing_key = settings.webhook_signing_key.get_secret_value().encode()
    async with AsyncExitStack() as resources:
        export_spans(resources, settings, "deliver", shutdown)
        serve_metrics(settings.metrics_host, settings.metrics_port)
        pool = await open_database(resources, settings, shutdown, migrate=False, await_migrated=True)
        control = ReconnectingPublisher(
            kafka, settings.control_topic, client_id=f"{instance}-webhooks", deadline_ms=15_000
        )
        resources.push_async_callback(control.stop)
        consumer = await open_consumer(
            resources,
            kafka,
            shutdown,
            group_id=group_of(settings.jobs_topic),
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        consumer.subscribe([settings.jobs_topic])
        store, producer = PgWebhookStore(pool), Producer(service="deliver", instance=instance)
        outage = Outage("PostgreSQL or Kafka (webhook deliveries)")
        sender = Sender(parse_networks(settings.webhook_allowed_networks))
        resources.push_async_callback(sender.close)
        dispatcher = Dispatcher(
            store,
            sender,
            control,
            producer,
            signing_key,
            RetrySchedule(),
            AdvisoryLeadership(settings.database_url.get_secret_value(), settings.database_schema, outage, LOCK),
        )
        reader = OutcomeReader(consumer, store, control, producer, outage)
        if not signing_key:
            log.warning("VOXLOG_WEBHOOK_SIGNING_KEY is empty: no endpoint can be registered, nothing is delivered")
        log.info("delivery process started")
        mark_started()
        tasks = OwnedTasks()
        tasks.start(reader.run(stop), "outcomes")
        try:
            await dispatcher.run(stop)
        finally:
            stop.set()
            await tasks.close(grace_s=shutdown.remaining_s())
    log.info("delivery process stopped")
