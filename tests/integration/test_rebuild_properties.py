"""A projection rebuilt from the log in memory and copied in whole equals the live projector's, row by row.

Both fold with the one projection (projections.reducer); what differs is the way there: the live projector
folds each batch onto the rows it reads back from PostgreSQL and writes what changed, replay folds the
whole log in memory and copies it in. Node events ride in the same batches as job events.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import asyncpg
import pytest_asyncio
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from contracts import JobEvent
from foundation.kafka import RecordPosition
from projections.migrations import drop_schema, migrate_database, quote_schema
from projections.rebuild import compare, write
from projections.reducer import Projection, is_node_event
from projections.rows import TABLES
from tests.integration.test_fencing_properties import CONFIG, Log, positions, project
from tests.support.events import T0, node_announced
from tests.support.job_logs import _Builder, arbitrary_logs, realistic_logs
from tests.support.node_logs import with_node_events

PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest_asyncio.fixture
async def rebuilt(stack) -> AsyncIterator[str]:
    name = f"r_{uuid.uuid4().hex[:16]}"
    await migrate_database(stack.database_url, name)
    yield name
    await drop_schema(stack.database_url, name)


async def rebuild_and_compare(pool: asyncpg.Pool, schema: str, rebuilt: str, log: Log, cuts) -> None:
    await project(pool, log, cuts)
    projection = Projection(CONFIG.cache_ttl)
    for event, (topic, offset) in zip(log, positions(log), strict=True):
        if is_node_event(event):
            projection.apply_node(event, RecordPosition(topic, 0, offset))
        else:
            projection.apply(event, RecordPosition(topic, 0, offset))
    async with pool.acquire() as conn:
        tables = [*(t.name for t in TABLES), "projection_offsets"]
        await conn.execute(f"TRUNCATE {', '.join(f'{quote_schema(rebuilt)}.{t}' for t in tables)}")
        await write(conn, rebuilt, projection, "replay")
        assert await compare(conn, schema, rebuilt, (CONFIG.name, "replay")) == []


CUTS = st.lists(st.integers(0, 200), max_size=3)


def reuse() -> list[JobEvent]:
    """A result reused twice after it was made, the second reuse later than the first (the cache's hit time)."""
    made, first, second = (_Builder(uuid.UUID(int=n), request_text="Shared.") for n in (101, 102, 103))
    log = [made.queued(), made.claimed(1), made.segment(1, 0), made.completed(1, 1)]
    log += [
        first.queued(),
        first.completed(0, 1, cache_hit=True),
        second.queued(),
        second.completed(0, 1, cache_hit=True),
    ]
    return [e.model_copy(update={"occurred_at": T0 + timedelta(seconds=i)}) for i, e in enumerate(log)]


@PROPERTY
@given(events=realistic_logs(), cuts=CUTS)
@example(events=reuse(), cuts=[])
async def test_a_rebuilt_projection_equals_the_live_one_on_realistic_logs(pool, schema, rebuilt, events, cuts):
    await rebuild_and_compare(pool, schema, rebuilt, events, cuts)


@PROPERTY
@given(events=arbitrary_logs(), cuts=CUTS)
async def test_a_rebuilt_projection_equals_the_live_one_on_any_sequence(pool, schema, rebuilt, events, cuts):
    await rebuild_and_compare(pool, schema, rebuilt, events, cuts)


@PROPERTY
@given(log=with_node_events(realistic_logs()), cuts=CUTS)
async def test_a_rebuilt_projection_equals_the_live_one_with_node_events_in_its_batches(
    pool, schema, rebuilt, log, cuts
):
    await rebuild_and_compare(pool, schema, rebuilt, log, cuts)


async def test_a_difference_is_reported_by_table_key_and_column(pool, schema, rebuilt):
    projection = Projection(timedelta(minutes=10))
    projection.apply_node(node_announced("w-a"), RecordPosition("nodes", 0, 0))
    async with pool.acquire() as conn:
        await write(conn, rebuilt, projection, "replay")
        await write(conn, schema, projection, "live")
        assert await compare(conn, schema, rebuilt, ("live", "replay")) == []
        await conn.execute(f"UPDATE {quote_schema(schema)}.nodes SET device = 'cuda:0'")
        [difference] = await compare(conn, schema, rebuilt, ("live", "replay"))
    assert difference.line() == "nodes w-a: device: 'cuda:0' live, 'cpu' rebuilt"
