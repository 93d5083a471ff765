"""Deployments under test: voxlog's processes or the baseline's, on the bench's Kafka and Postgres.

Each deployment gets its own schema (and, for voxlog, its own topics and
consumer group), its own blob directory and log files, and is stopped by
the ``async with`` that started it, whatever happens inside.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal

import asyncpg
import httpx
from aiokafka.admin import AIOKafkaAdminClient

from bench.errors import BenchError
from foundation.kafka_groups import synth_group, wait_group_stable
from foundation.metrics import parse_totals
from foundation.settings import TopicSettings
from infra.apps import AppProcesses, AppSpec
from infra.processes import free_port, tail
from projections.migrations import drop_schema
from voxlog.devstack import SOURCE_ROOT, isolated_env
from voxlog.topics import ensure_topics, topic_specs

ROOT: Final = SOURCE_ROOT
System = Literal["voxlog", "baseline"]


class Deployment:
    """One system's processes: an API, workers added on demand (and voxlog's projector)."""

    def __init__(
        self,
        system: System,
        bootstrap: str,
        database_url: str,
        home: Path,
        engine_env: Mapping[str, str],
        *,
        drop_data: bool = False,
    ) -> None:
        self.system = system
        self.drop_data = drop_data  # drop its schema and topics on exit (a shared server, as in tests)
        self.tag = f"{system[:2]}_{uuid.uuid4().hex[:10]}"
        self.home = home / self.tag
        self.bootstrap = bootstrap
        self.database_url = database_url
        self.api_port = free_port()
        self.processes = AppProcesses(self.home)
        self.workers: list[tuple[str, int]] = []  # (name, metrics port)
        self._names: list[str] = []
        self.topics = TopicSettings(
            jobs_topic=f"{self.tag}.jobs", nodes_topic=f"{self.tag}.nodes", dlq_topic=f"{self.tag}.dlq"
        )
        self.env = {
            **isolated_env(bootstrap, database_url, self.tag, self.topics, self.home, self.api_port),
            **engine_env,
        }

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def _argv(self, process: str) -> list[str]:
        if self.system == "voxlog":
            return [sys.executable, "-m", "voxlog.cli", "--log-level", "WARNING", process]
        return [sys.executable, "-m", "bench.baseline", process]

    def _start(self, name: str, process: str, extra: Mapping[str, str] | None = None, ready: str | None = None) -> None:
        spec = AppSpec(name, self._argv(process), {**self.env, **(extra or {})}, ready_url=ready)
        self.processes.start(spec)
        self._names.append(name)

    async def _ready(self, name: str, ready: str | None, within_s: float = 180.0) -> None:
        await self.processes.wait_ready(AppSpec(name, [], ready_url=ready), within_s)

    async def __aenter__(self) -> Deployment:
        try:
            if self.system == "voxlog":
                await ensure_topics(self.bootstrap, topic_specs(self.topics))
                self._start("projector", "projector")
            ready = f"{self.api}/readyz"
            self._start("api", "api", ready=ready)
            await self._ready("api", ready)
        except BaseException:
            self.stop()
            raise
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
        if self.drop_data:
            await self._drop()

    async def _drop(self) -> None:
        await drop_schema(self.database_url, self.tag)
        if self.system == "voxlog":
            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
            await admin.start()
            try:
                await admin.delete_topics([self.topics.jobs_topic, self.topics.nodes_topic, self.topics.dlq_topic])
            finally:
                await admin.close()

    def stop(self) -> None:
        for name in reversed(self._names):
            self.processes.stop(name, timeout=30)
        self._names.clear()

    def pids(self) -> dict[str, list[int]]:
        """This deployment's processes by component: api, projector (voxlog), workers."""
        found: dict[str, list[int]] = {}
        for name in self._names:
            pid = self.processes.pid(name)
            if pid is not None:
                found.setdefault("workers" if name.startswith("worker-") else name, []).append(pid)
        return found

    def log(self, name: str) -> str:
        return tail(self.processes.log_file(name), 40)

    async def scale_to(self, count: int, within_s: float = 180.0) -> None:
        """Start workers until ``count`` run, and wait until every one takes work."""
        while len(self.workers) < count:
            name, port = f"worker-{len(self.workers)}", free_port()
            extra = {"VOXLOG_WORKER_ID": f"{self.tag}-w{len(self.workers)}", "VOXLOG_METRICS_PORT": str(port)}
            self._start(name, "worker", extra, ready=f"http://127.0.0.1:{port}/metrics")
            self.workers.append((name, port))
        for name, port in self.workers:
            await self._ready(name, f"http://127.0.0.1:{port}/metrics", within_s)
        await self._wait_announced(count, within_s)
        if self.system == "voxlog":
            rows = await self.fetch("SELECT DISTINCT engine, model_version FROM nodes")
            [(engine, model_version)] = [(r["engine"], r["model_version"]) for r in rows]
            group = synth_group(f"synth-{self.tag}", engine, model_version)
            await wait_group_stable(self.bootstrap, group, count, within_s)

    async def _wait_announced(self, workers: int, within_s: float) -> None:
        table = "nodes" if self.system == "voxlog" else "bl_nodes"
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            if await self.fetchval(f"SELECT count(*) FROM {table}") >= workers:
                return
            await asyncio.sleep(0.2)
        raise BenchError(f"{self.system}: fewer than {workers} workers announced themselves")

    async def fetch(self, sql: str, *args: object) -> list[asyncpg.Record]:
        conn = await asyncpg.connect(self.database_url, server_settings={"search_path": self.tag})
        try:
            rows: list[asyncpg.Record] = await conn.fetch(sql, *args)
            return rows
        finally:
            await conn.close()

    async def fetchval(self, sql: str, *args: object) -> Any:
        rows = await self.fetch(sql, *args)
        return rows[0][0] if rows else None

    async def engine_totals(self) -> dict[str, float]:
        """The workers' engine counters, summed: synthesis seconds, audio seconds, segments rendered."""
        totals: dict[str, float] = {}
        async with httpx.AsyncClient(timeout=10) as client:
            for _, port in self.workers:
                text = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
                for key, value in parse_totals(text).items():
                    totals[key] = totals.get(key, 0.0) + value
        return {
            "synthesis_s": totals.get("voxlog_synthesis_seconds_total", 0.0),
            "audio_s": totals.get("voxlog_audio_seconds_total", 0.0),
            "segments": totals.get("voxlog_segments_rendered_total", 0.0),
        }
