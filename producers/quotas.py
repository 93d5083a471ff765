"""Per-key live jobs and per-tenant quotas, judged when a submission is admitted, over every API instance.

A submission is admitted whole or refused whole (a batch, a document's every
part): its new jobs are added to the tenant's standing (:mod:`producers.limits_ledger`)
and judged against the tenant's limits (:mod:`producers.tenant_limits`):

- the key's jobs queued or running, with the new ones a worker will
  synthesize, against ``max_live_jobs``;
- the tenant's characters today and this month, with the new ones, against
  ``chars_per_day`` and ``chars_per_month`` (a cache hit counts: characters
  are what a tenant submits);
- the audio its jobs were given today and this month, with the audio its
  jobs not ended yet and the new ones are expected to make
  (:mod:`contracts.audio_estimate`: characters over speed, plus pauses),
  against ``audio_s_per_day`` and ``audio_s_per_month``: what a tenant asks
  for is counted by what it costs, so speed 0.25 counts four times the
  characters at 1.0, and a break its seconds.

Judged under the tenant's lock, a submission also takes a lease of the
room each limit has left, and for a moment the next submissions that fit in
it are admitted from memory (:mod:`producers.quota_leases`): a key far from
its limits costs PostgreSQL one judgement a lease, not one a submission.

Over a limit: 429 with ``Retry-After`` (the next UTC day or month for a
quota) and the ``RateLimit`` headers; a submission that alone is over a
limit can never be admitted, and is a 413 saying so. Days and months are
UTC, and a job's day is the day it was submitted, as usage counts it. A
submission that is over only while other API instances hold leases is a 429
to retry in seconds (they settle within a lease's time). While
PostgreSQL cannot be read, submissions are admitted unjudged (counted in
``voxlog_limits_unjudged_total``).
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Protocol

import structlog

from contracts import utc_now
from foundation.lifecycle import wait_for_stop
from foundation.metrics import LIMITED, LIMITS_UNJUDGED
from producers.api_keys import Principal
from producers.errors import RETRY_AFTER_S, Rejected
from producers.limits_ledger import Admitted, Held, Reserve, Standing
from producers.quota_leases import LEASE_S, LEASE_SHARE, LEASE_TTL_S, QuotaLease
from producers.rate_headers import limit_headers
from producers.tenant_limits import Policies, TenantLimits
from projections.errors import ProjectionUnavailable

log = structlog.get_logger("voxlog.api")


class Ledger(Protocol):
    def hold(self, tenant: str, key_id: str | None, today: date) -> AbstractAsyncContextManager[Held]:
        """The tenant's lock, to read its standing and admit jobs by (``ProjectionUnavailable`` while down)."""
        ...

    async def settle(self, tenant: str, key_id: str | None, lease_id: uuid.UUID, jobs: Sequence[Admitted]) -> None:
        """Replace a lease by the jobs admitted under it."""
        ...

    async def forget(self, job_ids: Sequence[uuid.UUID]) -> None: ...


@dataclass(frozen=True)
class _Limit:
    name: str  # the metric's label and the policy's name
    setting: str
    used: float
    adding: float
    limit: float
    window_s: float
    unit: str
    reset_s: float
    leased: float = 0  # of ``used``, what other API instances hold in leases, settled within a lease's time

    def over(self) -> bool:
        return bool(self.limit) and self.used + self.adding > self.limit

    def over_for_long(self) -> bool:
        """Over the limit even once the leases settle (else a retry in a few seconds may pass)."""
        return self.used - self.leased + self.adding > self.limit


class Quotas:
    """The limits, judged under the tenant's lock with a lease taken (:mod:`producers.quota_leases`), or from
    the lease this instance holds."""

    def __init__(
        self,
        ledger: Ledger,
        policies: Policies,
        clock: Callable[[], datetime] = utc_now,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ledger = ledger
        self._policies = policies
        self._clock = clock
        self._monotonic = monotonic
        self._leases: dict[tuple[str, str | None], QuotaLease] = {}
        self._locks: dict[tuple[str, str | None], asyncio.Lock] = {}
        self.round_trips = 0  # times the ledger was asked (a hold, a settle): what the limits cost PostgreSQL

    async def admit(self, principal: Principal, jobs: Sequence[Admitted]) -> list[uuid.UUID]:
        """Admit ``jobs`` (recorded as admitted: :meth:`forget` them if the log does not take them), or raise
        :class:`Rejected`. The ids admitted, which are none when nothing was judged."""
        limits = self._policies.of(principal.tenant)
        if not jobs or not (limits.quotas or (principal.key_id and limits.max_live_jobs)):
            return []
        slot = (principal.tenant, principal.key_id)
        if self._from_lease(slot, jobs, limits):
            return [job.job_id for job in jobs]
        async with self._locks.setdefault(slot, asyncio.Lock()):  # one hold at a time per tenant and key
            if self._from_lease(slot, jobs, limits):
                return [job.job_id for job in jobs]
            try:
                over = await self._judge(slot, principal, limits, jobs)
            except ProjectionUnavailable as exc:
                LIMITS_UNJUDGED.labels("quotas").inc()
                log.warning("submission's limits not judged", tenant=principal.tenant, error=str(exc))
                return []
        if over is not None:
            raise _refusal(over, principal)
        return [job.job_id for job in jobs]

    def _from_lease(self, slot: tuple[str, str | None], jobs: Sequence[Admitted], limits: TenantLimits) -> bool:
        lease = self._leases.get(slot)
        if lease is None or not lease.serves(jobs, self._clock().astimezone(UTC).date(), limits, self._monotonic()):
            return False
        lease.take(jobs)
        return True

    async def _judge(
        self, slot: tuple[str, str | None], principal: Principal, limits: TenantLimits, jobs: Sequence[Admitted]
    ) -> _Limit | None:
        """Under the tenant's lock: settle the lease held, judge ``jobs``, and if they pass admit them and take a
        new lease. The limit they are over, if any (the settle is kept either way)."""
        now = self._clock().astimezone(UTC)
        old = self._leases.get(slot)
        self.round_trips += 1
        async with self._ledger.hold(principal.tenant, principal.key_id, now.date()) as held:
            if old is not None:
                await held.settle(old.lease_id, old.admitted)
            checked = _limits(limits, principal, await held.standing(), jobs, now)
            over = next((limit for limit in checked if limit.over()), None)
            lease = None
            if over is None:
                judged, reserve = _reserve(checked)
                if reserve != Reserve():
                    lease = QuotaLease.of(uuid.uuid4(), now.date(), limits, self._monotonic(), reserve, judged)
                await held.admit(jobs, lease.lease_id if lease else None, reserve, LEASE_TTL_S)
        # Committed: the old lease is settled, and the new one (if any) recorded.
        self._leases.pop(slot, None)
        if lease is not None:
            self._leases[slot] = lease
        return over

    async def forget(self, job_ids: Sequence[uuid.UUID]) -> None:
        if not job_ids:
            return
        left = set(job_ids)
        for lease in self._leases.values():
            left -= lease.forget(left)
        if not left:
            return
        try:
            await self._ledger.forget(list(left))
        except ProjectionUnavailable as exc:  # they expire with the ledger's window
            log.warning("admissions not forgotten", jobs=len(left), error=str(exc))

    async def run(self, stop: asyncio.Event) -> None:
        """Settle, every lease's time, the leases past it, until ``stop``; then every lease."""
        while not await wait_for_stop(stop, LEASE_S):
            await self._settle(lambda lease: self._monotonic() - lease.at >= LEASE_S)
        await self.close()

    async def close(self) -> None:
        """Settle every lease (at shutdown: what it did not use is room for the other instances at once)."""
        await self._settle(lambda _: True)

    async def _settle(self, due: Callable[[QuotaLease], bool]) -> None:
        for slot, lease in list(self._leases.items()):
            if not due(lease):
                continue
            async with self._locks.setdefault(slot, asyncio.Lock()):
                if self._leases.get(slot) is not lease:
                    continue  # settled meanwhile, by a submission
                try:
                    self.round_trips += 1
                    await self._ledger.settle(slot[0], slot[1], lease.lease_id, lease.admitted)
                except ProjectionUnavailable as exc:  # kept, settled by the next try
                    log.warning("quota lease not settled", tenant=slot[0], error=str(exc))
                    continue
                del self._leases[slot]


def _reserve(checked: list[_Limit]) -> tuple[Reserve, Reserve]:
    """Which limits are judged (1 each), and the lease to take of them: a share of what each has left."""

    def room(*names: str) -> tuple[int, float]:
        rooms = [limit.limit - limit.used - limit.adding for limit in checked if limit.name in names and limit.limit]
        return (1, max(0.0, min(rooms) / LEASE_SHARE)) if rooms else (0, 0.0)

    (chars_judged, chars), (audio_judged, audio_s), (live_judged, live) = (
        room("chars_day", "chars_month"), room("audio_day", "audio_month"), room("live_jobs"),
    )  # fmt: skip
    judged = Reserve(chars_judged, audio_judged, live_judged)
    return judged, Reserve(int(chars), int(audio_s * 1000), int(live))


def _limits(
    limits: TenantLimits, principal: Principal, standing: Standing, jobs: Sequence[Admitted], now: datetime
) -> list[_Limit]:
    tomorrow = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), UTC)
    first = now.date().replace(day=1)
    next_month = datetime.combine((first + timedelta(days=32)).replace(day=1), datetime.min.time(), UTC)
    day_s, month_s = (tomorrow - now).total_seconds(), (next_month - now).total_seconds()
    month_window = (next_month - datetime.combine(first, datetime.min.time(), UTC)).total_seconds()
    chars = sum(job.chars for job in jobs)
    audio_s = sum(job.audio_ms for job in jobs) / 1000
    live = sum(1 for job in jobs if job.live)
    return [
        _Limit(
            "live_jobs", "MAX_LIVE_JOBS", standing.live_jobs, live, limits.max_live_jobs if principal.key_id else 0,
            1, "concurrent-requests", RETRY_AFTER_S, standing.leased_live,
        ),
        _Limit(
            "chars_day", "CHARS_PER_DAY", standing.chars_today, chars, limits.chars_per_day, 86400, "characters",
            day_s, standing.leased_chars,
        ),
        _Limit(
            "chars_month", "CHARS_PER_MONTH", standing.chars_month, chars, limits.chars_per_month, month_window,
            "characters", month_s, standing.leased_chars,
        ),
        _Limit(
            "audio_day", "AUDIO_S_PER_DAY", standing.audio_ms_today / 1000, audio_s, limits.audio_s_per_day, 86400,
            "audio-seconds", day_s, standing.leased_audio_ms / 1000,
        ),
        _Limit(
            "audio_month", "AUDIO_S_PER_MONTH", standing.audio_ms_month / 1000, audio_s, limits.audio_s_per_month,
            month_window, "audio-seconds", month_s, standing.leased_audio_ms / 1000,
        ),
    ]  # fmt: skip


_WHAT = {
    "live_jobs": "jobs queued or running",
    "chars_day": "characters today (UTC)",
    "chars_month": "characters this month (UTC)",
    "audio_day": "seconds of audio today (UTC)",
    "audio_month": "seconds of audio this month (UTC)",
}


def _refusal(limit: _Limit, principal: Principal) -> Rejected:
    LIMITED.labels(limit.name).inc()
    who = f"API key {principal.key_id}" if limit.name == "live_jobs" else f"tenant {principal.tenant}"
    setting = f"VOXLOG_LIMIT_{limit.setting}"
    headers = limit_headers(
        limit.name.replace("_", "-"), limit.limit, limit.window_s, limit.unit, limit.limit - limit.used, limit.reset_s
    )
    if limit.adding > limit.limit:
        return Rejected(
            f"this submission alone has {limit.adding:g} {_WHAT[limit.name]}, more than {who} may have"
            f" ({limit.limit:g}, {setting}): send it in smaller pieces",
            413,
            headers=headers,
        )
    adding = f" and this submission adds {limit.adding:g}" if limit.adding else ""
    held = f" ({limit.leased:g} more held for a moment by other API instances)" if limit.leased else ""
    # Over only while other instances hold leases: they settle within a lease's time, so retry in seconds.
    retry_after = max(1, round(limit.reset_s)) if limit.over_for_long() else math.ceil(LEASE_S) + 1
    return Rejected(
        f"{who} has {limit.used - limit.leased:g} {_WHAT[limit.name]}{adding}{held}, over its limit of"
        f" {limit.limit:g} ({setting}): retry after {retry_after} s",
        429,
        retry_after=retry_after,
        headers=headers,
    )
