"""Settings become the services' config objects here, and nowhere else."""

from __future__ import annotations

import socket
from datetime import timedelta
from typing import TYPE_CHECKING

import structlog

from consumers.cache_janitor import JanitorConfig
from consumers.job_runner import RetryPolicy
from consumers.sweeper import SweeperConfig
from consumers.worker_config import WorkerConfig
from contracts import ServiceMode
from contracts.engine_info import EngineInfo
from foundation.job_changes import changes_channel
from foundation.offload import Budget
from foundation.settings import ApiSettings, ProjectorSettings, SweeperSettings, WorkerSettings
from producers.tenant_limits import Policies, TenantLimits
from projections.linger import Linger
from projections.projector import ProjectorConfig

if TYPE_CHECKING:
    from producers.document_parsing import DocumentBudget
    from producers.requests import Limits

log = structlog.get_logger("voxlog")


def tenant_policies(settings: ApiSettings) -> Policies:
    default = TenantLimits(
        rate_per_s=settings.limit_rate_per_s,
        rate_burst=settings.limit_rate_burst,
        max_live_jobs=settings.limit_max_live_jobs,
        chars_per_day=settings.limit_chars_per_day,
        chars_per_month=settings.limit_chars_per_month,
        audio_s_per_day=settings.limit_audio_s_per_day,
        audio_s_per_month=settings.limit_audio_s_per_month,
    )
    return Policies.from_settings(default, settings.tenant_limits)


def limits(settings: ApiSettings) -> Limits:
    # The request modules are the API's (validation, SSML, audio formats): imported where the API's configs
    # are made, so that the worker, projector and sweeper, which import this module too, do not load them.
    from producers.requests import Limits

    return Limits(
        settings.max_text_chars,
        settings.min_speed,
        settings.max_speed,
        settings.default_engine,
        settings.max_batch,
        settings.job_retention_s,
        settings.max_record_bytes,
        settings.max_request_audio_s,
    )


def document_budget(settings: ApiSettings, gate: str = "") -> DocumentBudget:
    """The document limits of ``settings``; ``gate`` is a test's hook, no setting (tests/support/gated_api.py)."""
    from producers.document_parsing import DocumentBudget  # the API's only, as in limits()

    return DocumentBudget(
        max_bytes=settings.max_document_bytes,
        max_chars=settings.max_document_chars,
        part_chars=min(settings.document_part_chars, settings.max_text_chars),
        max_parts=settings.max_document_parts,
        max_chapters=settings.max_document_chapters,
        max_unpacked_bytes=settings.max_epub_unpacked_bytes,
        cpu_s_base=settings.parse_cpu_s_base,
        cpu_s_per_mib=settings.parse_cpu_s_per_mib,
        gate=gate,
    )


def offload_budget(settings: ApiSettings) -> Budget:
    return Budget(cpu_s=settings.offload_cpu_s, memory_bytes=settings.offload_memory_mb * 2**20)


GPU_BATCH = 32  # the best sentence batch measured on one H200 (docs/benchmarks.md, GPU section)
CPU_HELD_CLAIMS = 4  # ADR 0002: a short job waits at most about a segment of each of the others


def worker_id_of(settings: WorkerSettings) -> str:
    return settings.worker_id or f"{socket.gethostname()}-{settings.device}"


def worker_config(settings: WorkerSettings, engine: EngineInfo | None = None) -> WorkerConfig:
    batch, held = batch_and_claims(settings, engine.device if engine else settings.device)
    return WorkerConfig(
        worker_id=worker_id_of(settings),
        host=socket.gethostname(),
        kafka=settings.kafka_access(),
        jobs_topic=settings.jobs_topic,
        cache_ttl=timedelta(seconds=settings.cache_ttl),
        shutdown_grace_s=settings.shutdown_grace_s,
        rebalance_grace_s=settings.rebalance_grace_s,
        commit_interval_s=settings.commit_interval_s,
        watchdog_factor=settings.watchdog_factor,
        watchdog_min_s=settings.watchdog_min_s,
        interactive_per_batch=settings.interactive_per_batch,
        batch_lookahead=settings.batch_lookahead,
        held_claims=held,
        batch=batch,
        tenant_weights=settings.tenant_weights,
        fair_share_half_life_s=settings.fair_share_half_life_s,
        aging_s=settings.scheduling_aging_s,
        engine=engine.name if engine else "",
        model_version=engine.model_version if engine else "",
    )


def batch_and_claims(settings: WorkerSettings, device: str) -> tuple[int, int]:
    """Segments a forward carries and claims held: as set, or by the device (one at a time on a CPU, where
    batching was slower; batches on a GPU, with twice as many claims held as a batch takes)."""
    gpu = device.startswith("cuda")
    batch = settings.batch_segments or (GPU_BATCH if gpu else 1)
    held = settings.held_claims or (2 * batch if gpu else CPU_HELD_CLAIMS)
    return batch, held


def retry_policy(settings: WorkerSettings) -> RetryPolicy:
    return RetryPolicy(settings.max_attempts, settings.retry_base_delay_s)


def projector_config(settings: ProjectorSettings) -> ProjectorConfig:
    return ProjectorConfig(
        name=settings.projector_name,
        jobs_topic=settings.jobs_topic,
        nodes_topic=settings.nodes_topic,
        cache_ttl=timedelta(seconds=settings.cache_ttl),
        max_batch=settings.projector_batch,
        linger=Linger(settings.projector_linger_ms / 1000, settings.projector_linger_backlog),
        changes_channel=changes_channel(settings.database_schema),
    )


def janitor_config(settings: SweeperSettings) -> JanitorConfig:
    return JanitorConfig(
        job_retention=timedelta(seconds=settings.job_retention_s),
        max_bytes=settings.cache_max_bytes,
        interval_s=settings.cache_sweep_interval_s,
    )


def backlog_thresholds(settings: SweeperSettings) -> list[tuple[ServiceMode, float]]:
    """Each service mode the sweeper switches by the backlog, with its threshold (0: never), the milder first."""
    return [("degraded", settings.degrade_backlog_s), ("cache_only", settings.cache_only_backlog_s)]


def sweeper_config(settings: SweeperSettings) -> SweeperConfig:
    return SweeperConfig(
        stale_after_s=settings.stale_after_s,
        stale_factor=settings.stale_factor,
        min_expected_s=settings.stale_min_s,
        sweep_interval_s=settings.sweep_interval_s,
        blob_grace_s=settings.sweep_blob_grace_s,
    )
