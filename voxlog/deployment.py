"""A deployment under test: processes on a shared broker and PostgreSQL server, isolated from any other there.

The benchmarks (``bench.deploy``) and the fault campaign (``voxlog.chaos``)
both run deployments side by side on one stack: each gets its own topics,
schema, consumer group, projector offsets, blob directory, API port and log
files (:func:`voxlog.devstack.isolated_env`), so nothing one does is seen by
another, and its data can be dropped afterwards.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import asyncpg

from foundation.kafka_access import KafkaAccess
from foundation.kafka_groups import synth_group, wait_group_stable
from foundation.settings import TopicSettings
from infra.apps import AppProcesses, AppSpec
from infra.processes import free_port, tail, wait_gone
from projections.migrations import drop_schema
from projections.reads.operator import ANNOUNCED_ENGINES
from voxlog.devstack import isolated_env
from voxlog.errors import VoxlogError
from voxlog.topics import ensure_topics, topic_specs

VOXLOG_CLI: Final = (sys.executable, "-m", "voxlog.cli", "--log-level", "WARNING")
# How a deployment's processes are started: the CLI through bench.paced, which paces the benchmark engine
# (bench-sleep) from VOXLOG_BENCH_*, no settings of voxlog's (issue 38, item 3); any other engine runs as
# `voxlog` runs it. Run as a program, not imported: the benchmarks sit above the application.
PACED_CLI: Final = (sys.executable, "-m", "bench.paced", "--log-level", "WARNING")


class DeploymentError(VoxlogError):
    """A deployment could not be brought to the state asked for (a process did not start, a wait ran out)."""


class Deployment:
    def __init__(
        self,
        kafka: KafkaAccess,
        database_url: str,
        home: Path,
        *,
        prefix: str,
        env: Mapping[str, str] | None = None,
        partitions: int | None = None,
    ) -> None:
        self.kafka = kafka
        self.database_url = database_url
        self.tag = f"{prefix}_{uuid.uuid4().hex[:10]}"
        self.home = home / self.tag
        topics = TopicSettings(
            jobs_topic=f"{self.tag}.jobs", control_topic=f"{self.tag}.control", dlq_topic=f"{self.tag}.dlq"
        )
        self.topics = topics.model_copy(update={"jobs_partitions": partitions}) if partitions else topics
        self.api_port = free_port()
        self.env = {
            **isolated_env(kafka, database_url, self.tag, self.topics, self.home, self.api_port),
            **(env or {}),
        }
        self.processes = AppProcesses(self.home)
        self.specs: dict[str, AppSpec] = {}

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def blob_dir(self) -> Path:
        return Path(self.env["VOXLOG_BLOB_DIR"])

    def argv(self, process: str) -> list[str]:
        """How ``process`` (api, worker, projector, sweeper) is started."""
        return [*PACED_CLI, process]

    # -- processes ----------------------------------------------------------------------------
    def start(
        self, name: str, process: str | None = None, extra: Mapping[str, str] | None = None, ready: str | None = None
    ) -> None:
        """Start ``name`` (``process`` defaults to the name's first word: worker-3 is a worker); started again
        after it stopped, it keeps its environment."""
        spec = self.specs.get(name) or AppSpec(
            name, self.argv(process or name.split("-")[0]), {**self.env, **(extra or {})}, ready_url=ready
        )
        self.specs[name] = spec
        self.processes.start(spec)

    async def wait_ready(self, name: str, within_s: float = 180.0) -> None:
        await self.processes.wait_ready(self.specs[name], within_s)

    def stop(self, name: str, timeout: float = 30.0) -> None:
        self.processes.stop(name, timeout=timeout)

    def stop_all(self, timeout: float = 30.0) -> None:
        for name in reversed(list(self.specs)):
            self.processes.stop(name, timeout=timeout)

    def workers(self) -> list[str]:
        """The names of the workers started so far, in order."""
        return [name for name in self.specs if name.startswith("worker-")]

    def pid(self, name: str) -> int:
        pid = self.processes.pid(name)
        if pid is None:
            raise DeploymentError(f"{name} is not running; its log ends with:\n{self.log(name)}")
        return pid

    def pids(self) -> dict[str, list[int]]:
        """The processes running, by kind: api, projector, sweeper, workers."""
        found: dict[str, list[int]] = {}
        for name in self.specs:
            pid = self.processes.pid(name)
            if pid is not None:
                found.setdefault("workers" if name.startswith("worker-") else name, []).append(pid)
        return found

    def kill(self, name: str) -> None:
        pid = self.pid(name)
        os.kill(pid, signal.SIGKILL)
        wait_gone(pid, 30)

    def signal(self, name: str, sig: signal.Signals) -> None:
        os.kill(self.pid(name), sig)

    def log(self, name: str, lines: int = 30) -> str:
        return tail(self.processes.log_file(name), lines)

    # -- its data -----------------------------------------------------------------------------
    async def create_topics(self) -> None:
        await ensure_topics(self.kafka, topic_specs(self.topics))

    async def drop(self, *, topics: bool = True) -> None:
        """Drop its schema and (``topics``) its topics: a shared server outlives it."""
        await drop_schema(self.database_url, self.tag)
        if not topics:
            return
        admin = self.kafka.admin()
        await admin.start()
        try:
            await admin.delete_topics([self.topics.jobs_topic, self.topics.control_topic, self.topics.dlq_topic])
        finally:
            await admin.close()

    async def rows(self, sql: str, *args: object) -> list[asyncpg.Record]:
        conn = await asyncpg.connect(self.database_url, server_settings={"search_path": self.tag})
        try:
            found: list[asyncpg.Record] = await conn.fetch(sql, *args)
            return found
        finally:
            await conn.close()

    async def scalar(self, sql: str, *args: object) -> Any:
        rows = await self.rows(sql, *args)
        return rows[0][0] if rows else None

    async def until_members(
        self, members: int, within_s: float = 120.0, *, announced: int | None = None, nodes_table: str = "nodes"
    ) -> None:
        """Until ``announced`` workers (``members`` by default) announced themselves in ``nodes_table`` and,
        for voxlog's, ``members`` form a Stable synthesis group."""
        deadline = time.monotonic() + within_s
        while await self.scalar(f"SELECT count(*) FROM {nodes_table}") < (announced or members):
            if time.monotonic() > deadline:
                first = self.workers()[0] if self.workers() else "worker-0"
                raise DeploymentError(f"{members} workers did not announce themselves; {self.log(first)}")
            await asyncio.sleep(0.3)
        if nodes_table == "nodes":
            [engine] = await self.rows(ANNOUNCED_ENGINES)
            group = synth_group(self.env["VOXLOG_SYNTH_GROUP"], engine["engine"], engine["model_version"])
            await wait_group_stable(self.kafka, group, members, within_s)
