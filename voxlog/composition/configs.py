"""Settings become the services' config objects here, and nowhere else.

What a process is given that is no setting (issue 38, item 3: an internal value with a good default, which no
deployment is expected to change) is a named constant here, beside the config it goes into, with why it is
what it is. Each is read when the config is made, not when this module is imported: the tests and the fault
campaigns shorten some of them through their own entry point (``bench.paced``, its ``TUNING``), which sets
them before the process starts; ``voxlog`` itself never changes them.
"""

from __future__ import annotations

import socket
from datetime import timedelta
from typing import TYPE_CHECKING, Final

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
from voxlog.composition.batch_sizes import ForwardSizes, forward_sizes

if TYPE_CHECKING:
    from producers.document_parsing import DocumentBudget
    from producers.requests import Limits

log = structlog.get_logger("voxlog")

# Requests.
MIN_SPEED: Final = 0.25  # the speed range of OpenAI's speech route, which every route takes: the model makes
MAX_SPEED: Final = 4.0  # 0.25 to 2.0 itself, and time-stretches above (pitch preserved)

# Documents: structural bounds under the operator's own limits (VOXLOG_MAX_DOCUMENT_CHARS and _BYTES).
DOCUMENT_PART_CHARS: Final = 1500  # a part is a job: a paragraph, or a long one split at sentence ends; about
# 100 s of audio, so that a document's first audio comes soon and its parts spread over the workers
MAX_DOCUMENT_PARTS: Final = 20_000  # as many jobs as a key may have live (VOXLOG_LIMIT_MAX_LIVE_JOBS's default):
# a document of tiny paragraphs makes no more
MAX_DOCUMENT_CHAPTERS: Final = 500  # far more than a book has: bounds what one upload makes of its headings
MAX_EPUB_UNPACKED_BYTES: Final = 64 * 2**20  # what an EPUB may unpack to, as much as an upload may be at most
# (VOXLOG_MAX_DOCUMENT_BYTES' bound): a zip bomb stops there
PARSE_CPU_S_BASE: Final = 1  # CPU seconds reading any document may take, and PARSE_CPU_S_PER_MIB for each MiB
PARSE_CPU_S_PER_MIB: Final = 5.0  # uploaded (a 2 MiB Markdown book takes about 0.3 s): markup that explodes from
# a small upload is stopped long before VOXLOG_OFFLOAD_CPU_S

# The worker.
RETRY_BASE_DELAY_S: Final = 1.0  # a failed attempt's first retry delay, doubled per attempt, with jitter
REBALANCE_GRACE_S: Final = 10.0  # on a revocation, how long a running job may finish before it is given back:
# a segment or two on a CPU
COMMIT_INTERVAL_S: Final = 1.0  # while jobs keep coming, offsets are committed at most this often: a commit is
# a broker round trip, and a new owner of the partition reads at most a second of finished jobs again
WATCHDOG_FACTOR: Final = 4.0  # an attempt without progress for its expected time times this is given back: a
WATCHDOG_MIN_S: Final = 30.0  # segment may be slow, a hung engine is not; the least expected time, and before
# the node has measured its speed
INTERACTIVE_PER_BATCH: Final = 4  # after this many interactive jobs in a row a batch job's turn comes, so that
# batch work never starves behind a stream of interactive work (docs/scheduling.md)
BATCH_LOOKAHEAD: Final = 5000  # jobs waiting on a worker for a claim at most before it reads further ahead:
# enough to see the interactive job behind a long batch backlog, bounded in memory
FAIR_SHARE_HALF_LIFE_S: Final = 60.0  # how fast a tenant's past use of the engine is forgotten: a minute of
# history, so that a tenant idle for a few minutes starts even
SCHEDULING_AGING_S: Final = 30.0  # shorter jobs first, aged: a job's work counts as divided by 1 + its wait over
# this, so that a long job's turn comes within minutes however many short ones arrive

# The projector.
PROJECTOR_BATCH: Final = 500  # records applied in one transaction at most: one commit for many records
# (docs/scaling.md), and a short transaction
PROJECTOR_LINGER_S: Final = 0.010  # while jobs wait (PROJECTOR_LINGER_BACKLOG live jobs or more), wait this long
PROJECTOR_LINGER_BACKLOG: Final = 8  # after a batch so that the next gathers more (docs/scaling.md)

# The sweeper, and the API's view of the workers.
STALE_AFTER_S: Final = 15.0  # a worker heard from (NodeHeartbeat, every 2 s) not for this long is silent: seven
# heartbeats missed; the sweeper releases its claim, the API shows it as gone and counts it no longer
STALE_FACTOR: Final = 8.0  # a claim without progress for its expected time times this is released (twice the
STALE_MIN_S: Final = 60.0  # worker's own watchdog, so the worker gives it back first); the least expected time
SWEEP_INTERVAL_S: Final = 2.0  # how often the leading sweeper looks at the live claims: the heartbeat's pace
SWEEP_BLOB_GRACE_S: Final = 900.0  # a released attempt's partial blobs are kept this long before they may be
# deleted: its worker may be alive and still writing, and notices the release at its next segment
CACHE_SWEEP_INTERVAL_S: Final = 30.0  # how often the leading sweeper evicts results and deletes blobs nothing
# keeps: the directory walk is cheap at this pace and the cap is overshot for half a minute at most


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
        MIN_SPEED,
        MAX_SPEED,
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
        part_chars=min(DOCUMENT_PART_CHARS, settings.max_text_chars),
        max_parts=MAX_DOCUMENT_PARTS,
        max_chapters=MAX_DOCUMENT_CHAPTERS,
        max_unpacked_bytes=MAX_EPUB_UNPACKED_BYTES,
        cpu_s_base=PARSE_CPU_S_BASE,
        cpu_s_per_mib=PARSE_CPU_S_PER_MIB,
        gate=gate,
    )


def offload_budget(settings: ApiSettings) -> Budget:
    return Budget(cpu_s=settings.offload_cpu_s, memory_bytes=settings.offload_memory_mb * 2**20)


def worker_id_of(settings: WorkerSettings) -> str:
    return settings.worker_id or f"{socket.gethostname()}-{settings.device}"


def worker_config(
    settings: WorkerSettings, engine: EngineInfo | None = None, sizes: ForwardSizes | None = None
) -> WorkerConfig:
    sizes = sizes or forward_sizes(settings, engine.device if engine else settings.device)
    return WorkerConfig(
        worker_id=worker_id_of(settings),
        host=socket.gethostname(),
        kafka=settings.kafka_access(),
        jobs_topic=settings.jobs_topic,
        cache_ttl=timedelta(seconds=settings.cache_ttl),
        shutdown_grace_s=settings.shutdown_grace_s,
        rebalance_grace_s=REBALANCE_GRACE_S,
        commit_interval_s=COMMIT_INTERVAL_S,
        watchdog_factor=WATCHDOG_FACTOR,
        watchdog_min_s=WATCHDOG_MIN_S,
        interactive_per_batch=INTERACTIVE_PER_BATCH,
        batch_lookahead=BATCH_LOOKAHEAD,
        held_claims=sizes.held,
        batch=sizes.segments,
        batch_padded_ids=sizes.padded_ids,
        tenant_weights=settings.tenant_weights,
        fair_share_half_life_s=FAIR_SHARE_HALF_LIFE_S,
        aging_s=SCHEDULING_AGING_S,
        engine=engine.name if engine else "",
        model_version=engine.model_version if engine else "",
    )


def batch_and_claims(settings: WorkerSettings, device: str) -> tuple[int, int]:
    """Segments a forward carries and claims held where nothing was measured (``batch_sizes.forward_sizes``)."""
    sizes = forward_sizes(settings, device)
    return sizes.segments, sizes.held


def retry_policy(settings: WorkerSettings) -> RetryPolicy:
    return RetryPolicy(settings.max_attempts, RETRY_BASE_DELAY_S)


def projector_config(settings: ProjectorSettings) -> ProjectorConfig:
    return ProjectorConfig(
        name=settings.projector_name,
        jobs_topic=settings.jobs_topic,
        control_topic=settings.control_topic,
        cache_ttl=timedelta(seconds=settings.cache_ttl),
        max_batch=PROJECTOR_BATCH,
        linger=Linger(PROJECTOR_LINGER_S, PROJECTOR_LINGER_BACKLOG),
        changes_channel=changes_channel(settings.database_schema),
    )


def janitor_config(settings: SweeperSettings) -> JanitorConfig:
    return JanitorConfig(
        job_retention=timedelta(seconds=settings.job_retention_s),
        max_bytes=settings.cache_max_bytes,
        interval_s=CACHE_SWEEP_INTERVAL_S,
    )


def backlog_thresholds(settings: SweeperSettings) -> list[tuple[ServiceMode, float]]:
    """Each service mode the sweeper switches by the backlog, with its threshold (0: never), the milder first."""
    return [("degraded", settings.degrade_backlog_s), ("cache_only", settings.cache_only_backlog_s)]


def sweeper_config() -> SweeperConfig:
    return SweeperConfig(
        stale_after_s=STALE_AFTER_S,
        stale_factor=STALE_FACTOR,
        min_expected_s=STALE_MIN_S,
        sweep_interval_s=SWEEP_INTERVAL_S,
        blob_grace_s=SWEEP_BLOB_GRACE_S,
    )
