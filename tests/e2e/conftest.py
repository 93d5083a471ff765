from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest_asyncio

from tests.integration.conftest import pg, schema, stack, topics
from tests.support.apps import AppStack, new_app_stack

__all__ = ["apps", "pg", "schema", "stack", "topics"]


@pytest_asyncio.fixture
async def apps(stack, topics, schema, tmp_path) -> AsyncIterator[Callable[..., AppStack]]:
    """Build app stacks on this test's topics and schema; every process started is stopped afterwards."""
    made: list[AppStack] = []

    def make(**extra_env: str) -> AppStack:
        app_stack = new_app_stack(stack, topics, schema, tmp_path / f"apps{len(made)}", **extra_env)
        made.append(app_stack)
        return app_stack

    try:
        yield make
    finally:
        for app_stack in made:
            app_stack.stop_all()
