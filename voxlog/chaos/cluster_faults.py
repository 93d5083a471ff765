"""The faults of a replicated cluster (`voxlog chaos --brokers 3`): a broker lost or hung, a projector replica
lost, and a rolling restart of every process, each under a load that lasts as long as the fault does.

Each ends as every fault does (:func:`voxlog.chaos.faults.settle`): no job lost, none completed twice,
``verify --settled`` and ``replay --verify`` clean, and the client's errors counted, those its documented
retry absorbed and those it did not (the goal: none). A broker fault also waits until every partition has
its three replicas in sync again: the next fault may then take another broker without losing a write.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Final

from aiokafka.errors import KafkaError

from foundation.kafka_groups import wait_group_stable
from infra.kafka_broker import BROKER_SESSION_TIMEOUT_S
from infra.stack import DevStack
from voxlog.chaos.deployment import Deployment
from voxlog.chaos.faults import TEXT, Fault, FaultResult, Inject, Sizes, settle

ENGINE: Final = {"VOXLOG_BENCH_SYNTH_MS": "20"}
RATE: Final = 8.0  # submissions per second while a fault lasts: the two workers keep up (20 ms a job)
ROLLING_RATE: Final = 4.0  # the rolling restart lasts minutes: a lighter load, still one every 250 ms
CLUSTER_BROKERS: Final = 3


async def _while_loaded(
    stack: DevStack,
    home: Path,
    result: FaultResult,
    sizes: Sizes,
    inject: Inject,
    replicas: int = 1,
    rate: float = RATE,
) -> FaultResult:
    """Two workers (and ``replicas`` of every other process); a load from before the fault until it is
    lifted, ``sizes.jobs`` submissions at least; then the jobs it caught, and verify."""
    if stack.cluster.size < CLUSTER_BROKERS:
        raise ValueError(f"{result.fault} needs a cluster of {CLUSTER_BROKERS} brokers (voxlog chaos --brokers 3)")
    async with Deployment(stack, home, ENGINE, replicas=replicas) as d, d.client() as client:
        await d.add_workers(2)
        lifted = asyncio.Event()
        load = asyncio.create_task(d.submit_until(client, lifted, TEXT, rate, sizes.jobs))
        try:
            await asyncio.sleep(1.0)
            in_flight = await d.in_flight()
            await inject(d)
        except BaseException:
            load.cancel()
            raise
        finally:
            lifted.set()
        lifted_at, in_flight = time.monotonic(), in_flight | await d.in_flight()
        await load
        return await settle(d, client, result, in_flight, lifted_at)


async def _busiest_leader(d: Deployment) -> tuple[int, int]:
    """The broker that leads most of the deployment's jobs partitions, and how many it leads."""
    health = await d.stack.cluster.health()
    return health.busiest_leader(d.topics.jobs_topic)


async def leader_kill(stack: DevStack, home: Path, sizes: Sizes) -> FaultResult:
    result = FaultResult(
        "broker SIGKILL (leader)", "the broker leading most jobs partitions SIGKILLed under load, started 5 s later"
    )

    async def kill_and_restart(d: Deployment) -> None:
        node, led = await _busiest_leader(d)
        result.description += f" (node {node}, leader of {led} of {d.topics.jobs_partitions})"
        stack.kill_broker(node)
        await asyncio.sleep(5)
        await stack.start_broker(node)
        await stack.brokers_in_sync()

    return await _while_loaded(stack, home, result, sizes, kill_and_restart)


async def broker_stop(stack: DevStack, home: Path, sizes: Sizes) -> FaultResult:
    hung_s = BROKER_SESSION_TIMEOUT_S + 6
    result = FaultResult(
        "broker SIGSTOP / SIGCONT",
        f"the broker leading most jobs partitions stopped for {hung_s:.0f} s (its session timeout is"
        f" {BROKER_SESSION_TIMEOUT_S:.0f} s), then continued",
    )

    async def stop_and_continue(d: Deployment) -> None:
        node, led = await _busiest_leader(d)
        result.description += f" (node {node}, leader of {led})"
        stack.signal_broker(node, signal.SIGSTOP)
        try:
            fenced_after = await _until_fenced(stack, node, hung_s)
        finally:
            stack.signal_broker(node, signal.SIGCONT)
        if fenced_after is None:
            result.violations.append(f"node {node} was never fenced while it was stopped ({hung_s:.0f} s)")
        else:
            result.description += f"; fenced {fenced_after:.0f} s after it stopped"
        await stack.brokers_in_sync()

    return await _while_loaded(stack, home, result, sizes, stop_and_continue)


async def _until_fenced(stack: DevStack, node: int, hung_s: float) -> float | None:
    """Hold the node stopped for ``hung_s``; when the controller fenced it (no longer a registered broker),
    in seconds from the stop (None: never)."""
    started = time.monotonic()
    fenced: float | None = None
    while (elapsed := time.monotonic() - started) < hung_s:
        if fenced is None:
            try:
                health = await stack.cluster.health()
            except (KafkaError, OSError, TimeoutError):  # the stopped node may be the one asked: ask again
                health = None
            if health is not None and node not in health.brokers:
                fenced = elapsed
        await asyncio.sleep(0.5)
    return fenced


async def projector_replica_kill(stack: DevStack, home: Path, sizes: Sizes) -> FaultResult:
    result = FaultResult(
        "projector replica SIGKILL",
        "one of two projectors in a group SIGKILLed under load; the other takes its partitions, then it is"
        " started again",
    )

    async def kill_one(d: Deployment) -> None:
        group = d.env["VOXLOG_PROJECTOR_GROUP"]
        await wait_group_stable(d.kafka, group, 2, 60)
        await asyncio.to_thread(d.kill, "projector-1")
        await wait_group_stable(d.kafka, group, 1, 60)  # the survivor holds every partition
        d.start("projector-1")  # a supervisor restarts it
        await d.wait_ready("projector-1")
        await wait_group_stable(d.kafka, group, 2, 60)

    return await _while_loaded(stack, home, result, sizes, kill_one, replicas=2)


ROLLING_ORDER: Final = ("projector", "sweeper", "worker", "api")
"""After the brokers, every process of a kind, one at a time, in the order an upgrade rolls them out."""


async def rolling_restart(stack: DevStack, home: Path, sizes: Sizes) -> FaultResult:
    result = FaultResult("rolling restart", "every process restarted one at a time under load")

    async def roll(d: Deployment) -> None:
        for node in range(1, stack.cluster.size + 1):
            await asyncio.to_thread(stack.stop_broker, node)
            await stack.start_broker(node)
            await stack.brokers_in_sync()
        restarted: dict[str, int] = {"broker": stack.cluster.size}
        for kind in ROLLING_ORDER:
            for name in [name for name in list(d.specs) if name.split("-")[0] == kind]:
                await d.restart(name)
                if kind == "worker":
                    await d.until_members(len(d.workers()))
                restarted[kind] = restarted.get(kind, 0) + 1
        result.description += " (" + ", ".join(f"{count} {kind}" for kind, count in restarted.items()) + ")"

    return await _while_loaded(stack, home, result, sizes, roll, replicas=2, rate=ROLLING_RATE)


CLUSTER_FAULTS: tuple[Fault, ...] = (leader_kill, broker_stop, projector_replica_kill, rolling_restart)
