"""The worker process: one model on one device, a member of its engine's and model version's group."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Final

import structlog

from consumers.heartbeat import beat, heartbeat
from consumers.job_runner import JobRunner
from consumers.segment_reuse import SegmentCache
from consumers.worker import POLL_BUDGET_S, SynthWorker
from consumers.worker_activity import Activity
from contracts import NodeAnnounced, NodeAnnouncedPayload, NodeHeartbeat, Producer, node_event, utc_now
from foundation.blobs import LocalBlobStore
from foundation.dlq import DeadLetterSender
from foundation.errors import BrokerUnavailable
from foundation.kafka import KafkaEventPublisher
from foundation.kafka_groups import synth_group
from foundation.lifecycle import OwnedTasks, dump_tasks_on_sigusr1
from foundation.metrics import ENGINE_QUEUE_DEPTH, serve_metrics
from foundation.outages import until_available
from foundation.readiness import mark_started
from foundation.settings import WorkerSettings
from foundation.shutdown import Shutdown
from projections.reads.worker import PostgresResultLookup
from voxlog.composition.batch_sizes import forward_sizes, measure_forwards
from voxlog.composition.batch_sizes import publish as publish_sizes
from voxlog.composition.configs import retry_policy, worker_config
from voxlog.composition.resources import (
    export_spans,
    load_configured_engine,
    open_consumer,
    open_database,
    open_engine_thread,
    open_fifo,
    open_publisher,
)
from voxlog.engine_adapter import TtsNodeSpeechEngine

log = structlog.get_logger("voxlog")

HEARTBEAT_S: Final = 2.0  # how often a worker says it is alive and what it holds (NodeHeartbeat): well inside
# the 15 s after which it is deemed silent (configs.STALE_AFTER_S), at 500 records a second for 1,000 workers
FETCH_MAX_WAIT_MS: Final = 50  # longest the broker holds a fetch with nothing new. The client fetches a
# partition it just drained only after the fetch in flight returns, so this bounds how late a job there is seen
# (Kafka's default, 500, let a short request wait behind a batch job more); an idle worker fetches this often


async def run_worker(settings: WorkerSettings) -> None:
    shutdown = Shutdown(settings.shutdown_timeout_s)
    shutdown.on_signals()
    dump_tasks_on_sigusr1()
    await shutdown.run(_worker(settings, shutdown))


async def _worker(settings: WorkerSettings, shutdown: Shutdown) -> None:
    stop = shutdown.stop
    async with AsyncExitStack() as resources:
        export_spans(resources, settings, "worker", shutdown)
        thread = open_engine_thread(resources)
        model = await load_configured_engine(settings, thread)
        engine = TtsNodeSpeechEngine(model)
        # Before the FIFO, the broker and the database: nothing else calls the engine while it is measured.
        measured = await thread.run(measure_forwards, settings, model)
        sizes = forward_sizes(settings, engine.description.device, measured)
        publish_sizes(sizes)
        config = worker_config(settings, engine.description, sizes)
        producer = Producer(service="worker", instance=config.worker_id)
        fifo = await open_fifo(resources, model, settings.shutdown_grace_s, shutdown, thread)
        ENGINE_QUEUE_DEPTH.set_function(lambda: fifo.depth)
        serve_metrics(settings.metrics_host, settings.metrics_port)
        pool = await open_database(resources, settings, shutdown, migrate=False)
        publisher = await open_publisher(resources, config.kafka, settings.jobs_topic, config.worker_id, shutdown)
        await until_available(
            "Kafka (announcing this worker)",
            lambda: _announce(publisher, settings.control_topic, config.worker_id, producer, engine),
            stop,
            (BrokerUnavailable,),
        )
        activity = Activity()
        lookup = PostgresResultLookup(pool)
        runner = JobRunner(
            engine,
            LocalBlobStore(settings.blob_dir),
            publisher,
            producer,
            config.worker_id,
            retry_policy(settings),
            fifo.call,
            activity,
            host=config.host,
            segments=SegmentCache(lookup) if settings.segment_cache else None,
        )
        dead_letter = DeadLetterSender(publisher, settings.dlq_topic, f"worker:{config.worker_id}")

        consumer = await open_consumer(
            resources,
            config.kafka,
            shutdown,
            group_id=synth_group(settings.synth_group, config.engine, config.model_version),
            client_id=config.worker_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            # The loop does not poll while a job synthesizes: allow the longest job plus the
            # handling budget after which it polls again (consumers.worker.POLL_BUDGET_S), and give
            # a revocation callback its grace period plus a segment before eviction.
            max_poll_interval_ms=int((settings.max_job_s + POLL_BUDGET_S + 30) * 1000),
            rebalance_timeout_ms=int((config.rebalance_grace_s + 60) * 1000),
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
        )
        worker = SynthWorker(config, consumer, runner, lookup, dead_letter, cancels=lookup, outlooks=lookup)
        shutdown.holds("the job in hand", lambda: _in_hand(activity))
        shutdown.holds("offsets", worker.partitions.describe_uncommitted)
        log.info(
            "worker started",
            worker_id=config.worker_id,
            engine=engine.description.name,
            device=settings.device,
            forward_segments=sizes.segments,
            forward_padded_ids=sizes.padded_ids,
            held_claims=sizes.held,
        )
        mark_started()
        started_at = utc_now()

        async def send_heartbeat(event: NodeHeartbeat) -> object:
            return await publisher.publish(event, topic=settings.control_topic)

        def build_heartbeat() -> NodeHeartbeat:
            return heartbeat(config.worker_id, engine.description, activity, producer, started_at, worker.waiting)

        tasks = OwnedTasks()
        tasks.start(beat(send_heartbeat, build_heartbeat, HEARTBEAT_S, stop), "heartbeat")
        try:
            await worker.run(stop)
        finally:
            stop.set()  # ends the heartbeat too
            await tasks.close(grace_s=shutdown.remaining_s())
    log.info("worker stopped", worker_id=config.worker_id)


def _in_hand(activity: Activity) -> str | None:
    current = activity.current
    if current is None:
        return None
    return f"job {current.job_id} attempt {current.attempt} (its claim goes stale: the sweeper releases it)"


async def _announce(
    publisher: KafkaEventPublisher, topic: str, worker_id: str, producer: Producer, engine: TtsNodeSpeechEngine
) -> None:
    d = engine.description
    now = utc_now()
    announcement = node_event(
        NodeAnnounced,
        producer,
        NodeAnnouncedPayload(
            worker_id=worker_id,
            engine=d.name,
            model_version=d.model_version,
            device=d.device,
            sample_rate=d.sample_rate,
            voices=d.voices,
            languages=d.languages,
            started_at=now,
        ),
        at=now,
    )
    await publisher.publish(announcement, topic=topic)
