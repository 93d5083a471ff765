"""The faults of the campaign: each on a fresh deployment, under load, ending with ``verify`` and every job terminal.

A fault's result counts what a user would ask about: the jobs accepted, how
many were in flight when the fault hit, how many completed or failed, how many
were lost (accepted, never terminal) or completed twice, and how long the
system took to finish the jobs in flight once the fault was lifted. Every fault's deployment runs the
delivery process too (two copies of ``voxlog deliver``) with a webhook endpoint registered before the jobs:
every terminal job's outcome must reach it, signed, at least once (duplicates are counted), and
webhook_deliveries must show it delivered. Then the projection is rebuilt from the log
(``voxlog replay --verify``) and must equal the live one.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from contracts import JobClaimed, JobReleased
from infra.stack import DevStack
from projections.verify import read_log
from voxlog.chaos.client import SpreadClient
from voxlog.chaos.deployment import Deployment

DELIVERIES = 2
"""Copies of the delivery process in each fault's deployment: one leads, the other stands by."""


@dataclass(frozen=True)
class Sizes:
    kill_jobs: int = 200
    jobs: int = 60


@dataclass
class FaultResult:
    fault: str
    description: str
    jobs: int = 0
    in_flight: int = 0
    completed: int = 0
    failed: int = 0
    lost: int = 0
    completed_twice: int = 0
    recovery_s: float = 0.0
    client_errors: dict[str, int] = field(default_factory=dict)  # answers the documented retry sent again
    unabsorbed: int = 0  # submissions that retry did not get accepted: errors a user of the documented client saw
    webhooks_due: int = 0  # terminal jobs whose outcome was due to the webhook endpoint (0: no endpoint)
    webhooks_delivered: int = 0  # of those, received there at least once with a valid signature
    webhook_duplicates: int = 0  # requests the endpoint got again for a delivery it had already received
    webhook_lag_s: float = 0.0  # from every job terminal until every outcome delivered and shown so
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations and self.lost == 0 and self.completed_twice == 0 and self.unabsorbed == 0


Fault = Callable[[DevStack, Path, Sizes], Awaitable[FaultResult]]
TEXT = "Job {n} of the campaign."


async def settle(
    d: Deployment, client: SpreadClient, result: FaultResult, in_flight: set[str], lifted_at: float
) -> FaultResult:
    """Wait for the jobs the fault caught (in flight when it hit, or accepted while it lasted, and not
    finished when it was lifted): that is the recovery. Then for every job; then verify."""
    await d.until_terminal(client, in_flight, 180)
    result.recovery_s = round(time.monotonic() - lifted_at, 1)
    accepted = set(d.accepted.values())
    result.lost = len(await d.until_terminal(client, accepted, 180))
    states = await d.states(client, accepted)
    result.jobs, result.in_flight = len(accepted), len(in_flight)
    result.completed = sum(state == "completed" for state in states.values())
    result.failed = sum(state == "failed" for state in states.values())
    result.client_errors = dict(sorted(client.errors.items()))
    result.unabsorbed = len(d.unabsorbed)
    result.violations += [f"not absorbed by the retry: {error}" for error in d.unabsorbed[:5]]
    if d.receiver is not None:
        outcomes = {job_id: state for job_id, state in states.items() if state in ("completed", "failed")}
        waited = time.monotonic()
        tally = await d.delivered(outcomes)
        result.webhook_lag_s = round(time.monotonic() - waited, 1)
        result.webhooks_due, result.webhooks_delivered = tally.due, tally.delivered
        result.webhook_duplicates = tally.duplicates
        result.violations += [f"outcome never delivered: {missing}" for missing in tally.missing[:5]]
        result.violations += tally.problems[:5]
    report = await d.verify()
    for check in report.checks:
        if check.name.startswith("at most one"):
            result.completed_twice = len(check.violations)
        result.violations += [f"{check.name}: {v}" for v in check.violations]
    result.violations += [f"replay differs: {line}" for line in await d.replay_differences()]
    return result


Inject = Callable[[Deployment], Awaitable[None]]
"""A fault, done to a deployment under load; it returns once the fault is lifted."""


async def _under_load(
    stack: DevStack,
    home: Path,
    result: FaultResult,
    env: dict[str, str],
    jobs: int,
    inject: Inject,
    text: str = TEXT,
) -> FaultResult:
    """Two workers and a steady load; the fault one second in; then the jobs it caught, and verify."""
    async with Deployment(stack, home, env, deliveries=DELIVERIES) as d, d.client() as client:
        await d.add_workers(2)
        load = asyncio.create_task(d.submit_many(client, range(jobs), text, rate=20))
        await asyncio.sleep(1.0)
        in_flight = await d.in_flight()
        await inject(d)
        lifted, in_flight = time.monotonic(), in_flight | await d.in_flight()
        await load
        return await settle(d, client, result, in_flight, lifted)


async def worker_kills(stack: DevStack, home: Path, sizes: Sizes) -> FaultResult:
    result = FaultResult("worker SIGKILL x3", f"two workers; three SIGKILLs during {sizes.kill_jobs} jobs")
    async with (
        Deployment(stack, home, {"VOXLOG_BENCH_SYNTH_MS": "20"}, deliveries=DELIVERIES) as d,
        d.client() as client,
    ):
        await d.add_workers(2)
        load = asyncio.create_task(d.submit_many(client, range(sizes.kill_jobs), TEXT, rate=40))
        in_flight: set[str] = set()
        for round_ in range(3):
            await asyncio.sleep(1.5)
            in_flight |= await d.in_flight()
            victim = f"worker-{round_ % 2}"
            d.kill(victim)
            d.start(victim)  # a supervisor restarts it
        lifted, in_flight = time.monotonic(), in_flight | await d.in_flight()
        await load
        return await settle(d, client, result, in_flight, lifted)


async def worker_kill_holding_claims(stack: DevStack, home: Path, sizes: Sizes) -> FaultResult:
    """A worker holds several claims at once (their segments interleaved, issue 27): SIGKILLed while it does,
    every one of them must be taken again by someone, none completed twice."""
    result = FaultResult("worker SIGKILL holding claims", "a worker SIGKILLed while it holds several claims")
    engine = {"VOXLOG_BENCH_SYNTH_MS": "100", "VOXLOG_HELD_CLAIMS": "4"}
    return await _kill_holding(stack, home, sizes, result, engine, at_least=2)


async def worker_kill_mid_batch(stack: DevStack, home: Path, sizes: Sizes) -> FaultResult:
    """A worker whose engine calls each carry the segments of up to four claims (issue 37): SIGKILLed while
    such a batch is on its engine, every claim of it must be taken again by someone, none completed twice."""
    result = FaultResult("worker SIGKILL mid-batch", "a worker SIGKILLed while a batched forward of claims runs")
    engine = {"VOXLOG_BENCH_SYNTH_MS": "300", "VOXLOG_HELD_CLAIMS": "8", "VOXLOG_BATCH_SEGMENTS": "4"}
    return await _kill_holding(stack, home, sizes, result, engine, at_least=3)


async def _kill_holding(
    stack: DevStack, home: Path, sizes: Sizes, result: FaultResult, engine: dict[str, str], at_least: int
) -> FaultResult:
    """SIGKILL worker 0 of two once it holds ``at_least`` claims under load, restart it, and settle."""
    text = "Job {n}. Its second sentence. And a third one. And a fourth, to be long enough."
    async with Deployment(stack, home, engine, deliveries=DELIVERIES) as d, d.client() as client:
        await d.add_workers(2)
        load = asyncio.create_task(d.submit_many(client, range(sizes.jobs), text, rate=20))
        victim, held = f"{d.tag}-w0", 0
        deadline = time.monotonic() + 60
        while held < at_least and time.monotonic() < deadline:
            held = int(
                (await d.rows("SELECT count(*) FROM jobs WHERE state = 'claimed' AND worker_id = $1", victim))[0][0]
            )
            await asyncio.sleep(0.05)
        if held < at_least:
            result.violations.append(f"the worker never held {at_least} claims at once (at most {held})")
        in_flight = await d.in_flight()
        d.kill("worker-0")
        d.start("worker-0")  # a supervisor restarts it
        result.description += f" ({held} held when killed)"
        lifted, in_flight = time.monotonic(), in_flight | await d.in_flight()
        await load
        return await settle(d, client, result, in_flight, lifted)


async def worker_stop(stack: DevStack, home: Path, sizes: Sizes) -> FaultResult:
    result = FaultResult("worker SIGSTOP / SIGCONT", "a worker stopped past its session timeout, then continued")

    async def stop_and_continue(d: Deployment) -> None:
        await asyncio.sleep(0.5)
        d.signal("worker-0", signal.SIGSTOP)
        await asyncio.sleep(14)  # aiokafka's session timeout (10 s) passes: the group moves its partitions
        d.signal("worker-0", signal.SIGCONT)  # its late events of the attempts it held are fenced

    env = {"VOXLOG_BENCH_SYNTH_MS": "150"}
    return await _under_load(stack, home, result, env, sizes.jobs, stop_and_continue, "Job {n}. Its second sentence.")


async def broker_kill(stack: DevStack, home: Path, sizes: Sizes) -> FaultResult:
    result = FaultResult("broker SIGKILL", "the Kafka broker killed during load, started again 5 s later")

    async def kill_and_restart(_: Deployment) -> None:
        stack.kill_broker()
        await asyncio.sleep(5)
        await stack.start_broker()

    return await _under_load(stack, home, result, {"VOXLOG_BENCH_SYNTH_MS": "20"}, sizes.jobs, kill_and_restart)


async def postgres_restart(stack: DevStack, home: Path, sizes: Sizes) -> FaultResult:
    result = FaultResult("PostgreSQL stop / start", "PostgreSQL stopped during load, started again 5 s later")

    async def stop_and_start(_: Deployment) -> None:
        await asyncio.to_thread(stack.stop_postgres)
        await asyncio.sleep(5)
        await stack.start_postgres()

    return await _under_load(stack, home, result, {"VOXLOG_BENCH_SYNTH_MS": "20"}, sizes.jobs, stop_and_start)


async def deliver_kills(stack: DevStack, home: Path, sizes: Sizes) -> FaultResult:
    """The delivery process SIGKILLed while it delivers: its first copy, restarted at once; while that one
    starts again, the second, the only one left and so the leader, restarted too. The endpoint answers each
    delivery 100 ms late, so that attempts are on the wire when a copy dies."""
    result = FaultResult(
        "delivery process SIGKILL", "`voxlog deliver`, two copies: each SIGKILLed while delivering, and restarted"
    )

    async def kill_both_in_turn(d: Deployment) -> None:
        assert d.receiver is not None
        d.receiver.delay_s = 0.1
        await asyncio.to_thread(d.receiver.some.wait, 30)  # delivering
        received = len(d.receiver.received)
        d.kill("deliver")
        d.start("deliver")  # a supervisor restarts it
        await asyncio.sleep(0.5)  # the other copy leads, the restarted one still starting
        d.kill("deliver-1")
        d.start("deliver-1")
        result.description += f" ({received} deliveries received before the first kill)"
        await d.wait_ready("deliver", 120)
        await d.wait_ready("deliver-1", 120)

    return await _under_load(stack, home, result, {"VOXLOG_BENCH_SYNTH_MS": "20"}, sizes.jobs, kill_both_in_turn)


async def hung_engine(stack: DevStack, home: Path, sizes: Sizes) -> FaultResult:
    result = FaultResult("hung engine", "an engine call that never returns; the watchdog gives the job back")
    async with (
        Deployment(stack, home, {"VOXLOG_BENCH_SYNTH_MS": "20"}, deliveries=DELIVERIES) as d,
        d.client() as client,
    ):
        await d.add_workers(1, {"VOXLOG_BENCH_FAULT": "hang:wedge"})
        await d.submit(client, 0, "A wedge in the engine.")
        load = asyncio.create_task(d.submit_many(client, range(1, sizes.jobs), TEXT, rate=20))
        in_flight = await d.in_flight()
        started = time.monotonic()
        while d.processes.pid("worker-0") is not None:  # the watchdog gives the job back; the worker leaves
            if time.monotonic() - started > 90:
                result.violations.append("the worker with the hung engine never left")
                break
            await asyncio.sleep(0.5)
        await d.add_workers(1)  # a fresh process on the device
        lifted, in_flight = time.monotonic(), in_flight | await d.in_flight()
        await load
        return await settle(d, client, result, in_flight, lifted)


async def blob_writes_fail(stack: DevStack, home: Path, sizes: Sizes) -> FaultResult:
    result = FaultResult("blob store refuses writes", "the blob directory unusable for 5 s during load")

    async def unusable_for_a_while(d: Deployment) -> None:
        away = d.blob_dir.with_name("blobs.away")
        d.blob_dir.rename(away)
        d.blob_dir.write_text("not a directory: an unmounted volume, a full disk")
        await asyncio.sleep(5)
        d.blob_dir.unlink()
        away.rename(d.blob_dir)

    engine = {"VOXLOG_BENCH_SYNTH_MS": "20", "VOXLOG_MAX_ATTEMPTS": "8", "VOXLOG_RETRY_BASE_DELAY_S": "1"}
    return await _under_load(stack, home, result, engine, sizes.jobs, unusable_for_a_while)


async def poison_records(stack: DevStack, home: Path, sizes: Sizes) -> FaultResult:
    result = FaultResult("poison records", "undecodable records in the middle of the jobs topic's partitions")

    async def poison(d: Deployment) -> None:
        producer = d.kafka.producer(acks="all")
        await producer.start()
        try:
            for partition in range(d.topics.jobs_partitions):
                headers = [("type", b"JobQueued"), ("schema_version", b"1")]
                await producer.send_and_wait(d.topics.jobs_topic, b"{not json", partition=partition, headers=headers)
        finally:
            await producer.stop()

    return await _under_load(stack, home, result, {"VOXLOG_BENCH_SYNTH_MS": "20"}, sizes.jobs, poison)


async def retry_exhaustion(stack: DevStack, home: Path, sizes: Sizes) -> FaultResult:
    result = FaultResult("retries exhausted", "a job whose every attempt fails, among jobs that succeed")
    engine = {"VOXLOG_BENCH_SYNTH_MS": "20", "VOXLOG_BENCH_FAULT": "fail:doomed", "VOXLOG_RETRY_BASE_DELAY_S": "0.5"}
    async with Deployment(stack, home, engine, deliveries=DELIVERIES) as d, d.client() as client:
        await d.add_workers(2)
        doomed = await d.submit(client, 0, "A doomed request.")
        await d.submit_many(client, range(1, sizes.jobs), TEXT, rate=20)
        settled = await settle(d, client, result, {doomed}, time.monotonic())
        states = await d.states(client, {doomed})
        if states.get(doomed) != "failed":
            settled.violations.append(f"the doomed job ended {states.get(doomed)}, not failed")
        events = [e for e in await read_log(d.kafka, d.topics.jobs_topic) if str(e.job_id) == doomed]
        releases = {e.attempt: e for e in events if isinstance(e, JobReleased)}
        for claim in (e for e in events if isinstance(e, JobClaimed) and e.attempt > 1):
            released = releases.get(claim.attempt - 1)
            not_before = released.payload.not_before if released else None
            if not_before is None or claim.occurred_at < not_before:
                settled.violations.append(f"attempt {claim.attempt} claimed before its backoff ended ({not_before})")
        if sorted(releases) != [1, 2]:
            settled.violations.append(f"released attempts {sorted(releases)}, expected 1 and 2 (3 attempts)")
        return settled


FAULTS: tuple[Fault, ...] = (
    worker_kills,
    worker_kill_holding_claims,
    worker_kill_mid_batch,
    worker_stop,
    broker_kill,
    postgres_restart,
    deliver_kills,
    hung_engine,
    blob_writes_fail,
    poison_records,
    retry_exhaustion,
)
