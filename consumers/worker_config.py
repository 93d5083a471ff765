"""A worker's configuration, and the consumer group it joins."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from foundation.kafka_access import KafkaAccess


@dataclass(frozen=True)
class WorkerConfig:
    worker_id: str
    kafka: KafkaAccess  # for the tail scans' own readers
    jobs_topic: str
    cache_ttl: timedelta
    shutdown_grace_s: float
    rebalance_grace_s: float
    commit_interval_s: float
    watchdog_factor: float
    watchdog_min_s: float
    host: str | None = None  # the machine, named in every claim
    interactive_per_batch: int = 4  # consumers.scheduling: a batch job's turn comes after this many
    batch_lookahead: int = 5000  # jobs waiting for a claim at most (consumers.run_queue), before it reads further
    held_claims: int = 4  # claims held at once, their segments interleaved (consumers.engine_turns)
    batch: int = 1  # segments one engine call carries at most, of as many held claims (consumers.engine_turns)
    batch_padded_ids: int = 0  # padded ids one engine call carries at most: its segments times its longest (0: any)
    tenant_weights: Mapping[str, float] = field(default_factory=dict)  # a tenant's share of the engine (default 1)
    fair_share_half_life_s: float = 60.0  # how fast a tenant's use of the engine is forgotten
    aging_s: float = 30.0  # a job's work counts as divided by 1 + waited / aging_s (shorter first, aged)
    engine: str = ""  # the engine and model version this worker serves ("": any, for tests of the loop)
    model_version: str = ""
