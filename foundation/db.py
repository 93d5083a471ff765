"""The Postgres connection pool every voxlog process (and the bench's baseline) opens."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Final

import asyncpg


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Pool reset on release: nothing beyond what asyncpg always does (roll back an open
    transaction, drop listener callbacks). Pooled connections here keep no session state (no
    LISTEN, no session-level advisory locks or SETs; the search path is a startup setting), so
    the default reset query would be one more round trip on every release for nothing."""


DATABASE_OUTAGES: Final = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    # A connection whose protocol was left mid-operation by a server that went away ("cannot switch to
    # state 15; another operation is in progress"): the PostgreSQL restart of the fault campaign met it.
    asyncpg.InternalClientError,
    OSError,
    TimeoutError,
)
"""What the driver raises while PostgreSQL is down, restarting or unreachable."""


@asynccontextmanager
async def reading(what: str, error: Callable[[str], Exception]) -> AsyncIterator[None]:
    """An outage while reading ``what`` raised as the caller's own ``error`` (drivers' errors stop here)."""
    try:
        yield
    except DATABASE_OUTAGES as exc:
        raise error(f"cannot read {what} from PostgreSQL: {type(exc).__name__}: {exc}") from exc


async def open_pool(url: str, schema: str, min_size: int, max_size: int) -> asyncpg.Pool:
    """A pool whose connections use ``schema``. With ``min_size`` 0 it opens no connection until one is
    needed, so a process can start (and answer 503) while PostgreSQL is down."""
    pool: asyncpg.Pool = await asyncpg.create_pool(
        url, min_size=min_size, max_size=max_size, server_settings={"search_path": schema}, reset=_keep_session
    )
    return pool
