from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import pytest_asyncio

from foundation.kafka_access import KafkaAccess
from foundation.settings import TopicSettings
from infra.stack import DevStack
from projections.migrations import drop_schema, migrate_database
from tests.support.stack import running_test_stack
from voxlog.topics import ensure_topics, topic_specs


@pytest_asyncio.fixture(scope="session")
async def stack() -> AsyncIterator[DevStack]:
    running, started = await running_test_stack()
    try:
        yield running
    finally:
        if started:
            running.down()


@dataclass(frozen=True)
class Topics:
    kafka: KafkaAccess
    settings: TopicSettings

    @property
    def jobs(self) -> str:
        return self.settings.jobs_topic


def fresh_topic_settings(**overrides: int) -> TopicSettings:
    """Jobs, DLQ and control topics of names no other test uses (``overrides``: partitions and the like)."""
    suffix = uuid.uuid4().hex[:12]
    return TopicSettings(
        jobs_topic=f"test.{suffix}.jobs",
        control_topic=f"test.{suffix}.control",
        dlq_topic=f"test.{suffix}.dlq",
        **overrides,
    )


@contextlib.asynccontextmanager
async def fresh_topics(stack: DevStack) -> AsyncIterator[Topics]:
    """Fresh jobs, DLQ and control topics, deleted afterwards."""
    settings = fresh_topic_settings()
    kafka = KafkaAccess(stack.bootstrap_servers)
    await ensure_topics(kafka, topic_specs(settings))
    yield Topics(kafka, settings)
    admin = kafka.admin()
    await admin.start()
    try:
        await admin.delete_topics([settings.jobs_topic, settings.control_topic, settings.dlq_topic])
    finally:
        await admin.close()


@contextlib.asynccontextmanager
async def fresh_schema(stack: DevStack) -> AsyncIterator[str]:
    """A fresh Postgres schema with the migrations applied, dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    await migrate_database(stack.database_url, name)
    yield name
    await drop_schema(stack.database_url, name)


@pytest_asyncio.fixture
async def topics(stack: DevStack) -> AsyncIterator[Topics]:
    """Fresh jobs, DLQ and control topics for one test, deleted afterwards."""
    async with fresh_topics(stack) as made:
        yield made


@pytest_asyncio.fixture
async def schema(stack: DevStack) -> AsyncIterator[str]:
    """A fresh Postgres schema with the migrations applied for one test, dropped afterwards."""
    async with fresh_schema(stack) as name:
        yield name


@pytest_asyncio.fixture
async def pg(stack: DevStack, schema: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(stack.database_url, server_settings={"search_path": schema})
    yield conn
    await conn.close()


@pytest_asyncio.fixture
async def pool(stack: DevStack, schema: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(
        stack.database_url, min_size=1, max_size=2, server_settings={"search_path": schema}
    )
    yield pool
    await pool.close()
