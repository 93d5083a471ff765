"""The worker's one cancellation watch (consumers.cancellation.CancelWatches): every job it holds asked about in one
query at most every interval, concurrent askers sharing it, and an unreadable projection meaning "go on"."""

from __future__ import annotations

import asyncio
import uuid
from contextlib import ExitStack

from consumers.cancellation import CancelWatch, CancelWatches
from projections.errors import ProjectionUnavailable
from tests.unit.test_outages import Clock

EVERY_S = 0.5


class CountingLookup:
    """The projection's cancellations, counting the queries asked of it; ``gate`` holds every query until set."""

    def __init__(self, cancelled: set[uuid.UUID] | None = None) -> None:
        self.cancelled = cancelled or set()
        self.queries: list[frozenset[uuid.UUID]] = []
        self.down = False
        self.gate: asyncio.Event | None = None
        self.asking = asyncio.Event()

    async def cancelled_among(self, job_ids) -> set[uuid.UUID]:
        self.queries.append(frozenset(job_ids))
        self.asking.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.down:
            raise ProjectionUnavailable("PostgreSQL is unreachable")
        return self.cancelled & set(job_ids)

    async def wanted_elsewhere(self, fingerprint: str, job_id: uuid.UUID) -> bool:
        return False


def a_worker() -> tuple[Clock, CountingLookup, CancelWatches]:
    """A worker's shared watch over a counting lookup, on a clock the test moves."""
    clock, lookup = Clock(), CountingLookup()
    return clock, lookup, CancelWatches(lookup, EVERY_S, clock)


def held(stack: ExitStack, watches: CancelWatches, count: int) -> list[CancelWatch]:
    return [stack.enter_context(watches.watch(uuid.UUID(int=n + 1), f"fp{n}")) for n in range(count)]


async def test_many_held_jobs_are_asked_about_in_one_query_per_interval():
    clock, lookup, watches = a_worker()
    with ExitStack() as stack:
        attempts = held(stack, watches, 50)
        lookup.cancelled = {attempts[7].job_id}
        clock.now += EVERY_S  # the claims are old enough to be asked about
        first = [await a.cancelled() for a in attempts]  # one boundary each
        again = [await a.cancelled() for a in attempts]  # and another, within the same interval
        assert len(lookup.queries) == 1, "one query for the fifty jobs"
        assert lookup.queries[0] == {a.job_id for a in attempts}
        assert first == again == [a is attempts[7] for a in attempts]
        clock.now += EVERY_S
        assert [await a.cancelled() for a in attempts].count(True) == 1
        assert len(lookup.queries) == 2, "the next interval: one more"


async def test_a_claim_younger_than_the_interval_is_not_asked_about():
    clock, lookup, watches = a_worker()
    with watches.watch(uuid.UUID(int=1), "fp") as watch:
        lookup.cancelled = {watch.job_id}  # checked before the claim (the Outlook): a short job is never asked
        assert await watch.cancelled() is False
        assert lookup.queries == []
        clock.now += EVERY_S
        assert await watch.cancelled() is True


async def test_concurrent_askers_share_one_query():
    clock, lookup, watches = a_worker()
    with ExitStack() as stack:
        attempts = held(stack, watches, 10)
        lookup.cancelled = {attempts[0].job_id, attempts[9].job_id}
        lookup.gate = asyncio.Event()
        clock.now += EVERY_S
        asked = [asyncio.ensure_future(a.cancelled()) for a in attempts]
        await lookup.asking.wait()  # the first asker's query is under way; the others wait for it
        lookup.gate.set()
        answers = await asyncio.gather(*asked)
        assert len(lookup.queries) == 1
        assert answers == [True] + [False] * 8 + [True]


async def test_a_job_taken_after_the_last_query_is_asked_about_in_the_next_one():
    clock, lookup, watches = a_worker()
    with watches.watch(uuid.UUID(int=1), "a") as first:
        clock.now += EVERY_S
        assert await first.cancelled() is False
        with watches.watch(uuid.UUID(int=2), "b") as second:
            lookup.cancelled = {second.job_id}
            clock.now += EVERY_S
            assert await second.cancelled() is True
            assert lookup.queries == [{first.job_id}, {first.job_id, second.job_id}]
        clock.now += EVERY_S
        assert await first.cancelled() is False
        assert lookup.queries[-1] == {first.job_id}, "an attempt that ended is no longer asked about"


async def test_with_the_projection_unreadable_every_job_goes_on_and_it_is_asked_once_per_interval():
    clock, lookup, watches = a_worker()
    lookup.down = True
    with ExitStack() as stack:
        attempts = held(stack, watches, 5)
        lookup.cancelled = {a.job_id for a in attempts}
        clock.now += EVERY_S
        assert [await a.cancelled() for a in attempts] == [False] * 5, "cannot tell: going on"
        assert len(lookup.queries) == 1
        lookup.down = False
        clock.now += EVERY_S
        assert [await a.cancelled() for a in attempts] == [True] * 5


async def test_without_a_lookup_nothing_is_cancelled():
    clock = Clock()
    watches = CancelWatches(None, EVERY_S, clock)
    with watches.watch(uuid.UUID(int=1), "fp") as watch:
        clock.now += EVERY_S
        assert await watch.cancelled() is False
        assert await watch.wanted_elsewhere() is False
