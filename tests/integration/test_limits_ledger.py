"""PostgreSQL's ledger of the limits (producers.limits_ledger): token buckets by the database's clock, and
admissions that hold a quota when several API instances (here, pools of their own) admit at once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import asyncpg
import pytest

from contracts import JobQueued, JobQueuedPayload, job_event, utc_now
from foundation.db import open_pool
from foundation.kafka import RecordPosition
from producers.api_keys import Principal
from producers.errors import Rejected
from producers.limits_ledger import Admitted, PgLedger, Reserve
from producers.quotas import Quotas
from producers.rate_leases import LeasedBuckets
from producers.tenant_limits import Policies, TenantLimits
from projections.batch_apply import apply_events
from projections.errors import ProjectionUnavailable
from projections.reads.standing import read_standing
from tests.support.api_fakes import PRODUCER
from tests.support.events import request

pytestmark = pytest.mark.integration

KEY = Principal("acme", "0123456789ab", frozenset({"submit"}))


async def test_a_bucket_gives_its_burst_then_refuses_until_time_refills_it(pool, pg):
    ledger = PgLedger(pool)
    taken = [await ledger.lease("k1", 1, 0, rate_per_s=1.0, burst=3) for _ in range(4)]
    assert [b.granted for b in taken] == [1, 1, 1, 0]
    assert taken[2].tokens < 1
    # The database's clock refills it: ten seconds ago, as far as the bucket knows.
    await pg.execute("UPDATE rate_buckets SET updated_at = updated_at - interval '10 seconds' WHERE key_id = 'k1'")
    again = await ledger.lease("k1", 1, 0, rate_per_s=1.0, burst=3)
    assert again.granted == 1
    assert again.tokens == pytest.approx(2, abs=0.1), "refilled to the burst, never past it, less this request"
    other = await ledger.lease("k2", 1, 0, rate_per_s=1.0, burst=3)
    assert other.granted == 1, "each key has its own bucket"


async def test_a_block_is_as_many_whole_tokens_as_the_bucket_holds_and_tokens_come_back_to_the_burst(pool, pg):
    ledger = PgLedger(pool)
    first = await ledger.lease("k1", 8, 0, rate_per_s=0.001, burst=10)
    assert (first.granted, round(first.tokens)) == (8, 2)
    short = await ledger.lease("k1", 8, 0, rate_per_s=0.001, burst=10)
    assert short.granted == 2, "what was left: whole tokens only"
    assert short.tokens < 1
    back = await ledger.lease("k1", 0, 6, rate_per_s=0.001, burst=10)
    assert back.granted == 0
    assert back.tokens == pytest.approx(6, abs=0.01)
    full = await ledger.lease("k1", 0, 50, rate_per_s=0.001, burst=10)
    assert full.tokens == pytest.approx(10), "never past the burst"


async def test_two_apis_taking_blocks_from_one_bucket_at_once_give_exactly_its_burst(stack, schema):
    pools = [await open_pool(stack.database_url, schema, min_size=1, max_size=4) for _ in range(2)]
    try:
        # Blocks of 10 (the rate is so slow that nothing refills while the test runs).
        apis = [LeasedBuckets(PgLedger(p), lease_s=1000.0) for p in pools]
        taken = await asyncio.gather(*(apis[i % 2].take("shared", rate_per_s=0.01, burst=40) for i in range(60)))
        assert sum(b.granted for b in taken) == 40
        assert sum(api.round_trips for api in apis) <= 6, "four blocks, and one refusal each"
        # What an instance holds and does not give out goes back at its close, for the other to give.
        again = await asyncio.gather(*(apis[0].take("mine", rate_per_s=0.01, burst=40) for i in range(3)))
        assert all(b.granted for b in again)
        await apis[0].close()
        others = [await apis[1].take("mine", rate_per_s=0.01, burst=40) for _ in range(40)]
        assert sum(b.granted for b in others) == 37
    finally:
        for p in pools:
            await p.close()


async def test_a_quota_holds_when_two_apis_admit_at_once(stack, schema, pg):
    """Each admits 10-character jobs against 100 characters a day, with leases: whatever the interleaving, never
    more than ten at once, and once the leases are settled exactly ten in all."""
    pools = [await open_pool(stack.database_url, schema, min_size=1, max_size=4) for _ in range(2)]
    policies = Policies(replace(TenantLimits(), chars_per_day=100), {})
    try:
        apis = [Quotas(PgLedger(p), policies) for p in pools]

        async def submit(i: int) -> int:
            try:
                await apis[i % 2].admit(KEY, [Admitted(uuid.uuid4(), 10, True)])
            except Rejected as exc:
                return exc.status
            return 202

        admitted = await asyncio.gather(*(submit(i) for i in range(25)))
        assert 1 <= admitted.count(202) <= 10
        assert set(admitted) <= {202, 429}
        for api in apis:
            await api.close()
        assert await pg.fetchval("SELECT count(*) FROM admission_leases") == 0, "settled"
        assert await pg.fetchval("SELECT count(*) FROM admissions") == admitted.count(202), "every job admitted"
        later = [await submit(0) for _ in range(12)]
    finally:
        for p in pools:
            await p.close()
    assert admitted.count(202) + later.count(202) == 10
    assert later[-2:] == [429, 429]


async def test_a_lease_counts_for_every_instance_until_settled_or_expired(pool, pg):
    ledger = PgLedger(pool)
    today = datetime.now(UTC).date()
    lease_id, job = uuid.uuid4(), uuid.uuid4()
    async with ledger.hold("acme", KEY.key_id, today) as held:
        await held.admit([Admitted(job, 7, True, 700)], lease_id, Reserve(chars=50, audio_ms=5000, live=3), 60)
    async with ledger.hold("acme", KEY.key_id, today) as held:
        standing = await held.standing()
    assert (standing.chars_today, standing.audio_ms_month, standing.live_jobs) == (57, 5700, 4)
    assert (standing.leased_chars, standing.leased_audio_ms, standing.leased_live) == (50, 5000, 3)
    other_key = await read_standing(pg, "acme", "another-key", today, 5)
    assert (other_key.chars_today, other_key.live_jobs) == (57, 0), "characters are the tenant's, live jobs a key's"
    settled = [Admitted(uuid.uuid4(), 20, True, 2000), Admitted(uuid.uuid4(), 5, False, 100)]
    await ledger.settle("acme", KEY.key_id, lease_id, settled)
    after = await read_standing(pg, "acme", KEY.key_id, today, 5)
    assert (after.chars_today, after.audio_ms_today, after.live_jobs) == (32, 2800, 2), "the lease became its jobs"
    assert after.leased_chars == 0
    # An instance that died holding a lease: counted until it expires, then pruned with the next hold.
    gone = uuid.uuid4()
    async with ledger.hold("acme", KEY.key_id, today) as held:
        await held.admit([], gone, Reserve(chars=1000), 60)
    assert (await read_standing(pg, "acme", KEY.key_id, today, 5)).chars_today == 1032
    await pg.execute("UPDATE admission_leases SET expires_at = now() - interval '1 second'")
    assert (await read_standing(pg, "acme", KEY.key_id, today, 5)).chars_today == 32
    async with ledger.hold("acme", KEY.key_id, today):
        pass
    assert await pg.fetchval("SELECT count(*) FROM admission_leases") == 0


async def test_admitted_jobs_count_until_projected_and_then_by_the_projection(pool, pg):
    ledger = PgLedger(pool)
    today = datetime.now(UTC).date()
    job = uuid.uuid4()
    async with ledger.hold("acme", "0123456789ab", today) as held:
        assert (await held.standing()).live_jobs == 0
        await held.admit([Admitted(job, 40, True), Admitted(uuid.uuid4(), 5, False)])
    async with ledger.hold("acme", "0123456789ab", today) as held:
        standing = await held.standing()
    assert (standing.chars_today, standing.live_jobs) == (45, 1)
    # The projection shows the first job (queued, by this key) and its usage: it is counted once.
    await project_queued(pg, job, "0123456789ab", "x" * 40)
    async with ledger.hold("acme", "0123456789ab", today) as held:
        standing = await held.standing()
    live, chars = standing.live_jobs, standing.chars_today
    assert live == 1, "the projected job counts once, as the projection's"
    assert chars == 40 + 5, "the usage row, and the admitted job the projection does not show yet"
    await ledger.forget([job])
    assert await pg.fetchval("SELECT count(*) FROM admissions WHERE job_id = $1", job) == 0


async def test_a_ledger_whose_database_is_gone_says_so_in_our_terms(stack, schema):
    ledger_pool = await open_pool(stack.database_url, schema, min_size=0, max_size=1)
    await ledger_pool.close()
    with pytest.raises(ProjectionUnavailable):
        await PgLedger(ledger_pool).lease("k", 1, 0, 1.0, 1)


async def test_a_batch_charged_by_its_jobs_leaves_the_bucket_in_debt_until_time_pays_it(pool, pg):
    """Issue 40, item 4: a batch of 10,000 cost one token of the rate."""
    ledger = PgLedger(pool)
    assert (await ledger.lease("k1", 1, 0, rate_per_s=1.0, burst=3)).granted
    assert await ledger.charge("nobody", 5, 1.0, 3) is None, "a key with no bucket yet: its first request makes one"
    left = await ledger.charge("k1", 9, rate_per_s=1.0, burst=3)
    assert left == pytest.approx(2 - 9, abs=0.1)
    refused = await ledger.lease("k1", 1, 0, rate_per_s=1.0, burst=3)
    assert not refused.granted
    assert refused.tokens < 0, "the debt is what Retry-After is computed from"
    await pg.execute("UPDATE rate_buckets SET updated_at = updated_at - interval '9 seconds' WHERE key_id = 'k1'")
    assert (await ledger.lease("k1", 1, 0, rate_per_s=1.0, burst=3)).granted, "paid for: 9 s at 1 a second"


async def test_regression_an_admission_counts_while_the_projector_lags_past_ten_minutes(pool, pg):
    """Issue 40, item 8: admissions were dropped after ten minutes, so while the projector lagged a tenant's
    quotas and a key's live jobs started again from the projection's figures."""
    ledger = PgLedger(pool)
    today = datetime.now(UTC).date()
    job = uuid.uuid4()
    async with ledger.hold("acme", "0123456789ab", today) as held:
        await held.admit([Admitted(job, 40, True, audio_ms=3_000)])
    await pg.execute("UPDATE admissions SET admitted_at = now() - interval '1 hour'")
    async with ledger.hold("acme", "0123456789ab", today) as held:
        standing = await held.standing()
    assert (standing.chars_today, standing.live_jobs, standing.audio_ms_today) == (40, 1, 3_000)
    # Projected and still queued: its characters and live job are the projection's, its expected audio the
    # admission's until the job ends.
    await project_queued(pg, job, "0123456789ab", "x" * 40)
    async with ledger.hold("acme", "0123456789ab", today) as held:
        standing = await held.standing()
    assert (standing.chars_today, standing.live_jobs, standing.audio_ms_today) == (40, 1, 3_000)
    await pg.execute("UPDATE jobs SET state = 'cancelled' WHERE job_id = $1", job)
    async with ledger.hold("acme", "0123456789ab", today) as held:
        standing = await held.standing()
    assert (standing.live_jobs, standing.audio_ms_today) == (0, 0)
    assert await pg.fetchval("SELECT count(*) FROM admissions") == 0, "dropped once its job ended"


async def project_queued(pg: asyncpg.Connection, job_id: uuid.UUID, key_id: str, text: str) -> None:
    """The job's JobQueued, applied by the projector's own writer (which counts its usage too)."""
    payload = JobQueuedPayload(request=request(text), submitted_at=utc_now(), tenant="acme", key_id=key_id)
    event = job_event(JobQueued, job_id, payload.request.fingerprint(), 0, PRODUCER, payload)
    await apply_events(pg, [(event, RecordPosition("jobs", 0, 0))], cache_ttl=timedelta(minutes=1))


class _ProjectorBetweenStatements:
    """The ledger's connection, with the projector committing a job's JobQueued before its second statement:
    the interleaving that CI met once in two API instances sharing a quota (tests/e2e/test_tenancy.py)."""

    def __init__(self, conn: asyncpg.Connection, commit: Callable[[], Awaitable[None]]) -> None:
        self._conn, self._commit, self.statements = conn, commit, 0

    async def _before(self) -> None:
        self.statements += 1
        if self.statements == 2:
            await self._commit()

    async def fetchrow(self, *args: Any, **kwargs: Any) -> Any:
        await self._before()
        return await self._conn.fetchrow(*args, **kwargs)

    async def fetchval(self, *args: Any, **kwargs: Any) -> Any:
        await self._before()
        return await self._conn.fetchval(*args, **kwargs)


async def test_regression_a_job_projected_while_the_standing_is_read_is_counted_once(pool, pg):
    """The standing read the usage and the admissions in separate statements: a projector commit between them
    showed the usage without the job, then the job (so not its admission), and the job counted for nothing; a
    second API admitted 40 characters past a quota of 100 (CI on 256b287)."""
    ledger = PgLedger(pool)
    today = datetime.now(UTC).date()
    job = uuid.uuid4()
    async with ledger.hold("acme", "0123456789ab", today) as held:
        await held.admit([Admitted(job, 40, True)])
    async with pool.acquire() as conn, conn.transaction():
        raced = _ProjectorBetweenStatements(conn, lambda: project_queued(pg, job, "0123456789ab", "x" * 40))
        standing = await read_standing(cast(asyncpg.Connection, raced), "acme", "0123456789ab", today, 10.0)
        if raced.statements < 2:  # one statement: no commit can fall between, so it comes after
            await project_queued(pg, job, "0123456789ab", "x" * 40)
        settled = await read_standing(conn, "acme", "0123456789ab", today, 10.0)
    assert await pg.fetchval("SELECT count(*) FROM jobs WHERE job_id = $1", job) == 1, "the projector committed"
    assert (standing.chars_today, standing.live_jobs) == (40, 1), "counted once, whenever the projector commits"
    assert (settled.chars_today, settled.live_jobs) == (40, 1)
