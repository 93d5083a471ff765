"""Ordered plain-SQL migrations of the projection tables.

Files in ``projections/migrations/`` are named ``NNNN_name.sql`` and applied
in order. Each applied file is recorded with its checksum in
``schema_migrations``; an edited file that was already applied is refused
rather than silently skipped. A run holds a transaction-scoped advisory lock,
so processes starting together migrate once. Only the api image applies them
(``voxlog migrate``, the projector at its start); a process with
``VOXLOG_MIGRATE=false`` (the worker images) waits in :func:`check_migrated`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import asyncpg

from projections.errors import DatabaseUnavailable, MigrationError, MigrationsPending

MIGRATIONS_DIR: Final = Path(__file__).parent / "migrations"
_FILE: Final = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_SCHEMA: Final = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_LOCK_NAMESPACE: Final = 0x766F786C  # "voxl"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    """The migrations on disk, in order; versions must run 1, 2, 3, ... without gaps."""
    found = []
    for path in sorted(directory.glob("*.sql")):
        match = _FILE.match(path.name)
        if match is None:
            raise MigrationError(f"{path.name}: migration files are named NNNN_name.sql")
        found.append(Migration(int(match[1]), match[2], path.read_text()))
    for expected, migration in enumerate(found, start=1):
        if migration.version != expected:
            raise MigrationError(f"migration {migration.version:04d} found where {expected:04d} was expected")
    return found


def quote_schema(schema: str) -> str:
    """``schema`` as a quoted identifier, after checking it is a plain lower-case name."""
    if not _SCHEMA.match(schema):
        raise MigrationError(f"schema name {schema!r} must match {_SCHEMA.pattern}")
    return f'"{schema}"'


async def migrate(
    conn: asyncpg.Connection, schema: str = "public", migrations: list[Migration] | None = None
) -> list[Migration]:
    """Apply the pending migrations into ``schema``; returns those applied."""
    todo = load_migrations() if migrations is None else migrations
    quoted = quote_schema(schema)
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", _LOCK_NAMESPACE, schema)
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quoted}")
            await conn.execute(f"SET LOCAL search_path TO {quoted}")
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            applied = {row["version"]: row["checksum"] for row in await conn.fetch("SELECT * FROM schema_migrations")}
            pending = _pending(todo, applied)
            for migration in pending:
                await conn.execute(migration.sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    migration.version,
                    migration.name,
                    migration.checksum,
                )
            return pending
    except asyncpg.exceptions.OperatorInterventionError as exc:  # shutting down, starting up (SQLSTATE 57)
        raise DatabaseUnavailable(f"PostgreSQL is not taking work: {exc}") from exc
    except asyncpg.PostgresError as exc:
        raise MigrationError(f"migrating schema {schema} failed: {exc}") from exc


def _pending(todo: list[Migration], applied: dict[int, str]) -> list[Migration]:
    """The migrations of ``todo`` that ``applied`` (version -> checksum) lacks; an applied one changed since is
    refused."""
    pending = []
    for migration in todo:
        recorded = applied.get(migration.version)
        if recorded is None:
            pending.append(migration)
        elif recorded != migration.checksum:
            raise MigrationError(
                f"migration {migration.version:04d}_{migration.name} was changed after it was applied; "
                "add a new migration instead of editing an applied one"
            )
    return pending


async def check_migrated(url: str, schema: str = "public") -> None:
    """Return once ``schema`` has every migration on disk; raise :class:`MigrationsPending` naming those it
    lacks, for a process that may not apply them (``VOXLOG_MIGRATE=false``) and waits instead."""
    quoted = quote_schema(schema)
    try:
        conn = await asyncpg.connect(url, timeout=10)
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        raise DatabaseUnavailable(f"cannot connect to PostgreSQL to read its migrations: {exc}") from exc
    try:
        rows = await conn.fetch(f"SELECT version, checksum FROM {quoted}.schema_migrations")
    except asyncpg.exceptions.UndefinedTableError:
        rows = []
    except (asyncpg.InterfaceError, OSError) as exc:
        raise DatabaseUnavailable(f"PostgreSQL went away while its migrations were read: {exc}") from exc
    finally:
        await conn.close()
    pending = _pending(load_migrations(), {row["version"]: row["checksum"] for row in rows})
    if pending:
        names = ", ".join(f"{m.version:04d}_{m.name}" for m in pending)
        raise MigrationsPending(
            f"schema {schema} lacks migrations {names}, and VOXLOG_MIGRATE=false here: run `voxlog migrate`"
            " from the api image"
        )


async def drop_schema(url: str, schema: str) -> None:
    """Drop ``schema`` and everything in it, if it exists (tests' and benchmarks' own schemas)."""
    conn = await asyncpg.connect(url, timeout=10)
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {quote_schema(schema)} CASCADE")
    finally:
        await conn.close()


async def migrate_database(url: str, schema: str = "public") -> list[Migration]:
    """Connect to ``url`` and apply the pending migrations into ``schema``."""
    try:
        conn = await asyncpg.connect(url, timeout=10)
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        raise DatabaseUnavailable(f"cannot connect to PostgreSQL to migrate: {exc}") from exc
    try:
        return await migrate(conn, schema)
    except (asyncpg.InterfaceError, OSError) as exc:  # the connection went away mid-way
        raise DatabaseUnavailable(f"PostgreSQL went away while migrating: {exc}") from exc
    finally:
        await conn.close()
