"""The API process: the HTTP service, its publishers, lag monitor and offloaded parsers."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from datetime import timedelta
from typing import Any, Final

import structlog
import uvicorn

from contracts import Producer
from foundation.blobs import LocalBlobStore
from foundation.job_changes import FALLBACK_POLL_S, JobChanges
from foundation.kafka import ReconnectingPublisher
from foundation.kafka_groups import GroupShares
from foundation.lifecycle import OwnedTasks
from foundation.metrics import serve_metrics
from foundation.offload import Offload
from foundation.outbound import parse_networks
from foundation.readiness import mark_started
from foundation.settings import OPENAI_VOICES, ApiSettings
from foundation.shutdown import BoundedServer, Shutdown
from producers.admission import Admission
from producers.app import create_app
from producers.audit_slots import AuditSlots
from producers.auth import KeyBook
from producers.caption_cache import CaptionCache
from producers.census import WorkerCensus
from producers.degradation import DegradedSettings
from producers.deps import ApiDeps
from producers.document_parsing import DocumentParser
from producers.lexicon import Lexicon
from producers.limits_ledger import PgLedger
from producers.parse_slots import TenantParseSlots
from producers.placement import BalancedPlacement
from producers.ports import LogAudit
from producers.quotas import Quotas
from producers.rate_leases import LeasedBuckets
from producers.rate_limit import RateLimiter
from producers.submission import Submissions
from producers.submission_log import SubmissionLog
from producers.webhooks import WebhookRegistry
from projections.job_log import JobLogReader, LogAuditor
from projections.reads.activity import NodeLiveness
from projections.reads.documents import DocumentReader
from projections.reads.jobs import ProjectionReader
from voxlog.composition.configs import STALE_AFTER_S, document_budget, limits, offload_budget, tenant_policies
from voxlog.composition.resources import export_spans, open_database
from voxlog.instance import instance_name
from voxlog.lag_monitor import STALL_AFTER_S, Consumers, LagMonitor
from voxlog.operations import ApiOperations

log = structlog.get_logger("voxlog")

OFFLOADED_MODULES = ("foundation.offload", "producers.document_parsing", "producers.requests")

# What the API is given that is no setting (issue 38, item 3), read when it starts (bench.paced's TUNING
# shortens some for the tests; voxlog.composition.configs says more).
AUTH_CACHE_S: Final = 2.0  # how long the API trusts what it read of a key: a revoked key is refused by every
# API instance at most 2 s after the projector applied the revocation, for one key read in a thousand requests
AUTH_FAILURE_ENTRIES: Final = 10_000  # (client address, key id) pairs whose failed authentications an API
# instance counts (up to 1.5 KiB each, 15 MB): pairs silent for a minute are dropped, past this many the one
# that failed least recently is forgotten
LEXICON_CACHE_S: Final = 1.0  # how long the API keeps what it read of the lexicon: a word added or removed
# applies to every API instance's submissions at most a second after the projector applied it
LAG_INTERVAL_S: Final = 5.0  # how often the API samples consumer lag for /v1/lag and its metrics: a scrape's
# pace; each sample reads every partition's offsets
LAG_STALL_AFTER_S: Final = STALL_AFTER_S  # voxlog.lag_monitor's, as `voxlog lag` judges (the tests shorten it)
NODE_FORGET_AFTER_S: Final = 900.0  # a node silent for this long leaves the dashboard's list (from
# STALE_AFTER_S on it is shown as gone): long enough to see what went, short enough that a list stays short
PLACEMENT_TTL_S: Final = 86400.0  # how long a fingerprint keeps its partition after its last submission: as
# long as a job keeps its audio (VOXLOG_JOB_RETENTION_S' default), so that duplicates meet their original
AUDIT_TIMEOUT_S: Final = 30.0  # how long GET /v1/jobs/{id}/events and ?as_of= may spend reading the log
AUDIT_SLOTS: Final = 4  # reads of the log those requests make at once (each a Kafka consumer), shared between
# tenants: a slot that comes free goes to the waiting tenant holding the fewest
AUDIT_SLOT_WAIT_S: Final = 5.0  # how long such a request waits for a slot, then 503 with Retry-After
PARSE_SLOT_WAIT_S: Final = 10.0  # how long an upload waits for one of its tenant's documents being read to end
# (VOXLOG_PARSE_PER_TENANT), then 429 with Retry-After
CAPTION_CACHE_BYTES: Final = 64 * 2**20  # captions of completed jobs and documents the API keeps (least recently
# asked for out first): built once, off the event loop, they never change
STREAM_SEND_TIMEOUT_S: Final = 30.0  # how long a streamed answer waits for its client to take the next chunk;
# past it the stream is closed, logged and counted (voxlog_streams_stalled_total): a client gone quiet


async def run_api(settings: ApiSettings, *, document_gate: str = "") -> None:
    """`voxlog api`. ``document_gate`` is no setting but a test's hook (a Unix socket each document's parsing
    waits on: producers.document_parsing); only tests/support/gated_api.py passes one."""
    shutdown = Shutdown(settings.shutdown_timeout_s)  # begun by uvicorn's signal handling (BoundedServer)
    await shutdown.run(_api(settings, shutdown, document_gate))


async def _api(settings: ApiSettings, shutdown: Shutdown, document_gate: str) -> None:
    kafka = settings.kafka_access()
    async with AsyncExitStack() as resources:
        export_spans(resources, settings, "api", shutdown)
        # Nothing is waited for: the API answers from the start, 503 for what is down (`voxlog migrate`
        # and the projector own the schema's migrations).
        serve_metrics(settings.metrics_host, settings.metrics_port)
        pool = await open_database(resources, settings, shutdown, migrate=False)
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
            placement = BalancedPlacement(pool, publisher, PLACEMENT_TTL_S, workers, settings.synth_group)
            resources.push_async_callback(placement.stop)
        document_log = ReconnectingPublisher(
            kafka,
            settings.control_topic,
            client_id="voxlog-api-documents",
            deadline_ms=settings.publish_timeout_ms,
        )
        resources.push_async_callback(document_log.stop)
        consumers = Consumers(settings.jobs_topic, settings.synth_group, settings.projector_name, settings.dlq_topic)
        lag = LagMonitor(kafka, pool, consumers, LAG_INTERVAL_S, LAG_STALL_AFTER_S)
        changes = JobChanges(settings.database_url.get_secret_value(), settings.database_schema, FALLBACK_POLL_S)
        reader = ProjectionReader(pool, NodeLiveness(STALE_AFTER_S, NODE_FORGET_AFTER_S))
        blobs = LocalBlobStore(settings.blob_dir)
        producer = Producer(service="api", instance=instance_name())
        api_limits = limits(settings)
        ledger, policies = PgLedger(pool), tenant_policies(settings)
        rate_buckets = LeasedBuckets(ledger)  # each key's tokens, a block at a time (given back at shutdown)
        quotas = Quotas(ledger, policies)  # judged with a lease of each tenant's room (settled at shutdown)
        # Documents and large submissions are parsed and validated in processes of their own (their fork
        # server imports these modules once), never on the event loop.
        offload = Offload(offload_budget(settings), settings.offload_processes, OFFLOADED_MODULES)
        resources.push_async_callback(offload.close)
        await asyncio.to_thread(offload.start)
        submissions = Submissions(
            reader,
            SubmissionLog(publisher, api_limits.max_record_bytes, placement, document_log),
            blobs,
            api_limits,
            producer,
            admission=Admission(reader, settings.max_backlog_s),
            cache_scope=settings.cache_scope,
            offload=offload,
            quotas=quotas,
            degraded=DegradedSettings(
                settings.degraded_sample_rate, settings.degraded_speed_factor, api_limits.max_speed
            ),
            lexicon=Lexicon(reader, LEXICON_CACHE_S),
            drafts=placement,  # placed by the submission's lookup (None, by key: at publish)
        )
        if settings.auth == "off":
            log.warning("VOXLOG_AUTH=off: anyone who reaches the API can read and cancel every job; for a laptop only")
        keys = (
            KeyBook(reader, AUTH_CACHE_S, settings.auth_failures_per_minute, AUTH_FAILURE_ENTRIES)
            if settings.auth == "on"
            else None
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
                    JobLogReader(kafka, settings.jobs_topic, within_s=AUDIT_TIMEOUT_S, at_once=AUDIT_SLOTS),
                    pool,
                    timedelta(seconds=settings.cache_ttl),
                )
            ),
            audit_slots=AuditSlots(AUDIT_SLOTS, AUDIT_SLOT_WAIT_S),
            captions=CaptionCache(CAPTION_CACHE_BYTES),
            lag=lag,
            speech_timeout_s=settings.speech_timeout_s,
            stream_send_timeout_s=STREAM_SEND_TIMEOUT_S,
            changes=changes,
            openai_default_voice=settings.openai_default_voice,
            openai_voices={**OPENAI_VOICES, **settings.openai_voices},  # the names it gives replace theirs
            documents=DocumentReader(pool),
            keys=keys,
            limiter=RateLimiter(rate_buckets, policies) if keys is not None else None,
            policies=policies,
            document_parser=DocumentParser(
                offload,
                document_budget(settings, document_gate),
                TenantParseSlots(settings.parse_per_tenant, PARSE_SLOT_WAIT_S),
            ),
            operations=ApiOperations(pool, publisher, document_log, producer),
            webhooks=WebhookRegistry(
                pool,
                document_log,
                producer,
                settings.webhook_signing_key.get_secret_value().encode(),
                parse_networks(settings.webhook_allowed_networks),
            ),
        )
        # The lag monitor lives as long as the app: started with it, stopped (and awaited) at its shutdown.
        stop_lag, tasks = asyncio.Event(), OwnedTasks()

        def start_lag() -> None:
            mark_started()  # the metrics port's /readyz (the API's own /readyz checks its dependencies)
            tasks.start(lag.run(stop_lag), "consumer lag")
            tasks.start(changes.run(stop_lag), "job changes")
            tasks.start(WorkerCensus(reader.live_workers, reader.worker_queues).run(stop_lag), "worker census")
            tasks.start(rate_buckets.run(stop_lag), "rate tokens given back")
            tasks.start(quotas.run(stop_lag), "quota leases settled")

        async def stop_lag_monitor() -> None:
            stop_lag.set()
            await tasks.close(grace_s=min(5.0, shutdown.remaining_s()))
            # Cancellations of abandoned streams still on their way.
            await deps.tasks.close(grace_s=min(5.0, shutdown.remaining_s()))

        app = create_app(deps, on_startup=[start_lag], on_shutdown=[stop_lag_monitor])
        server = BoundedServer(server_config(app, settings), shutdown)
        await server.serve()  # uvicorn turns SIGTERM into a graceful shutdown, within the shutdown's time


def server_config(app: Any, settings: ApiSettings) -> uvicorn.Config:
    """How uvicorn serves the API. The client address every part of the app sees (the failed-authentication
    count's, ``request.client``) is uvicorn's: from a peer in ``VOXLOG_TRUSTED_PROXIES`` the last address of
    X-Forwarded-For that is not itself a trusted proxy, from any other peer the peer's own. Empty, no header is
    trusted (uvicorn's own default would trust 127.0.0.1, or $FORWARDED_ALLOW_IPS)."""
    trusted = settings.trusted_proxies
    return uvicorn.Config(
        app,
        host=settings.api_host,
        port=settings.api_port,
        log_config=None,
        access_log=False,
        proxy_headers=bool(trusted),
        forwarded_allow_ips=trusted or None,
    )
