"""The lock that makes one sweeper (or one delivery process) act: a PostgreSQL advisory lock.

Leadership is a session-level advisory lock held on a connection of its own.
Why a PostgreSQL lock rather than a single-partition consumer group: the
sweeper's input is the projection, so a sweeper that cannot reach PostgreSQL
cannot act anyway, and the lock goes with the connection: a leader that
crashes, or loses the database, loses the lock at once, and a standby takes
it at its next sweep. Kafka membership would add a second failure detector
whose view can disagree with the database the sweeper actually reads.
"""

from __future__ import annotations

from typing import Final

import asyncpg
import structlog

from foundation.db import DATABASE_OUTAGES
from foundation.outages import Outage

log = structlog.get_logger("voxlog.sweeper")
LOCK_NAMESPACE: Final = 0x73776570  # "swep"
QUERY_TIMEOUT_S: Final = 5.0


class AdvisoryLeadership:
    """Held while this process keeps its own connection and the lock on it (one per schema)."""

    def __init__(self, url: str, schema: str, outage: Outage | None = None, namespace: int = LOCK_NAMESPACE) -> None:
        self._url, self._namespace = url, namespace
        self._schema = schema
        self._outage = outage or Outage("PostgreSQL (the sweeper's lock)")  # the sweeper's: it says when it is over
        self._conn: asyncpg.Connection | None = None
        self._held = False

    async def hold(self) -> bool:
        if self._held and self._conn is not None and self._conn.is_closed():
            # The session ended under it (terminated, cut off) and the driver already knows: the lock went
            # with it. Say so for this look, rather than connect again and maybe take the lock straight back.
            log.warning("lost the sweeper lock with its connection", error="the connection was closed")
            await self.resign()
            return False
        try:
            if self._conn is None or self._conn.is_closed():
                self._conn, self._held = await asyncpg.connect(self._url, timeout=QUERY_TIMEOUT_S), False
            if self._held:
                await self._conn.fetchval("SELECT 1", timeout=QUERY_TIMEOUT_S)  # still connected: still ours
            else:
                self._held = bool(
                    await self._conn.fetchval(
                        "SELECT pg_try_advisory_lock($1, hashtext($2))",
                        self._namespace,
                        self._schema,
                        timeout=QUERY_TIMEOUT_S,
                    )
                )
                if self._held:
                    log.info("this sweeper leads", schema=self._schema)
        except DATABASE_OUTAGES as exc:
            # Whatever happened to the session (terminated, cut off), the lock went with it.
            if self._held:
                log.warning("lost the sweeper lock with its connection", error=str(exc))
            await self.resign()
            self._outage.failed(exc, lock="not held")
        return self._held

    async def resign(self) -> None:
        conn, self._conn, self._held = self._conn, None, False
        if conn is not None and not conn.is_closed():
            conn.terminate()  # the lock ends with the session
