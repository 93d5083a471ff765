"""Composition root: builds the objects each command runs from its settings."""

from __future__ import annotations

from infra.stack import DevStack, StackConfig
from voxlog.settings import DevSettings


def dev_stack(settings: DevSettings) -> DevStack:
    return DevStack(
        StackConfig(
            home=settings.dev_home,
            kafka_port=settings.dev_kafka_port,
            kafka_controller_port=settings.dev_kafka_controller_port,
            kafka_heap=settings.dev_kafka_heap,
            postgres_port=settings.dev_postgres_port,
            jar_cache=settings.dev_jar_cache,
            external_database_url=settings.database_url,
            ready_timeout=settings.dev_ready_timeout,
        )
    )
