"""The local development stack: a Kafka cluster (one broker, or three) and one PostgreSQL database.

``up`` is idempotent: what runs is left alone, what is missing is installed,
formatted or started, and it returns once both services answer. A stack with
:class:`StackSecurity` (tests of the credentials) has a SASL_SSL broker and a
PostgreSQL cluster that takes TLS connections with a password only.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.errors import InfraError
from infra.kafka_broker import JitMode, KafkaBroker, SaslSslListener
from infra.kafka_cluster import KafkaCluster, KafkaClusterConfig
from infra.postgres_cluster import (
    PostgresCluster,
    PostgresClusterConfig,
    find_bindir,
    install_server,
    probe_database,
)
from infra.status import ServiceStatus
from infra.tls import ServerTls


@dataclass(frozen=True)
class StackSecurity:
    """The broker's client listener SASL_SSL, PostgreSQL over TLS with ``postgres_password``."""

    kafka: SaslSslListener
    postgres_tls: ServerTls
    postgres_password: str
    # aiokafka's security options that log the broker's readiness probe in (made above infra: by foundation).
    kafka_probe_options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StackConfig:
    home: Path
    kafka_ports: Sequence[tuple[int, int]]  # (client, controller) of each Kafka node: one, or three
    kafka_heap: str  # each node's
    postgres_port: int
    jar_cache: Path
    external_database_url: str | None = None
    ready_timeout: float = 120.0
    security: StackSecurity | None = None
    kafka_jit: JitMode = "full"  # see infra.kafka_broker.JitMode


class DevStack:
    def __init__(self, config: StackConfig) -> None:
        self.config = config
        security = config.security
        self.cluster = KafkaCluster(
            KafkaClusterConfig(
                home=config.home / "kafka",
                ports=config.kafka_ports,
                heap=config.kafka_heap,
                jar_cache=config.jar_cache,
                listener=security.kafka if security else None,
                probe_options=security.kafka_probe_options if security else {},
                jit=config.kafka_jit,
            )
        )
        self.postgres = PostgresCluster(
            PostgresClusterConfig(
                home=config.home / "postgres",
                port=config.postgres_port,
                tls=security.postgres_tls if security else None,
                password=security.postgres_password if security else None,
            )
        )

    @property
    def kafka(self) -> KafkaBroker:
        """The first Kafka node (the only one of a single-broker stack)."""
        return self.cluster.nodes[0]

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's endpoint, comma-separated."""
        return self.cluster.bootstrap_servers

    @property
    def database_url(self) -> str:
        return self.config.external_database_url or self.postgres.config.url

    async def up(self) -> None:
        """Bring both services up and wait until they answer."""
        self.config.home.mkdir(parents=True, exist_ok=True)
        if self.config.external_database_url is None:
            bindir = find_bindir() or install_server()
            self.postgres.init(bindir)
            self.postgres.start(bindir)
        self.cluster.start()
        db_ready = (
            self._check_external()
            if self.config.external_database_url is not None
            else self.postgres.ensure_database(self.config.ready_timeout)
        )
        await asyncio.gather(db_ready, self.cluster.wait_ready(self.config.ready_timeout))

    async def _check_external(self) -> None:
        status = await probe_database(self.database_url)
        if not status.up:
            raise InfraError(f"VOXLOG_DATABASE_URL does not answer: {status.detail}")

    def down(self, *, purge: bool = False) -> None:
        """Stop both services; ``purge`` also deletes their data."""
        self.cluster.stop()
        if self.config.external_database_url is None:
            bindir = find_bindir()
            if bindir is not None:
                self.postgres.stop(bindir)
        if purge and self.config.home.exists():
            shutil.rmtree(self.config.home)

    # -- faults: what a crash or an operator does to the services (chaos runs and fault tests) ----------
    def kill_broker(self, node_id: int = 1) -> None:
        """SIGKILL a Kafka node (the first by default), as a crash or the OOM killer would."""
        self.cluster.kill(node_id)

    async def start_broker(self, node_id: int = 1) -> None:
        await self.cluster.restart(node_id, self.config.ready_timeout)

    def signal_broker(self, node_id: int, sig: signal.Signals) -> None:
        """SIGSTOP / SIGCONT a Kafka node: one that hangs (a long GC pause, a stalled disk), then goes on."""
        self.cluster.signal(node_id, sig)

    def stop_broker(self, node_id: int) -> None:
        """Stop a Kafka node cleanly (SIGTERM: it hands over its leaderships), as a rolling upgrade does."""
        if not self.cluster.stop_node(node_id):
            raise InfraError(f"Kafka node {node_id} did not stop cleanly: it was killed")

    async def brokers_in_sync(self, within_s: float = 120.0) -> None:
        """Until every Kafka node is registered and every partition has all its replicas in sync."""
        await self.cluster.wait_in_sync(within_s)

    def stop_postgres(self) -> None:
        """``pg_ctl stop -m fast``: every connection is dropped, new ones are refused."""
        self.postgres.stop(self._bindir())

    async def start_postgres(self) -> None:
        self.postgres.start(self._bindir())
        await self.postgres.ensure_database(self.config.ready_timeout)

    def _bindir(self) -> Path:
        if self.config.external_database_url is not None:
            raise InfraError("this stack uses an external PostgreSQL server: it cannot stop or start it")
        bindir = find_bindir()
        if bindir is None:
            raise InfraError("PostgreSQL's server binaries are not installed")
        return bindir

    async def status(self) -> list[ServiceStatus]:
        kafka, postgres = await asyncio.gather(self.cluster.statuses(), probe_database(self.database_url))
        if self.config.external_database_url is None and postgres.up:
            postgres = ServiceStatus(
                postgres.name, True, postgres.endpoint, pid=self.postgres.pid(), detail=postgres.detail
            )
        return [*kafka, postgres]
