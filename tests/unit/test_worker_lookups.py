"""The worker's lookups in the projection (projections.reads.worker) through a PostgreSQL outage: said once, and not
tried again until the backoff's delay is over (a lookup per segment waited for a connection each time)."""

from __future__ import annotations

import uuid

import pytest

from foundation.outages import Outage
from projections.errors import ProjectionUnavailable
from projections.reads.worker import PostgresResultLookup
from tests.unit.test_outages import Clock, Lines


class DownPool:
    """A pool whose every query fails as a refused connection does, until it is up again."""

    def __init__(self) -> None:
        self.tries = 0
        self.up = False

    async def fetch(self, *args: object, **kwargs: object) -> list[object]:
        self.tries += 1
        if not self.up:
            raise ConnectionRefusedError("connection refused")
        return []  # none of them cancelled


async def test_regression_while_postgresql_is_down_a_lookup_is_not_tried_again_before_the_backoff():
    pool, clock, said = DownPool(), Clock(), Lines()
    outage = Outage("PostgreSQL (the worker's lookups)", clock=clock, logger=said)
    lookup = PostgresResultLookup(pool, outage)  # type: ignore[arg-type]
    job = uuid.uuid4()
    for _ in range(50):  # fifty segment boundaries, each asking whether the job was cancelled
        with pytest.raises(ProjectionUnavailable):
            await lookup.cancelled_among([job])
    assert pool.tries == 1, "one try, then none until the backoff's delay is over"
    clock.now += outage.delay_s  # the delay is over
    pool.up = True
    assert await lookup.cancelled_among([job]) == set()
    assert said.events() == [
        "waiting for PostgreSQL (the worker's lookups)",
        "PostgreSQL (the worker's lookups) available again",
    ]
