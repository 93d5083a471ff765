"""One deployment of voxlog under test by a fault: its own topics, schema, blob directory and processes.

The processes (projector, sweeper, api, workers) run the benchmark engine,
whose synthesis takes a fixed time: the faults concern the orchestration,
not the model. A client submits jobs the way a careful one does, the way
docs/api.md documents: each with an Idempotency-Key, sent again with the same key
after no answer, a 503 or a 429 (:mod:`voxlog.chaos.client`, which counts
each of those). A deployment of ``replicas`` runs that many API instances,
projectors (splitting the partitions in one group) and sweepers. A deployment of ``deliveries`` runs that
many copies of the delivery process (``voxlog deliver``) and registers a webhook endpoint of its own (a
receiver on loopback, :mod:`voxlog.chaos.webhooks`) before its jobs: every outcome is due there.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import time
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Final

import httpx

from contracts import TERMINAL_STATES
from foundation.kafka_access import KafkaAccess
from infra.processes import free_port
from infra.stack import DevStack
from projections.migrations import drop_schema, migrate_database
from projections.replay import verify_against_live
from projections.verify import Report, verify
from voxlog import deployment
from voxlog.chaos.client import RETRIED, SpreadClient
from voxlog.chaos.webhooks import EVENT_TYPES, OUTCOME_TYPES, Receiver, Tally
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
    """voxlog's processes under one fault: ``replicas`` projectors, sweepers and APIs at once, workers added
    by the fault. Every process serves /readyz (the API on its port, the others on a metrics port of their
    own), so that a fault can restart one and wait until it is ready again, as an orchestrator does."""

    def __init__(
        self,
        stack: DevStack,
        home: Path,
        engine_env: Mapping[str, str] | None = None,
        partitions: int = 6,
        replicas: int = 1,
        deliveries: int = 0,
    ) -> None:
        super().__init__(
            KafkaAccess(stack.bootstrap_servers),
            stack.database_url,
            home,
            prefix="ch",
            env={**FAST, **(engine_env or {})},
            partitions=partitions,
        )
        if replicas > 1:  # the projectors split the partitions in a group of their own
            self.env["VOXLOG_PROJECTOR_GROUP"] = f"projector-{self.tag}"
        self.stack = stack
        self.replicas = replicas
        self.deliveries = deliveries
        self.receiver: Receiver | None = None
        self.webhook_secret = ""
        if deliveries:  # a key of this deployment's own; the receiver is on loopback, over http
            self.env["VOXLOG_WEBHOOK_SIGNING_KEY"] = secrets.token_urlsafe(32)
            self.env["VOXLOG_WEBHOOK_ALLOWED_NETWORKS"] = "127.0.0.1/32"
        self.api_urls = [self.api]
        self.accepted: dict[int, str] = {}  # submission number -> job id
        self.unabsorbed: list[str] = []  # submissions the documented retry did not get accepted

    async def __aenter__(self) -> Deployment:
        await self.create_topics()
        await migrate_database(self.database_url, self.tag)
        for i in range(self.replicas):
            self.start(_replica("projector", i))
            self.start(_replica("sweeper", i))
        for i in range(1, self.replicas):
            port = free_port()
            self.api_urls.append(f"http://127.0.0.1:{port}")
            self.start(_replica("api", i), extra={"VOXLOG_API_PORT": str(port)})
        self.start("api")
        for i in range(self.deliveries):
            self.start(_replica("deliver", i))
        for name in self.specs:
            await self.wait_ready(name, 120)
        if self.deliveries:
            self.receiver = Receiver()
            self.receiver.start()
            self.webhook_secret = await self._register(self.receiver.url)
        return self

    async def _register(self, url: str, within_s: float = 60.0) -> str:
        """A webhook endpoint for every outcome, once the projection lists it (an outcome is due only to the
        endpoints the projection shows when it is read); its secret."""
        async with httpx.AsyncClient(base_url=self.api, timeout=30) as client:
            created = await client.post("/v1/webhooks", json={"url": url, "event_types": list(EVENT_TYPES)})
            if created.status_code != 201:
                raise DeploymentError(f"the webhook endpoint was refused: {created.status_code} {created.text}")
            endpoint = created.json()["endpoint"]["endpoint_id"]
            deadline = time.monotonic() + within_s
            while (await client.get(f"/v1/webhooks/{endpoint}")).status_code != 200:
                if time.monotonic() > deadline:
                    raise DeploymentError(f"the webhook endpoint was not listed within {within_s:.0f}s")
                await asyncio.sleep(0.2)
            return str(created.json()["secret"])

    def start(
        self, name: str, process: str | None = None, extra: Mapping[str, str] | None = None, ready: str | None = None
    ) -> None:
        if name not in self.specs:  # its first start: where it says it is ready
            port = (extra or {}).get("VOXLOG_API_PORT") or (self.env["VOXLOG_API_PORT"] if name == "api" else None)
            metrics = None if port else str(free_port())
            extra = {**(extra or {}), **({"VOXLOG_METRICS_PORT": metrics} if metrics else {})}
            ready = ready or f"http://127.0.0.1:{port or metrics}/readyz"
        super().start(name, process, extra, ready)

    async def restart(self, name: str, within_s: float = 120.0) -> None:
        """Stop ``name`` as an orchestrator does (SIGTERM, its shutdown), start it again, until it is ready."""
        await asyncio.to_thread(self.stop, name)  # its shutdown takes seconds: the load goes on meanwhile
        self.start(name)
        await self.wait_ready(name, within_s)

    def client(self) -> SpreadClient:
        """A client of every API instance (:mod:`voxlog.chaos.client`)."""
        return SpreadClient(self.api_urls)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop_all(timeout=15)
        if self.receiver is not None:
            self.receiver.stop()
        await self.drop()  # its topics too: the suite runs faults on the stack every other test shares
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

    async def delivered(self, outcomes: dict[str, str], within_s: float = 90.0) -> Tally:
        """Until every one of ``outcomes`` (job id -> completed or failed) has reached the receiver and the
        projection's webhook_deliveries shows its delivery delivered (bounded); what the receiver got then,
        the deliveries the table does not show delivered among its problems."""
        assert self.receiver is not None, "a deployment without deliveries"
        deadline = time.monotonic() + within_s
        while True:
            tally = self.receiver.tally(self.webhook_secret, outcomes)
            rows = await self.rows("SELECT job_id::text, event_type, state FROM webhook_deliveries")
            shown = {(r["job_id"], r["event_type"]): r["state"] for r in rows}
            undelivered = [
                f"{job_id} ({OUTCOME_TYPES[state]}): {shown.get((job_id, OUTCOME_TYPES[state]), 'no row')}"
                for job_id, state in sorted(outcomes.items())
                if shown.get((job_id, OUTCOME_TYPES[state])) != "delivered"
            ]
            if (not tally.missing and not undelivered) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        tally.problems += [f"webhook_deliveries does not show {line} delivered" for line in undelivered[:5]]
        return tally

    async def replay_differences(self) -> list[str]:
        """Rebuild the projection from the log up to where the live projector stands; what differs from it."""
        _, differences = await verify_against_live(
            self.database_url,
            self.tag,
            f"projector-{self.tag}",
            f"{self.tag}_replay",
            self.kafka,
            (self.topics.jobs_topic, self.topics.control_topic),
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
    async def submit(self, client: SpreadClient, number: int, text: str, within_s: float = 120.0) -> str:
        """Submit until accepted, each try with the same Idempotency-Key (so a retry is the same job): the
        documented retry, after no answer, a 503 or a 429 (its Retry-After, at most 2 s, else 0.5 s)."""
        voice = "bench_tone"
        deadline = time.monotonic() + within_s
        while True:
            pause = 0.5
            try:
                response = await client.post(
                    "/v1/jobs", json={"text": text, "voice": voice}, headers={"Idempotency-Key": f"n{number}"}
                )
                if response.status_code in (200, 202):
                    job_id = str(response.json()["job_id"])
                    self.accepted[number] = job_id
                    return job_id
                if response.status_code not in RETRIED:
                    raise DeploymentError(f"submission {number} refused: {response.status_code} {response.text}")
                pause = min(2.0, float(response.headers.get("retry-after", pause)))
            except httpx.TransportError:
                pass  # no answer: the same key again
            if time.monotonic() > deadline:
                raise DeploymentError(f"submission {number} was not accepted within {within_s:.0f}s")
            await asyncio.sleep(pause)

    async def submit_many(self, client: SpreadClient, numbers: range, text: str, rate: float) -> None:
        """Submit ``numbers`` at about ``rate`` per second, each until it is accepted (or counted in
        ``unabsorbed``)."""
        tasks = []
        for n in numbers:
            tasks.append(asyncio.create_task(self._submit_counted(client, n, text.format(n=n))))
            await asyncio.sleep(1 / rate)
        await asyncio.gather(*tasks)

    async def submit_until(
        self, client: SpreadClient, lifted: asyncio.Event, text: str, rate: float, at_least: int
    ) -> None:
        """Submit at about ``rate`` per second until ``lifted`` is set and ``at_least`` were sent: a load that
        lasts as long as the fault does."""
        tasks = []
        for n in itertools.count():
            if lifted.is_set() and n >= at_least:
                break
            tasks.append(asyncio.create_task(self._submit_counted(client, n, text.format(n=n))))
            await asyncio.sleep(1 / rate)
        await asyncio.gather(*tasks)

    async def _submit_counted(self, client: SpreadClient, number: int, text: str) -> None:
        try:
            await self.submit(client, number, text)
        except DeploymentError as exc:
            self.unabsorbed.append(str(exc))

    async def states(self, client: SpreadClient, job_ids: set[str]) -> dict[str, str]:
        found = {}
        for job_id in job_ids:
            try:
                response = await client.get(f"/v1/jobs/{job_id}")
            except httpx.TransportError:
                continue
            if response.status_code == 200:
                found[job_id] = str(response.json()["state"])
        return found

    async def until_terminal(self, client: SpreadClient, job_ids: set[str], within_s: float) -> set[str]:
        """Wait until every job is terminal; returns those that are not when time runs out."""
        deadline = time.monotonic() + within_s
        waiting = set(job_ids)
        while waiting and time.monotonic() < deadline:
            states = await self.states(client, waiting)
            waiting = {job_id for job_id in waiting if states.get(job_id) not in TERMINAL}
            if waiting:
                await asyncio.sleep(0.5)
        return waiting


def _replica(kind: str, index: int) -> str:
    """The name of a process's ``index``-th copy: the first is ``kind`` alone (``api``), then ``api-1``..."""
    return kind if index == 0 else f"{kind}-{index}"
