"""One deployment of voxlog under test by a fault: its own topics, schema, blob directory and processes.

The processes (projector, sweeper, api, workers) run the benchmark engine,
whose synthesis takes a fixed time: the faults concern the orchestration,
not the model. A client submits jobs the way a careful one does: each with
an Idempotency-Key, sent again with the same key after a 503 or no answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Final

import httpx

from contracts import TERMINAL_STATES
from foundation.kafka_access import KafkaAccess
from infra.stack import DevStack
from projections.migrations import drop_schema, migrate_database
from projections.replay import verify_against_live
from projections.verify import Report, verify
from voxlog import deployment
from voxlog.deployment import DeploymentError

TERMINAL: Final = frozenset(state.value for state in TERMINAL_STATES)
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


class Deployment(deployment.Deployment):
    """voxlog's processes under one fault: projector, sweeper and API at once, workers added by the fault."""

    def __init__(
        self, stack: DevStack, home: Path, engine_env: Mapping[str, str] | None = None, partitions: int = 6
    ) -> None:
        super().__init__(
            KafkaAccess(stack.bootstrap_servers),
            stack.database_url,
            home,
            prefix="ch",
            env={**FAST, **(engine_env or {})},
            partitions=partitions,
        )
        self.stack = stack
        self.accepted: dict[int, str] = {}  # submission number -> job id

    async def __aenter__(self) -> Deployment:
        await self.create_topics()
        await migrate_database(self.database_url, self.tag)
        self.start("projector")
        self.start("sweeper")
        self.start("api", ready=f"{self.api}/readyz")
        await self.wait_ready("api", 120)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop_all(timeout=15)
        await self.drop(topics=False)  # the campaign's own stack goes with its topics
        await drop_schema(self.database_url, f"{self.tag}_replay")

    async def add_workers(self, count: int, extra: Mapping[str, str] | None = None) -> None:
        started = self.workers()
        live = sum(self.processes.pid(name) is not None for name in started)
        for i in range(len(started), len(started) + count):
            self.start(f"worker-{i}", extra={"VOXLOG_WORKER_ID": f"{self.tag}-w{i}", **(extra or {})})
        await self.until_members(live + count, announced=len(self.workers()))

    # -- the projection --------------------------------------------------------------
    async def in_flight(self) -> set[str]:
        """The accepted jobs that are not terminal yet (as far as the projection shows)."""
        rows = await self.rows("SELECT job_id::text FROM jobs WHERE state = ANY($1::text[])", list(TERMINAL))
        return set(self.accepted.values()) - {r[0] for r in rows}

    async def replay_differences(self) -> list[str]:
        """Rebuild the projection from the log up to where the live projector stands; what differs from it."""
        _, differences = await verify_against_live(
            self.database_url,
            self.tag,
            f"projector-{self.tag}",
            f"{self.tag}_replay",
            self.kafka,
            (self.topics.jobs_topic, self.topics.nodes_topic),
            timedelta(seconds=float(self.env.get("VOXLOG_CACHE_TTL", 600))),
            lambda done, total, elapsed: None,
        )
        return [difference.line() for difference in differences]

    async def verify(self) -> Report:
        return await verify(
            self.kafka,
            self.topics.jobs_topic,
            self.database_url,
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
                    raise DeploymentError(f"submission {number} refused: {response.status_code} {response.text}")
            except httpx.TransportError:
                pass  # no answer: the same key again
            if time.monotonic() > deadline:
                raise DeploymentError(f"submission {number} was not accepted within {within_s:.0f}s")
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
