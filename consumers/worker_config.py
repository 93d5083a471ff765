"""A worker's configuration, and the consumer group it joins."""

from __future__ import annotations

from dataclasses import dataclass
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
    interactive_per_batch: int = 4  # consumers.priorities: a batch job's turn comes after this many
    batch_lookahead: int = 2000  # batch jobs set aside at most, before the worker reads further
    engine: str = ""  # the engine and model version this worker serves ("": any, for tests of the loop)
    model_version: str = ""
