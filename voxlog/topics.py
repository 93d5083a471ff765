"""Topic bootstrap through the Kafka admin API: create what is missing, check the rest."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Final

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError

from foundation.errors import BrokerUnavailable
from foundation.settings import TopicSettings
from voxlog.errors import TopicMismatch

TOPIC_ALREADY_EXISTS: Final = 36


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int
    config: dict[str, str] = field(default_factory=dict)


def topic_specs(settings: TopicSettings) -> list[TopicSpec]:
    """The topics voxlog needs, as the settings describe them."""
    retention = {"retention.ms": str(settings.jobs_retention_ms), "cleanup.policy": "delete"}
    rf = settings.topic_replication_factor
    return [
        TopicSpec(settings.jobs_topic, settings.jobs_partitions, rf, dict(retention)),
        TopicSpec(settings.dlq_topic, 1, rf, dict(retention)),
        TopicSpec(settings.nodes_topic, 1, rf, {"cleanup.policy": "compact"}),
    ]


async def ensure_topics(bootstrap_servers: str, specs: list[TopicSpec], ready_within_s: float = 30.0) -> dict[str, str]:
    """Create each missing topic; report ``created`` or ``exists`` per topic.

    Returns once the created topics appear in metadata with every partition
    led, so a producer started next does not race their creation.

    An existing topic with fewer partitions than asked is an error: keys
    would map to other partitions than the settings promise.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=15000)
    try:
        await admin.start()
        existing = set(await admin.list_topics())
        missing = [spec for spec in specs if spec.name not in existing]
        outcome = {spec.name: "exists" for spec in specs if spec.name in existing}
        if missing:
            response = await admin.create_topics(
                [NewTopic(s.name, s.partitions, s.replication_factor, topic_configs=s.config) for s in missing]
            )
            for name, code, message in _topic_errors(response):
                if code not in (0, TOPIC_ALREADY_EXISTS):
                    raise BrokerUnavailable(f"creating topic {name} failed (error {code}): {message}")
                outcome[name] = "created" if code == 0 else "exists"
        await _check_partitions(admin, [s for s in specs if outcome[s.name] == "exists"])
        await _wait_visible(admin, [s for s in specs if outcome[s.name] == "created"], ready_within_s)
        return outcome
    except KafkaError as exc:
        raise BrokerUnavailable(f"Kafka at {bootstrap_servers} refused topic bootstrap: {exc}") from exc
    finally:
        await admin.close()


def _topic_errors(response: object) -> list[tuple[str, int, str]]:
    rows = getattr(response, "topic_errors", [])
    return [(row[0], row[1], row[2] if len(row) > 2 else "") for row in rows]


async def _wait_visible(admin: AIOKafkaAdminClient, specs: list[TopicSpec], within_s: float) -> None:
    deadline = time.monotonic() + within_s
    pending = {s.name: s.partitions for s in specs}
    while pending:
        for topic in await admin.describe_topics(list(pending)):
            led = [p for p in topic["partitions"] if p["leader"] >= 0]
            if topic["error_code"] == 0 and len(led) >= pending.get(topic["topic"], 0):
                pending.pop(topic["topic"], None)
        if not pending:
            return
        if time.monotonic() >= deadline:
            raise BrokerUnavailable(f"topics {sorted(pending)} were created but not led within {within_s:.0f}s")
        await asyncio.sleep(0.1)


async def _check_partitions(admin: AIOKafkaAdminClient, specs: list[TopicSpec]) -> None:
    if not specs:
        return
    described = await admin.describe_topics([s.name for s in specs])
    counts = {topic["topic"]: len(topic["partitions"]) for topic in described}
    for spec in specs:
        have = counts.get(spec.name, 0)
        if have < spec.partitions:
            raise TopicMismatch(
                f"topic {spec.name} has {have} partitions but {spec.partitions} are configured; "
                "add partitions with kafka-topics --alter, or lower VOXLOG_JOBS_PARTITIONS"
            )
