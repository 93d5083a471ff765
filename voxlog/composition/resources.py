"""What the processes open: each through the caller's ``AsyncExitStack``, waiting for a dependency that is down.

Each is closed as a step of the process's bounded stop (:class:`foundation.shutdown.Shutdown`): within the
time left, abandoned at the deadline.
"""

from __future__ import annotations

import asyncio
import os
from contextlib import AsyncExitStack
from typing import Any

import asyncpg
import structlog
from aiokafka import AIOKafkaConsumer

from foundation import tracing
from foundation.db import open_pool
from foundation.errors import BrokerUnavailable
from foundation.kafka import KafkaEventPublisher
from foundation.kafka_access import KafkaAccess
from foundation.outages import until_available
from foundation.settings import DatabaseSettings, EngineSettings, TracingSettings
from foundation.shutdown import Shutdown
from projections.errors import DatabaseUnavailable, MigrationsPending
from projections.migrations import check_migrated, migrate_database
from tts_node import Engine, load_engine
from tts_node.engine_thread import EngineThread
from tts_node.fifo import SynthesisQueue
from voxlog.composition.batch_sizes import choose_decoder_at_start
from voxlog.instance import instance_name

log = structlog.get_logger("voxlog")


def export_spans(resources: AsyncExitStack, settings: TracingSettings, service: str, shutdown: Shutdown) -> None:
    """The process's spans to ``VOXLOG_OTLP_ENDPOINT`` (nowhere when it is empty), the last of them sent as the
    process's final closing step (pushed first, closed last: after the producer's flush)."""
    if not settings.otlp_endpoint:
        return
    # Imported here: only a process that sends spans pays for the OpenTelemetry SDK's import.
    from foundation.otel import span_sink

    sink = span_sink(settings.otlp_endpoint, service, instance_name())
    if sink is None:
        return
    tracing.export_spans_to(sink)
    log.info("exporting spans", endpoint=settings.otlp_endpoint)
    resources.push_async_callback(shutdown.closing("sending the last spans", lambda: asyncio.to_thread(sink.close)))


async def open_database(
    resources: AsyncExitStack,
    settings: DatabaseSettings,
    shutdown: Shutdown,
    *,
    migrate: bool,
    await_migrated: bool = False,
) -> asyncpg.Pool:
    """A lazy pool (no connection until one is needed); with ``migrate``, once the schema is migrated, and with
    ``await_migrated`` instead, once another process has migrated it; waiting for PostgreSQL as long as it takes."""
    url, schema = settings.database_url.get_secret_value(), settings.database_schema
    if migrate:
        await until_available(
            "PostgreSQL", lambda: migrate_database(url, schema), shutdown.stop, (DatabaseUnavailable,)
        )
    elif await_migrated:
        await until_available(
            "the schema's migrations",
            lambda: check_migrated(url, schema),
            shutdown.stop,
            (DatabaseUnavailable, MigrationsPending),
        )
    pool = await open_pool(settings.database_url.get_secret_value(), settings.database_schema, min_size=0, max_size=10)
    resources.push_async_callback(shutdown.closing("closing the PostgreSQL pool", pool.close))
    return pool


async def open_publisher(
    resources: AsyncExitStack, kafka: KafkaAccess, topic: str, client_id: str, shutdown: Shutdown
) -> KafkaEventPublisher:
    """A started producer, once Kafka answers (a stopped aiokafka producer cannot start again: a new one per try)."""

    async def started() -> KafkaEventPublisher:
        publisher = KafkaEventPublisher(kafka, topic, client_id=client_id)
        await publisher.start()
        return publisher

    publisher = await until_available("Kafka", started, shutdown.stop, (BrokerUnavailable,))
    shutdown.holds("records handed to Kafka", publisher.describe_unacknowledged)
    resources.push_async_callback(shutdown.closing("flushing the Kafka producer", publisher.stop))
    return publisher


async def open_consumer(
    resources: AsyncExitStack, kafka: KafkaAccess, shutdown: Shutdown, **options: Any
) -> AIOKafkaConsumer:
    """A started consumer with aiokafka's ``options``, once Kafka answers (a new one per try, like the producer)."""

    async def started() -> AIOKafkaConsumer:
        consumer = kafka.consumer(**options)
        try:
            await kafka.start(consumer, "cannot connect the consumer")
        except BrokerUnavailable:
            raise  # stopped already
        except BaseException:
            await consumer.stop()
            raise
        return consumer

    consumer = await until_available("Kafka", started, shutdown.stop, (BrokerUnavailable,))
    resources.push_async_callback(shutdown.closing("leaving Kafka (the consumer)", consumer.stop))
    return consumer


def open_engine_thread(resources: AsyncExitStack) -> EngineThread:
    """The thread every call of the process's engine runs on (:mod:`tts_node.engine_thread`), closed last."""
    thread = EngineThread()
    resources.callback(thread.close)
    return thread


async def load_configured_engine(settings: EngineSettings, thread: EngineThread) -> Engine:
    """The one model of this process, on its device, loaded, warmed up and its decoder chosen on ``thread``."""
    if settings.nice:
        os.nice(settings.nice)  # synthesis should yield the CPU to the broker and the API
    engine = await thread.run(
        load_engine,
        settings.engine,
        device=settings.device,
        threads=settings.threads,
        cache_dir=settings.model_cache_dir,
        model_dir=settings.kokoro_dir,
        voices_dir=settings.voices_dir,
        decoder="eager" if settings.decoder == "auto" else settings.decoder,
    )
    if settings.decoder == "auto":
        await thread.run(choose_decoder_at_start, engine)
    return engine


async def open_fifo(
    resources: AsyncExitStack, model: Engine, grace_s: float, shutdown: Shutdown, thread: EngineThread
) -> SynthesisQueue:
    fifo = SynthesisQueue(model, thread)
    await fifo.start()
    resources.push_async_callback(shutdown.closing("stopping the engine's queue", lambda: fifo.stop(grace_s=grace_s)))
    return fifo
