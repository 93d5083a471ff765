"""The worker's outlook reads grouped (consumers.outlooks.GroupedOutlooks, over consumers.grouped_reads): one query in
flight at a time, and the jobs asked about while it runs (claims of a backlog taken together) go together in the
next, not one query each (issue 41, item 2)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta

import pytest

from consumers.outlooks import GroupedOutlooks
from projections.errors import ProjectionUnavailable
from projections.reads.worker import Outlook
from tests.support.job_logs import _Builder
from tests.support.worker_fakes import TP, FakeConsumer, RecordingRunner, make_worker, record, tail_scanned
from tests.unit.test_segment_lookups import settle
from tests.unit.test_worker_failures import run_until_idle

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 1, 12, 0)
CANCELLED = uuid.UUID(int=1)


def job(n: int) -> uuid.UUID:
    return uuid.UUID(int=100 + n)


class GatedOutlooks:
    """The projection's outlooks, noting each query; each query waits for its own gate to be opened."""

    def __init__(self) -> None:
        self.queries: list[tuple[list[uuid.UUID], datetime]] = []
        self.gates: list[asyncio.Event] = []
        self.asked = asyncio.Condition()
        self.down = False
        self.gated = True

    async def outlooks(self, asked, now) -> dict[uuid.UUID, Outlook]:
        gate = asyncio.Event()
        async with self.asked:
            self.queries.append(([job_id for job_id, _ in asked], now))
            self.gates.append(gate)
            self.asked.notify_all()
        if self.gated:
            await gate.wait()
        if self.down:
            raise ProjectionUnavailable("PostgreSQL is unreachable")
        return {job_id: Outlook(cancelled=job_id == CANCELLED) for job_id, _ in asked}

    async def until_asked(self, count: int) -> None:
        async with self.asked:
            await self.asked.wait_for(lambda: len(self.queries) >= count)


async def test_jobs_asked_about_while_a_query_is_in_flight_go_together_in_the_next_one():
    lookup = GatedOutlooks()
    outlooks = GroupedOutlooks(lookup)
    first = asyncio.ensure_future(outlooks.outlook(job(0), "f0", T0))
    await lookup.until_asked(1)
    together = [CANCELLED, job(1), job(2)]
    backlog = [asyncio.ensure_future(outlooks.outlook(j, f"f{j.int}", T0)) for j in together]
    await settle()
    assert len(lookup.queries) == 1, "the others wait for the query in flight"
    lookup.gates[0].set()
    await lookup.until_asked(2)
    lookup.gates[1].set()
    assert await first == Outlook()
    assert await asyncio.gather(*backlog) == [Outlook(cancelled=True), Outlook(), Outlook()]
    assert [jobs for jobs, _ in lookup.queries] == [[job(0)], together], "two queries for four jobs"


async def test_a_group_reads_live_results_at_its_latest_askers_time():
    """A result live at the latest time asked is live at every asker's: none reuses one that expired for it."""
    lookup = GatedOutlooks()
    outlooks = GroupedOutlooks(lookup)
    first = asyncio.ensure_future(outlooks.outlook(job(0), "f0", T0))
    await lookup.until_asked(1)
    later = T0 + timedelta(seconds=2)
    group = [asyncio.ensure_future(outlooks.outlook(job(n), f"f{n}", at)) for n, at in ((1, later), (2, T0))]
    await settle()
    lookup.gates[0].set()
    await lookup.until_asked(2)
    lookup.gates[1].set()
    await asyncio.gather(first, *group)
    assert [now for _, now in lookup.queries] == [T0, later]


async def test_an_asker_cancelled_leaves_the_others_of_its_group_answered_by_the_next_query():
    lookup = GatedOutlooks()
    outlooks = GroupedOutlooks(lookup)
    first = asyncio.ensure_future(outlooks.outlook(job(0), "f0", T0))
    await lookup.until_asked(1)
    leader = asyncio.ensure_future(outlooks.outlook(job(1), "f1", T0))  # waits to run the next query
    await settle()
    follower = asyncio.ensure_future(outlooks.outlook(CANCELLED, "f", T0))  # joins it
    await settle()
    leader.cancel()  # its attempt ended (a rebalance, a hung engine) before the next query began
    await settle()
    assert leader.cancelled()
    lookup.gates[0].set()
    assert await first == Outlook()
    await lookup.until_asked(2)
    lookup.gates[1].set()
    assert await follower == Outlook(cancelled=True), "asked again, and told: not claimed blind"
    assert [jobs for jobs, _ in lookup.queries] == [[job(0)], [CANCELLED]]


async def test_an_asker_cancelled_during_its_query_lets_the_next_query_run():
    lookup = GatedOutlooks()
    outlooks = GroupedOutlooks(lookup)
    first = asyncio.ensure_future(outlooks.outlook(job(0), "f0", T0))
    await lookup.until_asked(1)
    follower = asyncio.ensure_future(outlooks.outlook(job(1), "f1", T0))
    await settle()
    first.cancel()  # the query in flight is cancelled with its asker
    await settle()
    await lookup.until_asked(2)
    lookup.gates[1].set()
    assert await follower == Outlook()
    assert first.cancelled()


async def test_the_projection_unreadable_reaches_every_asker_of_the_query():
    lookup = GatedOutlooks()
    outlooks = GroupedOutlooks(lookup)
    first = asyncio.ensure_future(outlooks.outlook(job(0), "f0", T0))
    await lookup.until_asked(1)
    group = [asyncio.ensure_future(outlooks.outlook(job(n), f"f{n}", T0)) for n in (1, 2, 3)]
    await settle()
    lookup.down = True
    lookup.gates[0].set()
    await lookup.until_asked(2)
    lookup.gates[1].set()
    for asker in (first, *group):
        with pytest.raises(ProjectionUnavailable):
            await asker
    assert len(lookup.queries) == 2


async def test_a_job_its_query_does_not_answer_has_the_outlook_of_a_job_not_projected():
    class Silent(GatedOutlooks):
        async def outlooks(self, asked, now) -> dict[uuid.UUID, Outlook]:
            return {}

    assert await GroupedOutlooks(Silent()).outlook(job(0), "f0", T0) == Outlook()


class CountingLookup:
    """The worker's lookup (nothing cached, nothing cancelled), whose outlook queries are counted; the first
    waits for its gate, as a query does while claims of a backlog are taken."""

    def __init__(self) -> None:
        self.outlooks_gated = GatedOutlooks()
        self.single_reads = 0

    async def outlooks(self, asked, now) -> dict[uuid.UUID, Outlook]:
        return await self.outlooks_gated.outlooks(asked, now)

    async def outlook(self, job_id, fingerprint, now) -> Outlook:
        self.single_reads += 1
        return Outlook()

    async def request_of(self, job_id):
        return None

    async def result_blobs(self, job_id):
        return []


async def test_jobs_claimed_together_make_fewer_outlook_queries_than_jobs():
    n = 6
    builders = [_Builder(job(i), request_text=f"Sentence number {i}.") for i in range(n)]
    consumer, runner = FakeConsumer({TP: [record(b.queued(), i) for i, b in enumerate(builders)]}), RecordingRunner()
    lookup = CountingLookup()
    worker = make_worker(consumer, runner, lookup, commit_interval_s=0, held_claims=n, outlooks=lookup)
    tail_scanned(worker)
    running = asyncio.ensure_future(run_until_idle(worker, consumer))
    await lookup.outlooks_gated.until_asked(1)
    await settle()  # the other claims, taken with the first, ask meanwhile
    lookup.outlooks_gated.gated = False
    lookup.outlooks_gated.gates[0].set()
    await running
    queries = [jobs for jobs, _ in lookup.outlooks_gated.queries]
    assert sorted(runner.jobs) == [b.job_id for b in builders]
    assert sorted(j for jobs in queries for j in jobs) == [b.job_id for b in builders], "each job asked once"
    assert len(queries) < n, queries
    assert lookup.single_reads == 0
