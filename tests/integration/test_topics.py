from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from contracts import header_value
from foundation.kafka_access import KafkaAccess
from foundation.settings import TopicSettings
from tests.support.cli import voxlog
from tests.support.kafka import read_to_end
from voxlog.errors import TopicMismatch
from voxlog.topic_migration import COPIED_FROM, TopicCopy, copy_legacy_topic
from voxlog.topics import TopicSpec, ensure_topics, topic_specs

Record = tuple[bytes, bytes | None, list[tuple[str, bytes]]]


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
    _, control_configs = await _describe(topics.kafka, topics.settings.control_topic)
    assert control_configs["cleanup.policy"] == "compact"


async def test_partition_count_is_configurable_and_checked(stack):
    suffix = uuid.uuid4().hex[:10]
    names = {"jobs_topic": f"p.{suffix}.jobs", "control_topic": f"p.{suffix}.control", "dlq_topic": f"p.{suffix}.dlq"}
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
    assert states[topics.settings.control_topic] == "exists", "the compacted topic keeps no retention of time"
    await config_shows(topics.kafka, jobs, "retention.ms", "259200000")
    await config_shows(topics.kafka, dlq, "retention.ms", "259200000")
    _, configs = await _describe(topics.kafka, jobs)
    assert configs["max.message.bytes"] == "2000000", "the operator's setting is kept"
    again = await ensure_topics(topics.kafka, topic_specs(three_days))
    assert set(again.values()) == {"exists"}, "nothing to change the second time"


@contextlib.asynccontextmanager
async def legacy_topic(kafka: KafkaAccess) -> AsyncIterator[str]:
    """A compacted topic as the nodes topic was made, of a name no other test uses; deleted afterwards."""
    name = f"legacy.{uuid.uuid4().hex[:12]}.nodes"
    await ensure_topics(kafka, [TopicSpec(name, 1, None, {"cleanup.policy": "compact"})])
    try:
        yield name
    finally:
        admin = kafka.admin()
        await admin.start()
        try:
            await admin.delete_topics([name])
        finally:
            await admin.close()


async def write(kafka: KafkaAccess, topic: str, records: list[Record], timestamp_ms: int | None = None) -> None:
    producer = kafka.producer(enable_idempotence=True, acks="all")
    await producer.start()
    try:
        for key, value, headers in records:
            await producer.send_and_wait(topic, value=value, key=key, headers=headers, timestamp_ms=timestamp_ms)
    finally:
        await producer.stop()


async def held(kafka: KafkaAccess, topic: str) -> list[tuple[Record, str | None]]:
    """Each record of ``topic`` in order (its headers but the stamp), and its stamp."""
    return [
        (
            (r.key, r.value, [(name, bytes(value)) for name, value in r.headers if name != COPIED_FROM]),
            header_value(r.headers, COPIED_FROM),
        )
        for r in await read_to_end(kafka, topic)
    ]


async def migrate(kafka: KafkaAccess, legacy: str, control: str) -> TopicCopy:
    """A run of the migration that had an old topic to copy from."""
    copied = await copy_legacy_topic(kafka, legacy, control)
    assert copied is not None, f"{legacy} exists"
    return copied


FIRST: list[Record] = [
    (b"key/k1", b'{"v": 1}', [("type", b"ApiKeyIssued"), ("schema_version", b"1")]),
    (b"lexicon/tomato", b'{"v": 2}', [("type", b"LexiconEntrySet")]),
    (b"key/k1", b'{"v": 3}', [("type", b"ApiKeyRevoked"), ("traceparent", b"00-ab-cd-01")]),
    (b"lexicon/tomato", None, []),  # a tombstone: compaction's deletion, copied as one
]


async def test_the_old_nodes_topic_is_copied_into_the_control_topic_once_and_then_what_it_gained(topics):
    control = topics.settings.control_topic
    async with legacy_topic(topics.kafka) as legacy:
        await write(topics.kafka, legacy, FIRST)
        first = await migrate(topics.kafka, legacy, control)
        assert first.describe() == f"{legacy} -> {control}: 4 records copied"
        assert await held(topics.kafka, control) == [(r, f"{legacy}:0:{n}") for n, r in enumerate(FIRST)]

        again = await migrate(topics.kafka, legacy, control)
        assert again.copied == 0, "a second run finds every record copied"

        later: list[Record] = [(b"webhook/e1", b'{"v": 4}', [("type", b"WebhookEndpointSet")])]
        await write(topics.kafka, legacy, later)
        resumed = await migrate(topics.kafka, legacy, control)
        assert resumed.copied == 1, "what the old topic gained since is copied"
        records = [r for r, _ in await held(topics.kafka, control)]
        assert records == FIRST + later, "in order, keys, values and headers kept"


async def test_a_copy_cut_short_goes_on_after_its_last_record_and_leaves_out_what_the_new_version_wrote(topics):
    control = topics.settings.control_topic
    async with legacy_topic(topics.kafka) as legacy:
        await write(topics.kafka, legacy, FIRST)
        # A run that stopped after two copies: the control topic holds them, stamped.
        copies = [(k, v, [*h, (COPIED_FROM, f"{legacy}:0:{n}".encode())]) for n, (k, v, h) in enumerate(FIRST[:2])]
        await write(topics.kafka, control, copies)
        went_on = await migrate(topics.kafka, legacy, control)
        assert went_on.copied == 2
        assert [r for r, _ in await held(topics.kafka, control)] == FIRST

        # The new version writes a key; an old one then writes that key, by an earlier clock, and another key.
        now_ms = int(time.time() * 1000)
        await write(topics.kafka, control, [(b"mode/cache-only/operator", b'{"new": true}', [])], now_ms)
        await write(topics.kafka, legacy, [(b"mode/cache-only/operator", b'{"old": true}', [])], now_ms - 60_000)
        await write(topics.kafka, legacy, [(b"key/k2", b'{"v": 5}', [])], now_ms - 60_000)
        last = await migrate(topics.kafka, legacy, control)
        assert (last.copied, last.superseded) == (1, 1)
        assert last.describe().endswith("1 record copied, 1 left out (a later record of their key is there)")
        tail = [r for r, _ in await held(topics.kafka, control)][-2:]
        assert tail == [(b"mode/cache-only/operator", b'{"new": true}', []), (b"key/k2", b'{"v": 5}', [])]

    never = f"never.{uuid.uuid4().hex[:12]}.nodes"
    assert await copy_legacy_topic(topics.kafka, never, control) is None, "no old topic: nothing to copy"
    with pytest.raises(TopicMismatch, match="does not exist"):
        await copy_legacy_topic(topics.kafka, never, control, required=True)
    assert await copy_legacy_topic(topics.kafka, control, control, required=True) is None


async def test_voxlog_topics_copies_the_old_topic_it_is_named_and_refuses_the_old_variable(topics):
    settings = topics.settings
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/root"),
        "VOXLOG_KAFKA_BOOTSTRAP_SERVERS": topics.kafka.bootstrap_servers,
        "VOXLOG_JOBS_TOPIC": settings.jobs_topic,
        "VOXLOG_DLQ_TOPIC": settings.dlq_topic,
    }
    control = {**env, "VOXLOG_CONTROL_TOPIC": settings.control_topic}
    async with legacy_topic(topics.kafka) as legacy:
        await write(topics.kafka, legacy, FIRST)
        first = await asyncio.to_thread(voxlog, control, "topics", "--migrate-from", legacy, timeout_s=120)
        assert first.returncode == 0, first.stderr[-2000:]
        assert first.stdout.splitlines() == [
            f"{settings.jobs_topic}: exists",
            f"{settings.dlq_topic}: exists",
            f"{settings.control_topic}: exists",
            f"{legacy} -> {settings.control_topic}: 4 records copied",
        ]
        again = await asyncio.to_thread(voxlog, control, "topics", "--migrate-from", legacy, timeout_s=120)
        assert again.stdout.splitlines()[-1] == f"{legacy} -> {settings.control_topic}: 0 records copied"

        renamed = await asyncio.to_thread(voxlog, {**env, "VOXLOG_NODES_TOPIC": legacy}, "topics", timeout_s=120)
        assert renamed.returncode == 2
        assert f"run `voxlog topics --migrate-from {legacy}`" in renamed.stderr
    never = f"never.{uuid.uuid4().hex[:12]}.nodes"
    missing = await asyncio.to_thread(voxlog, control, "topics", "--migrate-from", never, timeout_s=120)
    assert (missing.returncode, missing.stderr.strip()) == (
        2,
        f"voxlog: topic {never} does not exist: there is nothing to copy into {settings.control_topic}",
    )
