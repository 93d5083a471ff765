"""Settings: one pydantic-settings class per process, every variable ``VOXLOG_*``.

Field groups shared by several processes are mixins; each process reads
exactly one concrete class. ``voxlog config`` prints them all with defaults.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from contracts.topics import DEFAULT_DLQ_TOPIC, DEFAULT_JOBS_TOPIC, DEFAULT_NODES_TOPIC

DEFAULT_DATABASE_URL = "postgresql://voxlog@127.0.0.1:55432/voxlog"


def default_state_root() -> Path:
    """Where local service data lives: traversable by the ``postgres`` user when run as root."""
    if os.geteuid() == 0:
        return Path("/var/lib/voxlog")
    return Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "voxlog"


def default_cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "voxlog"


class _Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="VOXLOG_", extra="ignore", frozen=True)


class TopicSettings(_Settings):
    jobs_topic: str = Field(DEFAULT_JOBS_TOPIC, description="Topic holding every job event (the audit log).")
    nodes_topic: str = Field(DEFAULT_NODES_TOPIC, description="Compacted topic of worker announcements.")
    dlq_topic: str = Field(DEFAULT_DLQ_TOPIC, description="Dead-letter topic for undecodable or unappliable records.")
    jobs_partitions: int = Field(24, ge=1, description="Partitions of the jobs topic when it is created.")
    topic_replication_factor: int = Field(1, ge=1, description="Replication factor of topics voxlog creates.")
    jobs_retention_ms: int = Field(-1, ge=-1, description="retention.ms of the jobs and DLQ topics (-1: forever).")


class KafkaSettings(TopicSettings):
    kafka_bootstrap_servers: str = Field("127.0.0.1:9092", description="Kafka bootstrap servers, comma-separated.")


class DatabaseSettings(_Settings):
    database_url: str = Field(DEFAULT_DATABASE_URL, description="PostgreSQL URL of the projections.")
    database_schema: str = Field(
        "public", pattern=r"^[a-z_][a-z0-9_]{0,62}$", description="Schema holding the projection tables."
    )


class AdminSettings(KafkaSettings, DatabaseSettings):
    """`voxlog migrate` and `voxlog topics`."""


class DevSettings(TopicSettings):
    """`voxlog dev up|down|status`: the local Kafka broker and PostgreSQL cluster."""

    dev_home: Path = Field(
        default_factory=lambda: default_state_root() / "dev",
        description="Data of the local stack (/var/lib/voxlog/dev as root, else ~/.local/share/voxlog/dev).",
    )
    dev_kafka_port: int = Field(9092, description="Port of the local broker's client listener.")
    dev_kafka_controller_port: int = Field(9093, description="Port of the local broker's KRaft controller.")
    dev_kafka_heap: str = Field("512m", description="JVM heap (-Xms and -Xmx) of the local broker.")
    dev_postgres_port: int = Field(55432, description="Port of the local PostgreSQL cluster.")
    dev_jar_cache: Path = Field(
        default_factory=lambda: default_cache_root() / "kafka",
        description="Where the broker jars are copied from ~/.m2 (~/.cache/voxlog/kafka).",
    )
    dev_ready_timeout: float = Field(120.0, description="Seconds to wait for each service to answer.")
    database_url: str | None = Field(
        None, description="An existing PostgreSQL server to use instead of a local cluster (unset: local)."
    )
    database_schema: str = Field("public", description="Schema the projection tables are migrated into.")


ALL_SETTINGS: tuple[type[_Settings], ...] = (AdminSettings, DevSettings)
