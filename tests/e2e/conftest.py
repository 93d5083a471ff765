from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.integration.conftest import Topics, fresh_schema, fresh_topics, pg, schema, stack, topics
from tests.support.apps import AppStack, new_app_stack

__all__ = ["apps", "module_apps", "pg", "schema", "stack", "topics"]


@dataclass
class Apps:
    """Makes app stacks on one set of topics and one schema (``apps(**env)``); stop_all stops every one."""

    stack: Any
    topics: Topics
    schema: str
    home: Path
    made: list[AppStack] = field(default_factory=list)

    def __call__(self, **extra_env: str) -> AppStack:
        app_stack = new_app_stack(
            self.stack, self.topics, self.schema, self.home / f"apps{len(self.made)}", **extra_env
        )
        self.made.append(app_stack)
        return app_stack

    def stop_all(self) -> None:
        for app_stack in self.made:
            app_stack.stop_all()


@pytest_asyncio.fixture
async def apps(stack, topics, schema, tmp_path) -> AsyncIterator[Callable[..., AppStack]]:
    """Build app stacks on this test's topics and schema; every process started is stopped afterwards."""
    made = Apps(stack, topics, schema, tmp_path)
    try:
        yield made
    finally:
        made.stop_all()


@dataclass
class ModuleApps:
    """``apps`` for a whole module, on topics and a schema of their own each: a test module's module-scoped
    fixture starts a deployment once (``start_pipeline(await module_apps.new(), ...)``) for every test of it
    that does not disturb the others (issue 38, item 6). Stopped, and their topics and schemas dropped, after
    the module's last test."""

    stack: Any
    home: Path
    exits: contextlib.AsyncExitStack

    async def new(self) -> Apps:
        topics = await self.exits.enter_async_context(fresh_topics(self.stack))
        schema = await self.exits.enter_async_context(fresh_schema(self.stack))
        made = Apps(self.stack, topics, schema, self.home / schema)
        self.exits.callback(made.stop_all)  # first out: the processes stop before their schema goes
        return made


@pytest_asyncio.fixture(scope="module")
async def module_apps(stack, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ModuleApps]:
    async with contextlib.AsyncExitStack() as exits:
        yield ModuleApps(stack, tmp_path_factory.mktemp("module_apps"), exits)
