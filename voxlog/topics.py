"""Topic bootstrap through the Kafka admin API: create what is missing, check the rest, align retention.

A topic is created with the replication factor the settings give, else the cluster's own
``default.replication.factor`` (a local cluster's nodes set it by their number: 3 from three brokers
on, see :mod:`infra.kafka_replication`), and ``min.insync.replicas`` by the same rule: 2 of 3.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field
from typing import Final

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError

from foundation.errors import BrokerUnavailable
from foundation.kafka_access import KafkaAccess
from foundation.settings import TopicSettings
from infra.kafka_replication import min_insync_replicas
from voxlog.errors import TopicMismatch

TOPIC_ALREADY_EXISTS: Final = 36
_DYNAMIC_TOPIC: Final = 1  # DescribeConfigs' config_source for a topic's own setting


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int | None  # None: the cluster's default.replication.factor
    config: dict[str, str] = field(default_factory=dict)
    min_insync_replicas: int | None = None  # None: by the replication factor (min_insync_replicas)

    def replicated(self, cluster_default: int) -> TopicSpec:
        """This spec with its replication settled: the factor (``cluster_default`` when it names none), and
        ``min.insync.replicas`` in its config."""
        factor = self.replication_factor or cluster_default
        in_sync = self.min_insync_replicas or min_insync_replicas(factor)
        if in_sync > factor:
            raise TopicMismatch(
                f"topic {self.name}: min.insync.replicas {in_sync} is more than its {factor} replicas; every acks=all"
                " write would fail: lower VOXLOG_TOPIC_MIN_INSYNC_REPLICAS"
            )
        config = {**self.config, "min.insync.replicas": str(in_sync)}
        return dataclasses.replace(self, replication_factor=factor, config=config, min_insync_replicas=in_sync)


def topic_specs(settings: TopicSettings) -> list[TopicSpec]:
    """The topics voxlog needs, as the settings describe them."""
    retention = {"retention.ms": str(settings.jobs_retention_ms), "cleanup.policy": "delete"}
    rf, in_sync = settings.topic_replication_factor, settings.topic_min_insync_replicas
    return [
        TopicSpec(settings.jobs_topic, settings.jobs_partitions, rf, dict(retention), in_sync),
        TopicSpec(settings.dlq_topic, 1, rf, dict(retention), in_sync),
        TopicSpec(settings.control_topic, 1, rf, {"cleanup.policy": "compact"}, in_sync),
    ]


async def ensure_topics(kafka: KafkaAccess, specs: list[TopicSpec], ready_within_s: float = 30.0) -> dict[str, str]:
    """Create each missing topic; report ``created`` or ``exists`` per topic.

    Returns once the created topics appear in metadata with every partition
    led, so a producer started next does not race their creation.

    An existing topic with fewer partitions than asked is an error: keys
    would map to other partitions than the settings promise.
    """
    admin = kafka.admin(request_timeout_ms=15000)
    await kafka.start(admin, "cannot create the topics")
    try:
        existing = set(await admin.list_topics())
        missing = [spec for spec in specs if spec.name not in existing]
        states = {spec.name: "exists" for spec in specs if spec.name in existing}
        if missing:
            default = await _default_replication(admin) if any(s.replication_factor is None for s in missing) else 1
            placed = [spec.replicated(default) for spec in missing]
            response = await admin.create_topics(
                [NewTopic(s.name, s.partitions, s.replication_factor, topic_configs=s.config) for s in placed]
            )
            for name, code, message in _topic_errors(response):
                if code not in (0, TOPIC_ALREADY_EXISTS):
                    raise BrokerUnavailable(f"creating topic {name} failed (error {code}): {message}")
                states[name] = "created" if code == 0 else "exists"
        existing_specs = [s for s in specs if states[s.name] == "exists"]
        await _check_partitions(admin, existing_specs)
        for name, change in (await _align_retention(admin, existing_specs)).items():
            states[name] += f", {change}"
        await _wait_visible(admin, [s for s in specs if states[s.name] == "created"], ready_within_s)
        return states
    except KafkaError as exc:
        raise BrokerUnavailable(f"Kafka at {kafka.describe()} refused topic bootstrap: {exc}") from exc
    finally:
        await admin.close()


async def _default_replication(admin: AIOKafkaAdminClient) -> int:
    """The cluster's ``default.replication.factor``, as a broker it has reports it."""
    brokers = (await admin.describe_cluster())["brokers"]
    if not brokers:
        raise BrokerUnavailable("the Kafka cluster lists no broker: cannot tell its default.replication.factor")
    resource = ConfigResource(ConfigResourceType.BROKER, str(brokers[0]["node_id"]))
    for response in await admin.describe_configs([resource]):
        for result in response.to_object()["resources"]:
            for entry in result["config_entries"]:
                if entry["config_names"] == "default.replication.factor" and entry["config_value"]:
                    return int(entry["config_value"])
    raise BrokerUnavailable(
        "the Kafka cluster did not say its default.replication.factor: set VOXLOG_TOPIC_REPLICATION_FACTOR"
    )


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


async def _align_retention(admin: AIOKafkaAdminClient, specs: list[TopicSpec]) -> dict[str, str]:
    """Give existing topics the ``retention.ms`` the settings ask for (``VOXLOG_JOBS_RETENTION_MS``).

    Kafka's AlterConfigs replaces a topic's whole set of dynamic configs, so the set is read first
    and written back with ``retention.ms`` changed: other settings an operator made are kept.
    """
    wanted = {s.name: s.config["retention.ms"] for s in specs if "retention.ms" in s.config}
    if not wanted:
        return {}
    responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name) for name in wanted])
    changes: dict[str, str] = {}
    alterations = []
    for response in responses:
        for resource in response.to_object()["resources"]:
            name, entries = resource["resource_name"], resource["config_entries"]
            current = next((e["config_value"] for e in entries if e["config_names"] == "retention.ms"), None)
            if current == wanted[name]:
                continue
            dynamic = {e["config_names"]: e["config_value"] for e in entries if e["config_source"] == _DYNAMIC_TOPIC}
            if any(value is None for value in dynamic.values()):  # a sensitive value cannot be read back
                raise TopicMismatch(f"topic {name} has sensitive settings; set retention.ms with kafka-configs instead")
            alterations.append(
                ConfigResource(ConfigResourceType.TOPIC, name, {**dynamic, "retention.ms": wanted[name]})
            )
            changes[name] = f"retention.ms {wanted[name]} (was {current})"
    if alterations:
        for response in await admin.alter_configs(alterations):
            for code, message, _, name in response.resources:
                if code != 0:
                    raise BrokerUnavailable(f"setting retention.ms of topic {name} failed (error {code}): {message}")
    return changes


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
