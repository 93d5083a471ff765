from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from projections.errors import MigrationError, MigrationsPending
from projections.migrations import (
    Migration,
    check_migrated,
    drop_schema,
    load_migrations,
    migrate,
    migrate_database,
    quote_schema,
)
from projections.rebuild import NOT_FROM_THE_LOG
from projections.rows import TABLES as PROJECTED

TABLES = {
    "jobs",
    "segments",
    "job_events",
    "result_cache",
    "projection_offsets",
    "nodes",
    "node_heartbeats",
    "service_modes",
    "documents",
    "placements",
    "api_keys",
    "usage_daily",
    "rate_buckets",
    "admissions",
    "admission_leases",
    "lexicon",
    "webhook_endpoints",
    "webhook_deliveries",
    "schema_migrations",
}


async def test_migrations_apply_twice_without_error(stack, schema, pg):
    # The fixture applied them once already.
    assert await migrate_database(stack.database_url, schema) == []
    tables = {
        row["table_name"]
        for row in await pg.fetch("SELECT table_name FROM information_schema.tables WHERE table_schema = $1", schema)
    }
    assert tables == TABLES
    recorded = await pg.fetch("SELECT version, name, checksum FROM schema_migrations ORDER BY version")
    assert [(r["version"], r["name"], r["checksum"]) for r in recorded] == [
        (m.version, m.name, m.checksum) for m in load_migrations()
    ]


async def test_concurrent_migrations_apply_once(stack):
    name = f"t_{uuid.uuid4().hex[:16]}"
    try:
        results = await asyncio.gather(*(migrate_database(stack.database_url, name) for _ in range(4)))
        assert sorted(len(applied) for applied in results) == [0, 0, 0, len(load_migrations())]
    finally:
        await drop_schema(stack.database_url, name)


async def test_an_edited_applied_migration_is_refused(stack, schema):
    edited = [Migration(m.version, m.name, m.sql + "\n-- edited") for m in load_migrations()]
    conn = await asyncpg.connect(stack.database_url)
    try:
        with pytest.raises(MigrationError, match="changed after it was applied"):
            await migrate(conn, schema, edited)
    finally:
        await conn.close()


async def test_a_failing_migration_leaves_nothing_behind(stack):
    name = f"t_{uuid.uuid4().hex[:16]}"
    broken = [*load_migrations(), Migration(len(load_migrations()) + 1, "broken", "CREATE TABLE jobs (x int);")]
    conn = await asyncpg.connect(stack.database_url)
    try:
        with pytest.raises(MigrationError, match="already exists"):
            await migrate(conn, name, broken)
        exists = await conn.fetchval("SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1", name)
        assert exists == 0
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        await conn.close()


async def test_the_table_descriptions_are_the_migrated_tables(pg, schema):
    """The writers build their statements from projections.rows.TABLES: every column of each table, with its
    SQL type, in the migrated order (the columns the log does not determine aside), and its primary key."""
    for table in PROJECTED:
        found = await pg.fetch(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            f"{quote_schema(schema)}.{table.name}",
        )
        described = list(zip(table.columns, table.types, strict=True))
        assert [tuple(r) for r in found if f"{table.name}.{r[0]}" not in NOT_FROM_THE_LOG] == described
        key = await pg.fetchval(
            "SELECT array_agg(a.attname ORDER BY array_position(i.indkey, a.attnum)) FROM pg_index i"
            " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)"
            " WHERE i.indrelid = $1::regclass AND i.indisprimary",
            f"{quote_schema(schema)}.{table.name}",
        )
        assert tuple(key) == table.key, table.name


async def test_a_process_that_may_not_migrate_waits_until_another_has(stack):
    """VOXLOG_MIGRATE=false (the worker images): a projector there checks the schema instead of migrating it,
    and is told which migrations it lacks until the api image has applied them."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    last = load_migrations()[-1]
    try:
        with pytest.raises(MigrationsPending, match=f"lacks migrations 0001_.*{last.version:04d}_{last.name}"):
            await check_migrated(stack.database_url, name)
        conn = await asyncpg.connect(stack.database_url)
        try:
            await migrate(conn, name, load_migrations()[:-1])
        finally:
            await conn.close()
        with pytest.raises(MigrationsPending, match=f"lacks migrations {last.version:04d}_{last.name}, and"):
            await check_migrated(stack.database_url, name)
        await migrate_database(stack.database_url, name)
        await check_migrated(stack.database_url, name)  # nothing pending: returns
    finally:
        await drop_schema(stack.database_url, name)
