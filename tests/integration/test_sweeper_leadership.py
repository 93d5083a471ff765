"""Exactly one sweeper acts: a PostgreSQL advisory lock, held with a connection of its own."""

from __future__ import annotations

import asyncio
import time

import asyncpg

from consumers.leadership import AdvisoryLeadership


async def gone(pg: asyncpg.Connection, pid: int, within_s: float = 30.0) -> None:
    deadline = time.monotonic() + within_s
    while await pg.fetchval("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid):
        assert time.monotonic() < deadline, f"backend {pid} still there after {within_s}s"
        await asyncio.sleep(0.05)


async def test_one_sweeper_leads_and_a_standby_takes_over_when_the_leader_loses_its_connection(stack, schema, pg):
    """Regression: a leader whose closed session the driver had already noticed connected again and took the
    free lock straight back, never saying it had lost it (the test passed only while its check came first)."""
    first, second = AdvisoryLeadership(stack.database_url, schema), AdvisoryLeadership(stack.database_url, schema)
    other_schema = AdvisoryLeadership(stack.database_url, f"{schema}_other")
    try:
        assert await first.hold()
        assert not await second.hold(), "one leader per schema"
        assert await first.hold(), "the leader keeps leading"
        assert await other_schema.hold(), "another deployment (schema) has its own sweeper"

        # The leader's session dies (a network cut, a database restart): the lock goes with it.
        leader = await pg.fetch(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = hashtext($1)::oid AND granted", schema
        )
        assert len(leader) == 1
        assert await pg.fetchval("SELECT pg_terminate_backend($1)", leader[0]["pid"])
        # pg_terminate_backend only signals: until the backend is gone it may still answer one more query.
        await gone(pg, leader[0]["pid"])
        assert not await first.hold(), "a leader that lost its connection knows it"
        assert await second.hold(), "and the standby takes over at its next look"
        assert not await first.hold()
    finally:
        for leadership in (first, second, other_schema):
            await leadership.resign()
