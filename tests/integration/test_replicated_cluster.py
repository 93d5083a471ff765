"""A three-broker cluster of its own (never the shared test stack): topics replicated 3 ways with 2 in
sync, a partition's leader SIGKILLed, writes with acks=all and reads through the new leader, and
`voxlog dev status` counting the under-replicated partitions up, then back to 0 once the broker is back.

The cluster is laid out as `voxlog dev up --brokers 3` lays out the dev stack (its ports numbered from
VOXLOG_DEV_KAFKA_PORT and _CONTROLLER_PORT), so `voxlog dev status` run with the same settings shows it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError

from foundation.kafka_access import KafkaAccess
from foundation.settings import DevSettings, TopicSettings
from infra.processes import free_port
from infra.stack import DevStack
from tests.support.cli import voxlog
from tests.support.kafka import read_topic
from tests.support.stack import port_free, stack_home_for_tests
from voxlog.devstack import dev_stack
from voxlog.topics import ensure_topics, topic_specs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def free_run(count: int, taken: set[int]) -> int:
    """A port p with p, p + 2, ... (``count`` ports) all free and none in ``taken``."""
    while True:
        first = free_port()
        run = {first + 2 * i for i in range(count)}
        if not run & taken and all(port_free(port) for port in run):
            taken |= run
            return first


@pytest_asyncio.fixture
async def cluster() -> AsyncIterator[tuple[DevStack, dict[str, str]]]:
    """A three-broker Kafka cluster (no PostgreSQL: an address where none answers), and the environment
    that makes `voxlog dev` commands see it; every node stopped and its data deleted, pass or fail."""
    home = stack_home_for_tests().parent / "test-private" / uuid.uuid4().hex[:12]
    taken: set[int] = set()
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("VOXLOG_")},
        "VOXLOG_DEV_HOME": str(home),
        "VOXLOG_DEV_KAFKA_PORT": str(free_run(3, taken)),
        "VOXLOG_DEV_KAFKA_CONTROLLER_PORT": str(free_run(3, taken)),
        "VOXLOG_DEV_KAFKA_HEAP": "384m",
        "VOXLOG_DATABASE_URL": f"postgresql://nobody@127.0.0.1:{free_port()}/none",
    }
    settings = DevSettings(
        dev_home=home,
        dev_kafka_port=int(env["VOXLOG_DEV_KAFKA_PORT"]),
        dev_kafka_controller_port=int(env["VOXLOG_DEV_KAFKA_CONTROLLER_PORT"]),
        dev_kafka_heap="384m",
    )
    stack = dev_stack(settings, brokers=3)
    try:
        started = time.monotonic()
        stack.cluster.start()
        await stack.cluster.wait_ready(240)
        print(f"three brokers ready in {time.monotonic() - started:.1f}s")
        yield stack, env
    finally:
        stack.cluster.stop()
        shutil.rmtree(home, ignore_errors=True)


def dev_status(env: dict[str, str]) -> dict[str, str]:
    """`voxlog dev status`: each line's detail, by its name (kafka-1, ..., replicas)."""
    done = voxlog(env, "dev", "status", timeout_s=120)
    assert done.returncode in (0, 1), done.stderr
    lines = [line.split(maxsplit=4) for line in done.stdout.splitlines()]
    return {parts[0]: f"{parts[1]} {parts[4] if len(parts) > 4 else ''}" for parts in lines}


def under_replicated(status: dict[str, str]) -> int:
    return int(status["replicas"].split()[1])


async def until_status(env: dict[str, str], wanted: str, test: object, within_s: float) -> dict[str, str]:
    deadline = time.monotonic() + within_s
    while True:
        status = await asyncio.to_thread(dev_status, env)
        if test(status):  # type: ignore[operator]
            return status
        if time.monotonic() > deadline:
            raise AssertionError(f"dev status did not show {wanted} within {within_s:.0f}s: {status}")


async def partitions(kafka: KafkaAccess, topic: str, within_s: float = 30.0) -> list[dict[str, object]]:
    """The topic's partitions, once a broker knows them (a broker asked right after the topic's creation may
    answer with none: CI saw an empty list, as for ``min_insync``)."""
    admin = kafka.admin()
    await admin.start()
    try:
        deadline = time.monotonic() + within_s
        while True:
            [described] = await admin.describe_topics([topic])
            found: list[dict[str, object]] = described["partitions"]
            if found or time.monotonic() > deadline:
                return found
            await asyncio.sleep(0.2)
    finally:
        await admin.close()


async def min_insync(kafka: KafkaAccess, topic: str, within_s: float = 30.0) -> str | None:
    """The topic's min.insync.replicas, once a broker knows the new topic's configs (a broker asked right
    after the topic's creation may answer without them: CI saw no entry at all)."""
    admin = kafka.admin()
    await admin.start()
    try:
        deadline = time.monotonic() + within_s
        while True:
            [response] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
            [resource] = response.to_object()["resources"]
            values = [
                e["config_value"] for e in resource["config_entries"] if e["config_names"] == "min.insync.replicas"
            ]
            if values or time.monotonic() > deadline:
                return values[0] if values else None
            await asyncio.sleep(0.2)
    finally:
        await admin.close()


async def produce(kafka: KafkaAccess, topic: str, values: list[bytes], within_s: float) -> None:
    """Each value to partition 0 with acks=all from an idempotent producer, retried until the deadline (the
    partition has no leader until the controller fences the one that was killed)."""
    producer = kafka.producer(acks="all", enable_idempotence=True, request_timeout_ms=5000)
    await producer.start()
    deadline = time.monotonic() + within_s
    try:
        for value in values:
            while True:
                try:
                    await producer.send_and_wait(topic, value, partition=0)
                    break
                except KafkaError:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.5)
    finally:
        await producer.stop()


async def test_a_killed_leader_loses_no_acknowledged_write_and_its_partitions_are_replicated_again(cluster):
    stack, env = cluster
    kafka = KafkaAccess(stack.bootstrap_servers)
    assert len(stack.bootstrap_servers.split(",")) == 3
    topics = TopicSettings(jobs_topic=f"test.{uuid.uuid4().hex[:8]}.jobs", jobs_partitions=6)
    await ensure_topics(kafka, topic_specs(topics))
    jobs = topics.jobs_topic
    assert {len(p["replicas"]) for p in await partitions(kafka, jobs)} == {3}  # type: ignore[arg-type]
    assert await min_insync(kafka, jobs) == "2"

    status = await asyncio.to_thread(dev_status, env)
    assert {name: status[name].split()[0] for name in ("kafka-1", "kafka-2", "kafka-3", "replicas")} == {
        "kafka-1": "up",
        "kafka-2": "up",
        "kafka-3": "up",
        "replicas": "up",
    }
    assert sum("controller (active)" in status[f"kafka-{n}"] for n in (1, 2, 3)) == 1
    assert under_replicated(status) == 0

    await produce(kafka, jobs, [b"before-0", b"before-1"], within_s=30)
    [first] = [p for p in await partitions(kafka, jobs) if p["partition"] == 0]
    leader = int(first["leader"])  # type: ignore[call-overload]
    stack.cluster.kill(leader)

    await produce(kafka, jobs, [b"after-0", b"after-1"], within_s=90)
    [first] = [p for p in await partitions(kafka, jobs) if p["partition"] == 0]
    assert first["leader"] not in (leader, -1), "a new leader took partition 0"
    values = [record.value for record in await read_topic(kafka, jobs, expected=4)]
    assert values == [b"before-0", b"before-1", b"after-0", b"after-1"]

    lacking = await until_status(env, "under-replicated partitions", lambda s: under_replicated(s) > 0, 90)
    assert lacking[f"kafka-{leader}"].startswith("down")
    assert f"{jobs}/0" in lacking["replicas"] or under_replicated(lacking) > 8  # only the first few are named

    await stack.cluster.restart(leader, 240)
    settled = await until_status(env, "0 under-replicated partitions", lambda s: under_replicated(s) == 0, 120)
    assert settled[f"kafka-{leader}"].startswith("up")
    assert settled["replicas"].startswith("up")
