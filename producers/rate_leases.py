"""Each API key's rate, judged from tokens an API instance takes from the shared bucket in blocks.

A request that asked PostgreSQL's bucket (:mod:`producers.limits_ledger`) for
its one token cost a round trip; under load that was one ``UPDATE`` of one hot
row per request. :class:`LeasedBuckets` takes a *block* of tokens at once and
gives them out from memory. A block leaves the shared bucket when it is taken,
so the limit holds over every instance: the tokens given out by all of them
are never more than the bucket gave. A block is at most what the key's rate
refills in a lease's time (``lease_s``) and at most a quarter of its burst, so
another instance is short of at most that while this one holds it; what an
instance did not give out within ``lease_s`` goes back into the bucket, with
the next block's statement or by :meth:`LeasedBuckets.run`'s sweep, and all
of it at :meth:`LeasedBuckets.close`. A key refused here is refused from memory
until its next token is due (a flood of 429s asks PostgreSQL once per token,
not once per request). A key of burst 3 or less takes one token at a time, as
before.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

import structlog

from foundation.lifecycle import wait_for_stop
from producers.limits_ledger import Block, Bucket
from projections.errors import ProjectionUnavailable

log = structlog.get_logger("voxlog.api")
LEASE_S: Final = 1.0  # how long an instance keeps tokens it has not given out before they go back


class TokenBlocks(Protocol):
    async def lease(self, key_id: str, want: int, returned: float, rate_per_s: float, burst: int) -> Block:
        """Up to ``want`` tokens of the key's bucket, once ``returned`` are put back (``ProjectionUnavailable``
        while PostgreSQL is down)."""
        ...

    async def charge(self, key_id: str, tokens: float, rate_per_s: float, burst: int) -> float | None: ...


def block_size(rate_per_s: float, burst: int, lease_s: float) -> int:
    """How many tokens an instance takes at once for a key."""
    return max(1, min(math.ceil(rate_per_s * lease_s), burst // 4))


@dataclass
class _Lease:
    left: int  # tokens this instance may still give out
    bucket: float  # what the shared bucket held once the block was taken
    rate_per_s: float
    burst: int
    at: float  # when it was taken (monotonic)

    def bucket_now(self, now: float) -> float:
        """What the shared bucket holds by now, as far as this instance knows (others take from it too)."""
        return min(float(self.burst), self.bucket + self.rate_per_s * (now - self.at))


class LeasedBuckets:
    """The rate limiter's buckets (:class:`producers.rate_limit.Buckets`), a block of each key's at a time."""

    def __init__(
        self, blocks: TokenBlocks, lease_s: float = LEASE_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._blocks = blocks
        self._lease_s = lease_s
        self._clock = clock
        self._leases: dict[str, _Lease] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.round_trips = 0  # blocks taken and given back: what the limits cost PostgreSQL

    async def take(self, key_id: str, rate_per_s: float, burst: int) -> Bucket:
        given = self._give(key_id, rate_per_s, burst)
        if given is not None:
            return given
        lock = self._locks.setdefault(key_id, asyncio.Lock())
        async with lock:  # one block at a time per key: the requests that found none wait for it
            given = self._give(key_id, rate_per_s, burst)
            if given is not None:
                return given
            lease = self._leases.get(key_id)
            returned = lease.left if lease is not None else 0
            self.round_trips += 1
            block = await self._blocks.lease(key_id, block_size(rate_per_s, burst, self._lease_s), returned,
                                             rate_per_s, burst)  # fmt: skip
            now = self._clock()
            if block.granted == 0:
                self._leases[key_id] = _Lease(0, block.tokens, rate_per_s, burst, now)
                return Bucket(False, block.tokens)
            self._leases[key_id] = _Lease(block.granted - 1, block.tokens, rate_per_s, burst, now)
            return Bucket(True, block.granted - 1 + block.tokens)

    def _give(self, key_id: str, rate_per_s: float, burst: int) -> Bucket | None:
        """A token from the lease in memory, or its refusal while the key's next token is not due; ``None``:
        ask the bucket (no lease, an old one, or one taken under other limits)."""
        lease = self._leases.get(key_id)
        now = self._clock()
        if lease is None or now - lease.at >= self._lease_s or (lease.rate_per_s, lease.burst) != (rate_per_s, burst):
            return None
        if lease.left >= 1:
            lease.left -= 1
            return Bucket(True, lease.left + lease.bucket_now(now))
        if lease.bucket_now(now) < 1:
            return Bucket(False, lease.bucket_now(now))
        return None

    async def charge(self, key_id: str, tokens: float, rate_per_s: float, burst: int) -> float | None:
        """``tokens`` more for a key (a batch's jobs): from its lease first, the rest from the bucket."""
        lease = self._leases.get(key_id)
        if lease is not None and lease.left > 0:
            used = min(lease.left, math.floor(tokens))
            lease.left -= used
            tokens -= used
        if tokens <= 0 and lease is not None:
            return lease.left + lease.bucket_now(self._clock())
        self.round_trips += 1
        return await self._blocks.charge(key_id, tokens, rate_per_s, burst)

    async def run(self, stop: asyncio.Event) -> None:
        """Give back, every ``lease_s``, what each old lease did not give out, until ``stop``; then all of it."""
        while not await wait_for_stop(stop, self._lease_s):
            await self._give_back(lambda lease: self._clock() - lease.at >= self._lease_s)
        await self.close()

    async def close(self) -> None:
        """Give back every token not given out (at shutdown: another instance may use them at once)."""
        await self._give_back(lambda _: True)

    async def _give_back(self, due: Callable[[_Lease], bool]) -> None:
        for key_id, lease in list(self._leases.items()):
            if not due(lease):
                continue
            lock = self._locks.setdefault(key_id, asyncio.Lock())
            async with lock:
                if self._leases.get(key_id) is not lease:
                    continue  # renewed meanwhile, its leftover went back with the new block
                del self._leases[key_id]
                if lease.left <= 0:
                    continue
                try:
                    self.round_trips += 1
                    await self._blocks.lease(key_id, 0, lease.left, lease.rate_per_s, lease.burst)
                except ProjectionUnavailable as exc:  # lost: the bucket refills them within a lease's time
                    log.warning("rate tokens not given back", key_id=key_id, tokens=lease.left, error=str(exc))
