"""The API's count of live workers (producers.census): what voxlog_workers exports, and for how long."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from producers.census import WorkerCensus
from projections.errors import ProjectionUnavailable


def exported(engine: str, model_version: str) -> float | None:
    return REGISTRY.get_sample_value("voxlog_workers", {"engine": engine, "model_version": model_version})


class Counts:
    def __init__(self, *readings: dict[tuple[str, str], int] | Exception) -> None:
        self._readings = list(readings)

    async def __call__(self) -> dict[tuple[str, str], int]:
        reading = self._readings.pop(0)
        if isinstance(reading, Exception):
            raise reading
        return reading


async def test_each_engine_and_model_version_exports_its_live_workers_and_a_version_all_gone_reads_zero():
    old, new = ("census-engine", "v1"), ("census-engine", "v2")
    census = WorkerCensus(Counts({old: 2}, {new: 1}))
    await census.count()
    assert (exported(*old), exported(*new)) == (2.0, None)
    await census.count()
    assert (exported(*old), exported(*new)) == (0.0, 1.0), "the old version's workers are gone: 0, not 2"


async def test_while_the_projection_cannot_be_read_the_last_counts_stay():
    version = ("census-engine", "v3")
    census = WorkerCensus(Counts({version: 3}, ProjectionUnavailable("down")))
    await census.count()
    with pytest.raises(ProjectionUnavailable):
        await census.count()
    assert exported(*version) == 3.0


def waiting(worker: str, tenant: str, priority: str) -> float | None:
    labels = {"worker": worker, "tenant": tenant, "priority": priority}
    return REGISTRY.get_sample_value("voxlog_worker_queue_jobs", labels)


async def test_each_live_workers_queue_is_exported_by_tenant_and_priority_and_a_gone_workers_series_go():
    queues = Counts(
        {"census-w1": {("acme", "batch"): 10_000, ("globex", "interactive"): 2}, "census-w2": {}},
        {"census-w1": {("acme", "batch"): 9_000}},  # globex's jobs were taken; w2 went silent
    )
    census = WorkerCensus(Counts({}, {}), queues)  # type: ignore[arg-type]
    await census.count()
    assert (waiting("census-w1", "acme", "batch"), waiting("census-w1", "globex", "interactive")) == (10_000, 2)
    assert waiting("census-w2", "acme", "batch") is None, "an idle worker has no series"
    await census.count()
    assert (waiting("census-w1", "acme", "batch"), waiting("census-w1", "globex", "interactive")) == (9_000, 0), (
        "a live worker that no longer holds a tenant's jobs reads 0 for it"
    )

    census_gone = WorkerCensus(Counts({}, {}), Counts({"census-w3": {("acme", "batch"): 1}}, {}))  # type: ignore[arg-type]
    await census_gone.count()
    assert waiting("census-w3", "acme", "batch") == 1
    await census_gone.count()
    assert waiting("census-w3", "acme", "batch") is None, "a worker gone takes its series with it"
