"""Each API key's requests per second, over every API instance: a token bucket in PostgreSQL.

A key's bucket holds ``rate_burst`` tokens and refills at ``rate_per_s``; each
request takes one, and a request that finds none is a 429 whose
``Retry-After`` is when the next token comes. A batch costs one token a job:
its request takes one as any does, and its other jobs are charged once it is
taken (:meth:`RateLimiter.charge`), leaving the bucket in debt when it held
fewer, so that the key's next request waits until its rate has paid for every
job (a batch of 10,000 was one token). Every answer to a key carries
``RateLimit-Policy`` and ``RateLimit`` (:mod:`producers.rate_headers`). While
PostgreSQL cannot be read, requests are taken unjudged (counted in
``voxlog_limits_unjudged_total``): the log takes submissions without it, and
the limit is back with the database.
"""

from __future__ import annotations

import math
from typing import Protocol

import structlog

from foundation.metrics import LIMITED, LIMITS_UNJUDGED
from producers.api_keys import Principal
from producers.errors import Rejected
from producers.limits_ledger import Bucket
from producers.rate_headers import limit_headers
from producers.tenant_limits import Policies
from projections.errors import ProjectionUnavailable

log = structlog.get_logger("voxlog.api")


class Buckets(Protocol):
    async def take(self, key_id: str, rate_per_s: float, burst: int) -> Bucket:
        """One token of the key's bucket if it has one (``ProjectionUnavailable`` while PostgreSQL is down)."""
        ...

    async def charge(self, key_id: str, tokens: float, rate_per_s: float, burst: int) -> float | None:
        """``tokens`` more, into debt if need be: what the bucket holds then."""
        ...


class RateLimiter:
    def __init__(self, buckets: Buckets, policies: Policies) -> None:
        self._buckets = buckets
        self._policies = policies

    async def take(self, principal: Principal) -> dict[str, str]:
        """The headers of the request's answer, or :class:`Rejected` (429) when the key has no token left."""
        limits = self._policies.of(principal.tenant)
        if principal.key_id is None or not limits.rate_per_s:
            return {}
        rate, burst = limits.rate_per_s, limits.rate_burst
        try:
            bucket = await self._buckets.take(principal.key_id, rate, burst)
        except ProjectionUnavailable as exc:
            LIMITS_UNJUDGED.labels("rate").inc()
            log.warning("request rate not judged", key_id=principal.key_id, error=str(exc))
            return {}
        headers = limit_headers(
            "requests", burst, burst / rate, "requests", bucket.tokens, (burst - bucket.tokens) / rate
        )
        if bucket.granted:
            return headers
        LIMITED.labels("rate").inc()
        retry_after = max(1, math.ceil((1 - bucket.tokens) / rate))
        raise Rejected(
            f"API key {principal.key_id} is over its rate of {rate:g} requests per second (bursts of {burst};"
            f" VOXLOG_LIMIT_RATE_PER_S): retry after {retry_after} s",
            429,
            retry_after=retry_after,
            headers=headers,
        )

    async def charge(self, principal: Principal, jobs: int) -> None:
        """Charge the key for the jobs of a batch past its first (which its request's token paid for)."""
        limits = self._policies.of(principal.tenant)
        if principal.key_id is None or not limits.rate_per_s or jobs <= 1:
            return
        try:
            await self._buckets.charge(principal.key_id, jobs - 1, limits.rate_per_s, limits.rate_burst)
        except ProjectionUnavailable as exc:
            LIMITS_UNJUDGED.labels("rate").inc()
            log.warning("batch's rate not charged", key_id=principal.key_id, jobs=jobs, error=str(exc))
