from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from foundation.kafka_access import KafkaAccess
from foundation.settings import TopicSettings
from voxlog.errors import TopicMismatch
from voxlog.topics import ensure_topics, topic_specs


async def _describe(kafka: KafkaAccess, topic: str) -> tuple[int, dict[str, str]]:
    admin = kafka.admin()
    await admin.start()
    try:
        (described,) = await admin.describe_topics([topic])
        (response,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        await admin.close()
    configs = {entry[0]: entry[1] for entry in response.resources[0][4]}
    return len(described["partitions"]), configs


async def config_shows(kafka: KafkaAccess, topic: str, key: str, value: str) -> None:
    """Wait until the broker describes ``key`` as ``value`` (a config change reaches it a moment later)."""
    deadline = time.monotonic() + 30
    while (await _describe(kafka, topic))[1].get(key) != value:
        assert time.monotonic() < deadline, f"{topic} never showed {key}={value}"
        await asyncio.sleep(0.1)


async def test_bootstrap_creates_the_topics_once(topics):
    # The fixture created them; a second bootstrap finds them all.
    again = await ensure_topics(topics.kafka, topic_specs(topics.settings))
    assert set(again.values()) == {"exists"}
    partitions, configs = await _describe(topics.kafka, topics.jobs)
    assert partitions == 24
    assert configs["retention.ms"] == "-1"
    _, nodes_configs = await _describe(topics.kafka, topics.settings.nodes_topic)
    assert nodes_configs["cleanup.policy"] == "compact"


async def test_partition_count_is_configurable_and_checked(stack):
    suffix = uuid.uuid4().hex[:10]
    names = {"jobs_topic": f"p.{suffix}.jobs", "nodes_topic": f"p.{suffix}.nodes", "dlq_topic": f"p.{suffix}.dlq"}
    small = TopicSettings(jobs_partitions=3, **names)
    kafka = KafkaAccess(stack.bootstrap_servers)
    assert set((await ensure_topics(kafka, topic_specs(small))).values()) == {"created"}
    assert (await _describe(kafka, small.jobs_topic))[0] == 3
    with pytest.raises(TopicMismatch, match="has 3 partitions but 24"):
        await ensure_topics(kafka, topic_specs(TopicSettings(**names)))
    admin = kafka.admin()
    await admin.start()
    try:
        await admin.delete_topics(list(names.values()))
    finally:
        await admin.close()


async def test_retention_is_set_on_existing_topics_keeping_their_other_settings(topics):
    jobs, dlq = topics.jobs, topics.settings.dlq_topic
    admin = topics.kafka.admin()
    await admin.start()
    try:  # an operator's own setting on the jobs topic, which AlterConfigs would drop if not written back
        await admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, jobs, {"retention.ms": "-1", "max.message.bytes": "2000000"})]
        )
    finally:
        await admin.close()
    await config_shows(topics.kafka, jobs, "max.message.bytes", "2000000")
    three_days = topics.settings.model_copy(update={"jobs_retention_ms": 259_200_000})
    states = await ensure_topics(topics.kafka, topic_specs(three_days))
    assert states[jobs] == "exists, retention.ms 259200000 (was -1)"
    assert states[dlq] == "exists, retention.ms 259200000 (was -1)"
    assert states[topics.settings.nodes_topic] == "exists", "the compacted topic keeps no retention of time"
    await config_shows(topics.kafka, jobs, "retention.ms", "259200000")
    await config_shows(topics.kafka, dlq, "retention.ms", "259200000")
    _, configs = await _describe(topics.kafka, jobs)
    assert configs["max.message.bytes"] == "2000000", "the operator's setting is kept"
    again = await ensure_topics(topics.kafka, topic_specs(three_days))
    assert set(again.values()) == {"exists"}, "nothing to change the second time"
