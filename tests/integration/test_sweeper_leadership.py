"""Exactly one sweeper acts: a PostgreSQL advisory lock, held with a connection of its own."""

from __future__ import annotations

from consumers.sweeper_store import AdvisoryLeadership


async def test_one_sweeper_leads_and_a_standby_takes_over_when_the_leader_loses_its_connection(stack, schema, pg):
    first, second = AdvisoryLeadership(stack.database_url, schema), AdvisoryLeadership(stack.database_url, schema)
    other_schema = AdvisoryLeadership(stack.database_url, f"{schema}_other")
    try:
        assert await first.hold()
        assert not await second.hold(), "one leader per schema"
        assert await first.hold(), "the leader keeps leading"
        assert await other_schema.hold(), "another deployment (schema) has its own sweeper"

        # The leader's session dies (a network cut, a database restart): the lock goes with it.
        assert (
            await pg.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_locks"
                " WHERE locktype = 'advisory' AND objid = hashtext($1)::oid AND granted",
                schema,
            )
            == 1
        )
        assert not await first.hold(), "a leader that lost its connection knows it"
        assert await second.hold(), "and the standby takes over at its next look"
        assert not await first.hold()
    finally:
        for leadership in (first, second, other_schema):
            await leadership.release()
