"""One deployment of voxlog under test by a fault: its own topics, schema, blob directory and processes.

The processes (projector, sweeper, api, workers) run the benchmark engine,
whose synthesis takes a fixed time: the faults concern the orchestration,
not the model. A client submits jobs the way a careful one does: each with
an Idempotency-Key, sent again with the same key after a 503 or no answer.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import asyncpg
import httpx

from foundation.kafka_groups import synth_group, wait_group_stable
from foundation.settings import TopicSettings
from infra.apps import AppProcesses, AppSpec
from infra.processes import free_port, tail, wait_gone
from infra.stack import DevStack
from projections.migrations import drop_schema, migrate_database
from projections.replay import verify_against_live
from projections.verify import Report, verify
from voxlog.devstack import isolated_env
from voxlog.errors import VoxlogError
from voxlog.topics import ensure_topics, topic_specs

CLI: Final = [sys.executable, "-m", "voxlog.cli", "--log-level", "WARNING"]
TERMINAL: Final = {"completed", "failed", "cancelled"}
# Short timeouts everywhere, so that a fault shows its effect within seconds rather than minutes.
FAST: Final = {
    "VOXLOG_ENGINE": "bench-sleep",
    "VOXLOG_DEFAULT_ENGINE": "bench-sleep",
    "VOXLOG_RETRY_BASE_DELAY_S": "0.2",
    "VOXLOG_HEARTBEAT_S": "1",
    "VOXLOG_STALE_AFTER_S": "6",
    "VOXLOG_SWEEP_INTERVAL_S": "0.5",
    "VOXLOG_SWEEP_BLOB_GRACE_S": "30",
    "VOXLOG_WATCHDOG_MIN_S": "3",
    "VOXLOG_WATCHDOG_FACTOR": "2",
    "VOXLOG_SHUTDOWN_GRACE_S": "2",
    "VOXLOG_PUBLISH_TIMEOUT_MS": "3000",
}


class ChaosError(VoxlogError):
    """A fault run could not be carried out (a process did not start, a wait ran out)."""


@dataclass
class Deployment:
    stack: DevStack
    home: Path
    engine_env: Mapping[str, str] = field(default_factory=dict)
    partitions: int = 6

    def __post_init__(self) -> None:
        self.tag = f"ch_{uuid.uuid4().hex[:10]}"
        self.home = self.home / self.tag
        self.topics = TopicSettings(
            jobs_topic=f"{self.tag}.jobs",
            nodes_topic=f"{self.tag}.nodes",
            dlq_topic=f"{self.tag}.dlq",
            jobs_partitions=self.partitions,
        )
        self.api_port = free_port()
        env = isolated_env(
            self.stack.bootstrap_servers, self.stack.database_url, self.tag, self.topics, self.home, self.api_port
        )
        self.env = {**env, **FAST, **self.engine_env}
        self.processes = AppProcesses(self.home)
        self.specs: dict[str, AppSpec] = {}
        self.accepted: dict[int, str] = {}  # submission number -> job id

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def blob_dir(self) -> Path:
        return Path(self.env["VOXLOG_BLOB_DIR"])

    async def __aenter__(self) -> Deployment:
        await ensure_topics(self.stack.bootstrap_servers, topic_specs(self.topics))
        await migrate_database(self.stack.database_url, self.tag)
        self.start("projector")
        self.start("sweeper")
        self.start("api", ready=f"{self.api}/readyz")
        await self.processes.wait_ready(self.specs["api"], 120)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for name in reversed(list(self.specs)):
            self.processes.stop(name, timeout=15)
        await drop_schema(self.stack.database_url, self.tag)
        await drop_schema(self.stack.database_url, f"{self.tag}_replay")

    # -- processes ----------------------------------------------------------------
    def start(self, name: str, extra: Mapping[str, str] | None = None, ready: str | None = None) -> None:
        command = name.split("-")[0]
        spec = self.specs.get(name) or AppSpec(name, [*CLI, command], {**self.env, **(extra or {})}, ready_url=ready)
        self.specs[name] = spec
        self.processes.start(spec)

    async def add_workers(self, count: int, extra: Mapping[str, str] | None = None) -> None:
        workers = [name for name in self.specs if name.startswith("worker-")]
        live = sum(self.processes.pid(name) is not None for name in workers)
        for i in range(len(workers), len(workers) + count):
            self.start(f"worker-{i}", {"VOXLOG_WORKER_ID": f"{self.tag}-w{i}", **(extra or {})})
        await self.until_members(live + count)

    async def until_members(self, workers: int, within_s: float = 120.0) -> None:
        """Until ``workers`` workers announced themselves and form a Stable group."""
        deadline = time.monotonic() + within_s
        engines: list[asyncpg.Record] = []
        while not engines or await self.scalar("SELECT count(*) FROM nodes") < len(self._started_workers()):
            if time.monotonic() > deadline:
                raise ChaosError(f"{workers} workers did not announce themselves; {self.log('worker-0')}")
            await asyncio.sleep(0.3)
            engines = await self.rows("SELECT DISTINCT engine, model_version FROM nodes")
        group = synth_group(self.env["VOXLOG_SYNTH_GROUP"], engines[0]["engine"], engines[0]["model_version"])
        await wait_group_stable(self.stack.bootstrap_servers, group, workers, within_s)

    def _started_workers(self) -> list[str]:
        return [name for name in self.specs if name.startswith("worker-")]

    def pid(self, name: str) -> int:
        pid = self.processes.pid(name)
        if pid is None:
            raise ChaosError(f"{name} is not running; its log ends with:\n{self.log(name)}")
        return pid

    def kill(self, name: str) -> None:
        pid = self.pid(name)
        os.kill(pid, signal.SIGKILL)
        wait_gone(pid, 30)

    def signal(self, name: str, sig: signal.Signals) -> None:
        os.kill(self.pid(name), sig)

    def log(self, name: str) -> str:
        return tail(self.processes.log_file(name), 30)

    # -- the projection --------------------------------------------------------------
    async def rows(self, sql: str, *args: object) -> list[asyncpg.Record]:
        conn = await asyncpg.connect(self.stack.database_url, server_settings={"search_path": self.tag})
        try:
            found: list[asyncpg.Record] = await conn.fetch(sql, *args)
            return found
        finally:
            await conn.close()

    async def scalar(self, sql: str, *args: object) -> Any:
        rows = await self.rows(sql, *args)
        return rows[0][0] if rows else None

    async def in_flight(self) -> set[str]:
        """The accepted jobs that are not terminal yet (as far as the projection shows)."""
        rows = await self.rows("SELECT job_id::text FROM jobs WHERE state IN ('completed', 'failed')")
        return set(self.accepted.values()) - {r[0] for r in rows}

    async def replay_differences(self) -> list[str]:
        """Rebuild the projection from the log up to where the live projector stands; what differs from it."""
        _, differences = await verify_against_live(
            self.stack.database_url,
            self.tag,
            f"projector-{self.tag}",
            f"{self.tag}_replay",
            self.stack.bootstrap_servers,
            (self.topics.jobs_topic, self.topics.nodes_topic),
            timedelta(seconds=float(self.env.get("VOXLOG_CACHE_TTL", 600))),
            lambda done, total, elapsed: None,
        )
        return [difference.line() for difference in differences]

    async def verify(self) -> Report:
        return await verify(
            self.stack.bootstrap_servers,
            self.topics.jobs_topic,
            self.stack.database_url,
            self.tag,
            f"projector-{self.tag}",
            settled=True,
            wait_s=60,
        )

    # -- the client ------------------------------------------------------------------------
    async def submit(self, client: httpx.AsyncClient, number: int, text: str, within_s: float = 120.0) -> str:
        """Submit until accepted, each try with the same Idempotency-Key (so a retry is the same job)."""
        voice = "bench_tone"
        deadline = time.monotonic() + within_s
        while True:
            try:
                response = await client.post(
                    "/v1/jobs", json={"text": text, "voice": voice}, headers={"Idempotency-Key": f"n{number}"}
                )
                if response.status_code in (200, 202):
                    job_id = str(response.json()["job_id"])
                    self.accepted[number] = job_id
                    return job_id
                if response.status_code != 503:
                    raise ChaosError(f"submission {number} refused: {response.status_code} {response.text}")
            except httpx.TransportError:
                pass  # no answer: the same key again
            if time.monotonic() > deadline:
                raise ChaosError(f"submission {number} was not accepted within {within_s:.0f}s")
            await asyncio.sleep(0.5)

    async def submit_many(self, client: httpx.AsyncClient, numbers: range, text: str, rate: float) -> None:
        """Submit ``numbers`` at about ``rate`` per second, each until it is accepted."""
        tasks = []
        for n in numbers:
            tasks.append(asyncio.create_task(self.submit(client, n, text.format(n=n))))
            await asyncio.sleep(1 / rate)
        await asyncio.gather(*tasks)

    async def states(self, client: httpx.AsyncClient, job_ids: set[str]) -> dict[str, str]:
        found = {}
        for job_id in job_ids:
            try:
                response = await client.get(f"/v1/jobs/{job_id}")
            except httpx.TransportError:
                continue
            if response.status_code == 200:
                found[job_id] = str(response.json()["state"])
        return found

    async def until_terminal(self, client: httpx.AsyncClient, job_ids: set[str], within_s: float) -> set[str]:
        """Wait until every job is terminal; returns those that are not when time runs out."""
        deadline = time.monotonic() + within_s
        waiting = set(job_ids)
        while waiting and time.monotonic() < deadline:
            states = await self.states(client, waiting)
            waiting = {job_id for job_id in waiting if states.get(job_id) not in TERMINAL}
            if waiting:
                await asyncio.sleep(0.5)
        return waiting
