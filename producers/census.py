"""The live workers, counted for Prometheus: ``voxlog_workers{engine, model_version}``, and the jobs waiting on
each, ``voxlog_worker_queue_jobs{worker, tenant, priority}``.

The API reads the projection's nodes on a schedule (what a worker announced, and when it was last
heard from: see :mod:`producers.dashboard_activity`) and exports how many of each engine and model version are
live. An alert then asks the question that matters, "does any worker synthesize?", of the workers'
own word rather than of whether Prometheus can scrape them. A version whose workers are all gone
reads 0 (not its last count); while PostgreSQL cannot be read, the last counts stay.

The queues are what each live worker's last heartbeat counted (``NodeHeartbeat`` version 2's
``queue_counts``): a tenant and priority whose jobs a live worker no longer holds read 0, and a worker
gone (silent past its heartbeat timeout) takes its series with it, so that a worker id of a past process
does not stay exported forever.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final

from foundation.lifecycle import wait_for_stop
from foundation.metrics import WORKER_QUEUE_JOBS, WORKERS
from foundation.outages import Outage
from projections.errors import ProjectionUnavailable
from projections.reads.activity import WorkerQueues

CENSUS_INTERVAL_S: Final = 5.0  # Prometheus scrapes every 15 s: each scrape sees a count this fresh
LiveWorkers = Callable[[], Awaitable[dict[tuple[str, str], int]]]
ReadQueues = Callable[[], Awaitable[WorkerQueues]]


class WorkerCensus:
    def __init__(
        self, live_workers: LiveWorkers, queues: ReadQueues | None = None, interval_s: float = CENSUS_INTERVAL_S
    ) -> None:
        self._live_workers = live_workers
        self._queues = queues
        self._interval_s = interval_s
        self._exported: set[tuple[str, str]] = set()
        self._queues_exported: set[tuple[str, str, str]] = set()  # (worker, tenant, priority)

    async def count(self) -> None:
        """Read the live workers once and export them (:class:`ProjectionUnavailable` when it cannot)."""
        counts = await self._live_workers()
        for engine, model_version in self._exported - set(counts):
            WORKERS.labels(engine, model_version).set(0)
        for (engine, model_version), workers in counts.items():
            WORKERS.labels(engine, model_version).set(workers)
        self._exported |= set(counts)
        if self._queues is not None:
            self._export_queues(await self._queues())

    def _export_queues(self, queues: WorkerQueues) -> None:
        waiting = {(worker, *pair): jobs for worker, counts in queues.items() for pair, jobs in counts.items()}
        for series in self._queues_exported - set(waiting):
            if series[0] in queues:
                WORKER_QUEUE_JOBS.labels(*series).set(0)
                waiting[series] = 0
            else:
                WORKER_QUEUE_JOBS.remove(*series)
        for series, jobs in waiting.items():
            WORKER_QUEUE_JOBS.labels(*series).set(jobs)
        self._queues_exported = set(waiting)

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
