"""Quotas and live jobs judged from a lease an API instance holds (producers.quota_leases, producers.quotas): how
often the ledger is asked, that no limit is passed over several instances, and that a lease's jobs reach the
ledger (settled) whatever ends it. The ledger is in memory (tests.unit.test_limits.Ledger, counting what was
admitted and leased as PostgreSQL's standing does); PostgreSQL's has its own test (integration)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from producers.errors import Rejected
from producers.limits_ledger import Admitted
from producers.quota_leases import LEASE_S, LEASE_SHARE
from producers.quotas import Quotas
from producers.tenant_limits import Policies, TenantLimits
from tests.unit.test_limits import ALICE, NOON, Ledger, jobs

pytestmark = pytest.mark.unit


class Clocks:
    def __init__(self) -> None:
        self.wall = NOON
        self.mono = 50.0


def quotas(ledger: Ledger, clocks: Clocks, **limits: float) -> Quotas:
    policies = Policies(replace(TenantLimits(), **limits), {})
    return Quotas(ledger, policies, clock=lambda: clocks.wall, monotonic=lambda: clocks.mono)


async def test_a_key_far_from_its_limits_is_judged_once_a_lease_not_once_a_submission():
    ledger, clocks = Ledger(counting=True), Clocks()
    q = quotas(ledger, clocks, chars_per_day=1_000_000, max_live_jobs=20_000)
    admitted = [await q.admit(ALICE, jobs(100)) for _ in range(50)]
    assert all(len(ids) == 1 for ids in admitted)
    assert ledger.days == [NOON.date()], "one hold for fifty submissions"
    (reserve,) = ledger.leases.values()
    assert reserve.chars == (1_000_000 - 100) // LEASE_SHARE
    assert reserve.live == (20_000 - 1) // LEASE_SHARE
    assert len(ledger.admitted) == 1, "the other 49 are the lease's, counted by it until it is settled"
    await q.close()
    assert ledger.leases == {}
    assert len(ledger.admitted) == 50
    assert q.round_trips == 2


async def test_several_instances_never_admit_past_a_limit_and_a_settled_lease_is_room_again():
    ledger, clocks = Ledger(counting=True), Clocks()
    apis = [quotas(ledger, clocks, chars_per_day=1000) for _ in range(3)]

    async def submit(i: int) -> int:
        try:
            await apis[i % 3].admit(ALICE, jobs(10))
        except Rejected as exc:
            return -exc.status
        return 10

    outcomes = await asyncio.gather(*(submit(i) for i in range(200)))
    assert set(outcomes) == {10, -429}
    given = sum(o for o in outcomes if o > 0)
    assert given <= 1000
    assert ledger.current().chars_today <= 1000, "every lease and admission together"
    for api in apis:
        await api.close()
    assert sum(j.chars for j in ledger.admitted) == given, "every job admitted from a lease reached the ledger"
    while True:  # what the leases held and did not use is room for anyone again
        try:
            await apis[0].admit(ALICE, jobs(10))
        except Rejected:
            break
    assert sum(j.chars for j in ledger.admitted) + sum(r.chars for r in ledger.leases.values()) == 1000


async def test_an_old_lease_is_settled_as_the_next_submission_is_judged():
    ledger, clocks = Ledger(counting=True), Clocks()
    q = quotas(ledger, clocks, chars_per_day=10_000)
    await q.admit(ALICE, jobs(10))
    await q.admit(ALICE, jobs(20))  # from the lease
    clocks.mono += LEASE_S
    await q.admit(ALICE, jobs(30))
    assert len(ledger.days) == 2
    assert [j.chars for j in ledger.admitted] == [10, 20, 30], "the old lease's job written, then the new one"
    assert len(ledger.leases) == 1


async def test_a_refusal_under_the_lock_still_settles_the_lease():
    ledger, clocks = Ledger(counting=True), Clocks()
    q = quotas(ledger, clocks, chars_per_day=1000)
    await q.admit(ALICE, jobs(100))
    await q.admit(ALICE, jobs(50))  # from the lease ((1000 - 100) / 8 = 112 held)
    with pytest.raises(Rejected) as refused:
        await q.admit(ALICE, jobs(900))  # over what the lease has: judged, and over the day's quota
    assert refused.value.status == 429
    assert [j.chars for j in ledger.admitted] == [100, 50]
    assert ledger.leases == {}, "settled, though the submission was refused"


async def test_a_lease_serves_its_day_and_its_limits_only():
    ledger, clocks = Ledger(counting=True), Clocks()
    q = quotas(ledger, clocks, chars_per_day=10_000)
    await q.admit(ALICE, jobs(10))
    clocks.wall = datetime.combine(NOON.date() + timedelta(days=1), datetime.min.time(), UTC)
    await q.admit(ALICE, jobs(10))
    assert ledger.days == [NOON.date(), NOON.date() + timedelta(days=1)], "midnight: judged for the new day"
    q._policies = Policies(replace(TenantLimits(), chars_per_day=20_000), {})
    await q.admit(ALICE, jobs(10))
    assert len(ledger.days) == 3, "new limits: judged by them"


async def test_jobs_the_log_did_not_take_go_back_to_the_lease_they_came_from():
    ledger, clocks = Ledger(counting=True), Clocks()
    q = quotas(ledger, clocks, chars_per_day=1000)
    first = await q.admit(ALICE, jobs(100))
    second = await q.admit(ALICE, jobs(100))  # from the lease of 112
    await q.forget(second)
    assert ledger.forgotten == [], "the lease's own: nothing to write"
    await q.admit(ALICE, jobs(100))  # the lease has its 112 again
    assert len(ledger.days) == 1
    await q.forget(first)
    assert ledger.forgotten == first, "admitted under the lock: forgotten in the ledger"
    await q.close()
    assert len(ledger.admitted) == 2, "the first (forgotten by the ledger's own record) and the third"


async def test_a_lease_not_settled_while_postgres_is_down_is_settled_once_it_is_back():
    ledger, clocks = Ledger(counting=True), Clocks()
    q = quotas(ledger, clocks, chars_per_day=1000)
    await q.admit(ALICE, jobs(100))
    await q.admit(ALICE, [Admitted(uuid.uuid4(), 5, True)])
    ledger.down = True
    await q.close()
    assert len(ledger.leases) == 1, "kept, to settle later"
    clocks.mono += LEASE_S
    assert await q.admit(ALICE, jobs(10)) == [], "judged by no one while it is down"
    ledger.down = False
    stop = asyncio.Event()
    stop.set()
    await q.run(stop)  # stopped: it settles what it holds
    assert ledger.leases == {}
    assert [j.chars for j in ledger.admitted] == [100, 5]


async def test_a_submission_that_fits_once_other_instances_settle_is_told_to_retry_in_seconds_not_tomorrow():
    ledger, clocks = Ledger(counting=True), Clocks()
    a, b = quotas(ledger, clocks, chars_per_day=1000), quotas(ledger, clocks, chars_per_day=1000)
    await a.admit(ALICE, jobs(100))  # and a lease of 112
    with pytest.raises(Rejected) as refused:
        await b.admit(ALICE, jobs(800))
    assert refused.value.status == 429
    assert refused.value.retry_after == 3, "a lease settles within two seconds"
    assert (
        "has 100 characters today (UTC) and this submission adds 800 (112 more held for a moment by other API"
        in str(refused.value)
    )
    with pytest.raises(Rejected) as over:
        await b.admit(ALICE, jobs(901))
    assert over.value.retry_after == 12 * 3600, "over even without the lease: the next UTC day"
    await a.close()
    assert len(await b.admit(ALICE, jobs(800))) == 1
