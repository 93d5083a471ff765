"""Backpressure: whether a submission that needs a new synthesis is taken now.

A submission answered from the cache, or a duplicate of a job in flight (it
coalesces, costing no synthesis), is always taken. Any other is refused

- with 503 while cache-only mode is on (an operator's `voxlog admin
  cache-only on`, or the sweeper's, past ``VOXLOG_CACHE_ONLY_BACKLOG_S``),
- with 429 while the work ahead of it (:mod:`projections.reads.backlog`) is over
  ``VOXLOG_MAX_BACKLOG_S`` and its tenant's own work ahead is over the
  tenant's share of that limit (the limit over the tenants with work ahead):
  one tenant's flood is refused while the others, under their shares, are
  still taken, as the workers' fair share serves them (a fleet-wide 429 for
  one tenant's flood refused every tenant). ``Retry-After`` is the sooner of
  the fleet's excess and the tenant's (its excess over its share, drained at
  its share of the fleet), at the fleet's measured speed. Cache-only mode
  stays fleet-wide, for real overload: a backlog no one tenant can make alone
  past the share, or the operator's word.

Degraded mode refuses nothing: it is read here with the other modes, and the
submission pipeline asks :meth:`Admission.degraded` whether to rewrite a new
synthesis to the degraded settings (:mod:`producers.degradation`).

The backlog and the modes are read at most once per ``refresh_s`` (so a flood
costs one query a second, not one per request); what this API accepted since
the last reading is added to it. Work is counted per fingerprint, not per
request (:mod:`projections.reads.backlog`): duplicates coalesce onto one synthesis,
so a fingerprint accepted since the reading is counted once, however many
times it is submitted again. While PostgreSQL is unreachable nothing is
refused here: the log is the write side, and takes submissions without it.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import structlog

from contracts import DEFAULT_TENANT
from foundation.metrics import BACKLOG_SECONDS, SUBMISSIONS_REFUSED
from producers.errors import Rejected
from projections.errors import ProjectionUnavailable
from projections.reads.backlog import Backlog
from projections.reads.jobs import ProjectionReader

log = structlog.get_logger("voxlog.api")
CACHE_ONLY_RETRY_S: Final = 30
MAX_RETRY_AFTER_S: Final = 3600


@dataclass(frozen=True)
class _Reading:
    backlog: Backlog
    modes: dict[str, list[tuple[str, str]]]  # by mode, (source, reason) of each switch holding it on
    at: float  # monotonic


class Admission:
    def __init__(self, reader: ProjectionReader, max_backlog_s: float, refresh_s: float = 1.0) -> None:
        self._reader = reader
        self.max_backlog_s = max_backlog_s  # 0: no limit
        self._refresh_s = refresh_s
        self._reading: _Reading | None = None
        self._accepted: dict[str, tuple[str, int]] = {}  # fingerprint -> (tenant, work), since the last reading
        self._lock = asyncio.Lock()

    async def admit(self, work: Mapping[str, int], tenant: str = DEFAULT_TENANT) -> None:
        """Take ``tenant``'s submissions that need the syntheses ``work`` names (fingerprint -> work, in
        characters said at speed 1: :func:`contracts.audio_estimate.work_chars`), or raise :class:`Rejected`
        (429 or 503, with ``retry_after``) saying why and when to come back."""
        reading = await self._read()
        if reading is None:
            return
        new = {fingerprint: chars for fingerprint, chars in work.items() if fingerprint not in self._accepted}
        refusal = self._refusal(reading, tenant, sum(new.values()))
        if refusal is not None:
            try:
                coalescing = await self._reader.in_flight(list(work))
            except ProjectionUnavailable:
                coalescing = set()
            if not set(work) <= coalescing:
                SUBMISSIONS_REFUSED.labels("backlog" if refusal.status == 429 else "cache_only").inc()
                raise refusal
            return  # every one coalesces onto a synthesis the backlog counts already
        self._accepted.update((fingerprint, (tenant, chars)) for fingerprint, chars in new.items())

    async def degraded(self) -> str | None:
        """Why degraded mode is on (each switch holding it, ``source: reason``); ``None``: it is off, or the
        projection cannot be read (nothing is degraded unjudged)."""
        reading = await self._read()
        switches = reading.modes.get("degraded") if reading is not None else None
        return _why(switches) if switches else None

    def _refusal(self, reading: _Reading, tenant: str, chars: int) -> Rejected | None:
        if cache_only := reading.modes.get("cache_only"):
            why = _why(cache_only)
            return Rejected(
                f"voxlog is in cache-only mode ({why}): it answers requests whose audio is cached or being"
                " synthesized already, and takes no new synthesis; retry later",
                503,
                retry_after=CACHE_ONLY_RETRY_S,
            )
        backlog = reading.backlog
        work_s = backlog.work_s(sum(work for _, work in self._accepted.values()) + chars)
        if not self.max_backlog_s or work_s is None or work_s <= self.max_backlog_s:
            return None
        tenants = dict(backlog.tenants)
        for owner, work in self._accepted.values():
            tenants[owner] = tenants.get(owner, 0) + work
        tenants[tenant] = tenants.get(tenant, 0) + chars
        active = sum(1 for work in tenants.values() if work > 0)
        share_s = self.max_backlog_s / max(1, active)
        mine_s = backlog.seconds(tenants[tenant]) or 0.0
        if mine_s <= share_s:
            return None  # under its share: taken, the fleet's excess is other tenants' work
        excess_s = min(work_s - self.max_backlog_s, (mine_s - share_s) * active)
        retry_after = min(MAX_RETRY_AFTER_S, max(1, math.ceil(excess_s)))
        return Rejected(
            f"the synthesis backlog is {work_s:.0f} s of work, over VOXLOG_MAX_BACKLOG_S ({self.max_backlog_s:g} s),"
            f" and {mine_s:.0f} s of it is tenant {tenant}'s, over its share ({share_s:.0f} s): retry after"
            f" {retry_after} s (requests whose audio is cached are still answered)",
            429,
            retry_after=retry_after,
        )

    async def _read(self) -> _Reading | None:
        if self._reading is not None and time.monotonic() - self._reading.at < self._refresh_s:
            return self._reading
        async with self._lock:  # one reading for the requests that all found it stale
            if self._reading is not None and time.monotonic() - self._reading.at < self._refresh_s:
                return self._reading
            try:
                backlog, modes = await self._reader.backlog(), await self._reader.modes_on()
            except ProjectionUnavailable as exc:
                log.warning("admitting without the backlog", error=str(exc))
                return None
            self._reading, self._accepted = _Reading(backlog, modes, time.monotonic()), {}
            work_s = backlog.work_s()
            BACKLOG_SECONDS.set(-1 if work_s is None else work_s)
            return self._reading


def _why(switches: list[tuple[str, str]]) -> str:
    return "; ".join(f"{source}: {reason}" if reason else source for source, reason in switches)
