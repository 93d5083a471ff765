"""The live workers, counted for Prometheus: ``voxlog_workers{engine, model_version}``.

The API reads the projection's nodes on a schedule (what a worker announced, and when it was last
heard from: see :mod:`producers.activity`) and exports how many of each engine and model version are
live. An alert then asks the question that matters, "does any worker synthesize?", of the workers'
own word rather than of whether Prometheus can scrape them. A version whose workers are all gone
reads 0 (not its last count); while PostgreSQL cannot be read, the last counts stay.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final

from foundation.lifecycle import wait_for_stop
from foundation.metrics import WORKERS
from foundation.outages import Outage
from producers.queries import ProjectionUnavailable

CENSUS_INTERVAL_S: Final = 5.0  # Prometheus scrapes every 15 s: each scrape sees a count this fresh
LiveWorkers = Callable[[], Awaitable[dict[tuple[str, str], int]]]


class WorkerCensus:
    def __init__(self, live_workers: LiveWorkers, interval_s: float = CENSUS_INTERVAL_S) -> None:
        self._live_workers = live_workers
        self._interval_s = interval_s
        self._exported: set[tuple[str, str]] = set()

    async def count(self) -> None:
        """Read the live workers once and export them (:class:`ProjectionUnavailable` when it cannot)."""
        counts = await self._live_workers()
        for engine, model_version in self._exported - set(counts):
            WORKERS.labels(engine, model_version).set(0)
        for (engine, model_version), workers in counts.items():
            WORKERS.labels(engine, model_version).set(workers)
        self._exported |= set(counts)

    async def run(self, stop: asyncio.Event) -> None:
        outage = Outage("PostgreSQL (the count of live workers)")
        while True:
            try:
                await self.count()
            except ProjectionUnavailable as exc:
                outage.failed(exc)
            else:
                outage.recovered()
            if await wait_for_stop(stop, outage.wait_s(self._interval_s)):
                return
