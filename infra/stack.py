"""The local development stack: one Kafka broker and one PostgreSQL database.

``up`` is idempotent: what runs is left alone, what is missing is installed,
formatted or started, and it returns once both services answer. A stack with
:class:`StackSecurity` (tests of the credentials) has a SASL_SSL broker and a
PostgreSQL cluster that takes TLS connections with a password only.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.errors import InfraError
from infra.kafka_broker import KafkaBroker, KafkaBrokerConfig, SaslSslListener
from infra.postgres_cluster import (
    PostgresCluster,
    PostgresClusterConfig,
    find_bindir,
    install_server,
    probe_database,
)
from infra.processes import wait_gone
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
    kafka_port: int
    kafka_controller_port: int
    kafka_heap: str
    postgres_port: int
    jar_cache: Path
    external_database_url: str | None = None
    ready_timeout: float = 120.0
    security: StackSecurity | None = None


class DevStack:
    def __init__(self, config: StackConfig) -> None:
        self.config = config
        security = config.security
        self.kafka = KafkaBroker(
            KafkaBrokerConfig(
                home=config.home / "kafka",
                port=config.kafka_port,
                controller_port=config.kafka_controller_port,
                heap=config.kafka_heap,
                jar_cache=config.jar_cache,
                listener=security.kafka if security else None,
                probe_options=security.kafka_probe_options if security else {},
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
    def bootstrap_servers(self) -> str:
        return self.kafka.config.bootstrap_servers

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
        self.kafka.start()
        db_ready = (
            self._check_external()
            if self.config.external_database_url is not None
            else self.postgres.ensure_database(self.config.ready_timeout)
        )
        await asyncio.gather(db_ready, self.kafka.wait_ready(self.config.ready_timeout))

    async def _check_external(self) -> None:
        status = await probe_database(self.database_url)
        if not status.up:
            raise InfraError(f"VOXLOG_DATABASE_URL does not answer: {status.detail}")

    def down(self, *, purge: bool = False) -> None:
        """Stop both services; ``purge`` also deletes their data."""
        self.kafka.stop()
        if self.config.external_database_url is None:
            bindir = find_bindir()
            if bindir is not None:
                self.postgres.stop(bindir)
        if purge and self.config.home.exists():
            shutil.rmtree(self.config.home)

    # -- faults: what a crash or an operator does to the services (chaos runs and fault tests) ----------
    def kill_broker(self) -> None:
        """SIGKILL the broker, as a crash or the OOM killer would."""
        pid = self.kafka.pid()
        if pid is None:
            raise InfraError("the Kafka broker is not running")
        os.kill(pid, signal.SIGKILL)
        if not wait_gone(pid, 30):
            raise InfraError(f"the Kafka broker (pid {pid}) survived SIGKILL")

    async def start_broker(self) -> None:
        self.kafka.start()
        await self.kafka.wait_ready(self.config.ready_timeout)

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
        kafka, postgres = await asyncio.gather(self.kafka.status(), probe_database(self.database_url))
        if self.config.external_database_url is None and postgres.up:
            postgres = ServiceStatus(
                postgres.name, True, postgres.endpoint, pid=self.postgres.pid(), detail=postgres.detail
            )
        return [kafka, postgres]
