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

Over a limit: 429 with ``Retry-After`` (the next UTC day or month for a
quota) and the ``RateLimit`` headers; a submission that alone is over a
limit can never be admitted, and is a 413 saying so. Days and months are
UTC, and a job's day is the day it was submitted, as usage counts it. While
PostgreSQL cannot be read, submissions are admitted unjudged (counted in
``voxlog_limits_unjudged_total``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Protocol

import structlog

from contracts import utc_now
from foundation.metrics import LIMITED, LIMITS_UNJUDGED
from producers.api_keys import Principal
from producers.errors import RETRY_AFTER_S, Rejected
from producers.limits_ledger import Admitted, Held, Standing
from producers.rate_headers import limit_headers
from producers.tenant_limits import Policies, TenantLimits
from projections.errors import ProjectionUnavailable

log = structlog.get_logger("voxlog.api")


class Ledger(Protocol):
    def hold(self, tenant: str, key_id: str | None, today: date) -> AbstractAsyncContextManager[Held]:
        """The tenant's standing under its lock, to admit jobs by (``ProjectionUnavailable`` while down)."""
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

    def over(self) -> bool:
        return bool(self.limit) and self.used + self.adding > self.limit


class Quotas:
    def __init__(self, ledger: Ledger, policies: Policies, clock: Callable[[], datetime] = utc_now) -> None:
        self._ledger = ledger
        self._policies = policies
        self._clock = clock

    async def admit(self, principal: Principal, jobs: Sequence[Admitted]) -> list[uuid.UUID]:
        """Admit ``jobs`` (recorded as admitted: :meth:`forget` them if the log does not take them), or raise
        :class:`Rejected`. The ids admitted, which are none when nothing was judged."""
        limits = self._policies.of(principal.tenant)
        if not jobs or not (limits.quotas or (principal.key_id and limits.max_live_jobs)):
            return []
        now = self._clock().astimezone(UTC)
        try:
            async with self._ledger.hold(principal.tenant, principal.key_id, now.date()) as held:
                for limit in _limits(limits, principal, held.standing, jobs, now):
                    if limit.over():
                        raise _refusal(limit, principal)
                await held.admit(jobs)
        except ProjectionUnavailable as exc:
            LIMITS_UNJUDGED.labels("quotas").inc()
            log.warning("submission's limits not judged", tenant=principal.tenant, error=str(exc))
            return []
        return [job.job_id for job in jobs]

    async def forget(self, job_ids: Sequence[uuid.UUID]) -> None:
        if not job_ids:
            return
        try:
            await self._ledger.forget(job_ids)
        except ProjectionUnavailable as exc:  # they expire with the ledger's window
            log.warning("admissions not forgotten", jobs=len(job_ids), error=str(exc))


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
            1, "concurrent-requests", RETRY_AFTER_S,
        ),
        _Limit(
            "chars_day", "CHARS_PER_DAY", standing.chars_today, chars, limits.chars_per_day, 86400, "characters",
            day_s,
        ),
        _Limit(
            "chars_month", "CHARS_PER_MONTH", standing.chars_month, chars, limits.chars_per_month, month_window,
            "characters", month_s,
        ),
        _Limit(
            "audio_day", "AUDIO_S_PER_DAY", standing.audio_ms_today / 1000, audio_s, limits.audio_s_per_day, 86400,
            "audio-seconds", day_s,
        ),
        _Limit(
            "audio_month", "AUDIO_S_PER_MONTH", standing.audio_ms_month / 1000, audio_s, limits.audio_s_per_month,
            month_window, "audio-seconds", month_s,
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
    retry_after = max(1, round(limit.reset_s))
    adding = f" and this submission adds {limit.adding:g}" if limit.adding else ""
    return Rejected(
        f"{who} has {limit.used:g} {_WHAT[limit.name]}{adding}, over its limit of {limit.limit:g} ({setting}):"
        f" retry after {retry_after} s",
        429,
        retry_after=retry_after,
        headers=headers,
    )
