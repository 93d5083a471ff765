"""Rate tokens taken in blocks (producers.rate_leases): what an API instance asks PostgreSQL's bucket, and that
the tokens every instance gives out are never more than the bucket gave. The bucket here is in memory with a
clock the test moves; PostgreSQL's has its own test (integration)."""

from __future__ import annotations

import asyncio

import pytest

from producers.api_keys import Principal
from producers.errors import Rejected
from producers.limits_ledger import Block
from producers.rate_leases import LeasedBuckets, block_size
from producers.rate_limit import RateLimiter
from producers.tenant_limits import Policies, TenantLimits
from projections.errors import ProjectionUnavailable

pytestmark = pytest.mark.unit

KEY = "0123456789ab"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Bucket:
    """One key's bucket as PostgreSQL keeps it: refilled by the clock, never past the burst."""

    def __init__(self, clock: Clock, tokens: float) -> None:
        self.clock, self.tokens, self.at = clock, tokens, clock.now
        self.asked: list[tuple[int, float]] = []  # (want, returned) of each lease
        self.gate: asyncio.Event | None = None
        self.down = False
        self.given_back = asyncio.Event()  # a lease that only gave back

    def _refill(self, rate_per_s: float, burst: int) -> None:
        self.tokens = min(float(burst), self.tokens + rate_per_s * (self.clock.now - self.at))
        self.at = self.clock.now

    async def lease(self, key_id: str, want: int, returned: float, rate_per_s: float, burst: int) -> Block:
        if self.down:
            raise ProjectionUnavailable("cannot read the rate limits")
        if self.gate is not None:
            await self.gate.wait()
        self.asked.append((want, returned))
        if want == 0:
            self.given_back.set()
        self.tokens += returned
        self._refill(rate_per_s, burst)
        granted = min(want, max(0, int(self.tokens)))
        self.tokens -= granted
        return Block(granted, self.tokens)

    async def charge(self, key_id: str, tokens: float, rate_per_s: float, burst: int) -> float | None:
        self._refill(rate_per_s, burst)
        self.tokens -= tokens
        return self.tokens


def test_a_block_is_what_the_rate_refills_in_a_lease_at_most_a_quarter_of_the_burst_and_at_least_one():
    assert block_size(20, 40, 1.0) == 10  # the defaults: a quarter of the burst
    assert block_size(2, 40, 1.0) == 2  # what two seconds' rate... one second's
    assert block_size(0.001, 40, 1.0) == 1
    assert block_size(100, 3, 1.0) == 1  # a small burst: a token at a time, as before blocks


async def test_a_key_asks_the_bucket_once_a_block_not_once_a_request():
    clock = Clock()
    bucket = Bucket(clock, 40)
    buckets = LeasedBuckets(bucket, lease_s=1.0, clock=clock)
    taken = [await buckets.take(KEY, 20, 40) for _ in range(30)]
    assert all(t.granted for t in taken)
    assert bucket.asked == [(10, 0)] * 3
    assert buckets.round_trips == 3
    assert bucket.tokens == 10, "the bucket gave 30 tokens, one per request"
    assert taken[0].tokens == 39, "the answer's headers: the lease's 9 and the bucket's 30"


async def test_every_instance_together_gives_out_no_more_than_the_bucket_holds():
    clock = Clock()
    bucket = Bucket(clock, 40)
    apis = [LeasedBuckets(bucket, lease_s=1.0, clock=clock) for _ in range(3)]
    taken = await asyncio.gather(*(apis[i % 3].take(KEY, 20, 40) for i in range(100)))
    assert sum(t.granted for t in taken) == 40
    refused = [t for t in taken if not t.granted]
    assert all(t.tokens < 1 for t in refused)


async def test_requests_that_find_no_tokens_wait_for_one_block_not_one_each():
    clock = Clock()
    bucket = Bucket(clock, 40)
    bucket.gate = asyncio.Event()
    buckets = LeasedBuckets(bucket, lease_s=1.0, clock=clock)
    takes = [asyncio.ensure_future(buckets.take(KEY, 20, 40)) for _ in range(8)]
    await asyncio.sleep(0)  # every take has found no lease
    bucket.gate.set()
    assert all(t.granted for t in await asyncio.gather(*takes))
    assert bucket.asked == [(10, 0)]


async def test_a_refused_key_is_refused_from_memory_until_its_next_token_is_due():
    clock = Clock()
    bucket = Bucket(clock, 0.5)
    limiter = RateLimiter(LeasedBuckets(bucket, lease_s=1.0, clock=clock), Policies(TenantLimits(2, 40), {}))
    principal = Principal("acme", KEY, frozenset({"submit"}))
    for _ in range(5):
        with pytest.raises(Rejected) as refused:
            await limiter.take(principal)
        assert refused.value.status == 429
        assert refused.value.retry_after == 1
    assert len(bucket.asked) == 1, "a flood of 429s asked PostgreSQL once"
    clock.now += 0.25  # half a token a second... at 2 a second, the next token is due
    assert "RateLimit" in await limiter.take(principal)
    assert len(bucket.asked) == 2


async def test_tokens_not_given_out_go_back_with_the_next_block_and_at_close():
    clock = Clock()
    bucket = Bucket(clock, 40)
    buckets = LeasedBuckets(bucket, lease_s=1.0, clock=clock)
    await buckets.take(KEY, 20, 40)
    assert bucket.tokens == 30
    clock.now += 1.0  # the lease is old: its 9 go back as the next block is taken
    await buckets.take(KEY, 20, 40)
    assert bucket.asked[-1] == (10, 9)
    await buckets.close()
    assert bucket.asked[-1] == (0, 9), "what it did not give out"
    assert bucket.tokens == 39, "the bucket, full again, less the two requests"
    await buckets.close()
    assert len(bucket.asked) == 3, "nothing is given back twice"


async def test_the_sweep_gives_back_an_old_leases_tokens_while_the_key_is_quiet():
    clock = Clock()
    bucket = Bucket(clock, 40)
    buckets = LeasedBuckets(bucket, lease_s=0.01, clock=clock)
    await buckets.take(KEY, 2000, 40)
    assert bucket.tokens == 30
    stop = asyncio.Event()
    sweep = asyncio.ensure_future(buckets.run(stop))
    clock.now += 0.01
    async with asyncio.timeout(10):
        await bucket.given_back.wait()
    assert bucket.asked[-1] == (0, 9), "what it did not give out (the clock refilled the rest)"
    stop.set()
    await sweep
    assert len(bucket.asked) == 2, "given back once"


async def test_a_batch_is_charged_from_the_lease_first():
    clock = Clock()
    bucket = Bucket(clock, 40)
    buckets = LeasedBuckets(bucket, lease_s=1.0, clock=clock)
    await buckets.take(KEY, 20, 40)  # 9 left in the lease, 30 in the bucket
    assert await buckets.charge(KEY, 6, 20, 40) == 33
    assert bucket.tokens == 30
    assert buckets.round_trips == 1
    assert await buckets.charge(KEY, 7, 20, 40) == 26, "3 from the lease, 4 from the bucket"
    assert bucket.tokens == 26


async def test_while_postgres_is_down_a_request_is_taken_unjudged_and_nothing_is_lost():
    clock = Clock()
    bucket = Bucket(clock, 40)
    buckets = LeasedBuckets(bucket, lease_s=1.0, clock=clock)
    limiter = RateLimiter(buckets, Policies(TenantLimits(20, 40), {}))
    principal = Principal("acme", KEY, frozenset({"submit"}))
    await limiter.take(principal)
    clock.now += 1.0
    bucket.down = True
    assert await limiter.take(principal) == {}, "unjudged, as before blocks"
    bucket.down = False
    await limiter.take(principal)
    assert bucket.asked[-1] == (10, 9), "the old lease's tokens went back once PostgreSQL was"
