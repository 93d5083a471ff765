"""The API's count of live workers (producers.census): what voxlog_workers exports, and for how long."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from producers.census import WorkerCensus
from producers.queries import ProjectionUnavailable


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
