"""Placing new jobs against the real projection (producers.placement.BalancedPlacement): duplicates meet in one
partition whatever the race, and a new fingerprint goes where the projection shows the least work."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from contracts import JobQueued
from foundation.kafka import RecordPosition
from producers.placement import BalancedPlacement
from projections.batch_apply import apply_events
from projections.reads.jobs import ProjectionReader
from tests.support.job_logs import _Builder

pytestmark = pytest.mark.integration
TTL = timedelta(minutes=10)


class Topic:
    """The jobs topic as the placement sees it: its partition count."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions

    async def partition_count(self) -> int:
        return self.partitions


async def project(pool, events_at) -> None:
    """Project ``(event, partition)`` pairs, as the projector would have read them."""
    async with pool.acquire() as conn:
        positions = [(e, RecordPosition("jobs", p, i)) for i, (e, p) in enumerate(events_at)]
        await apply_events(conn, positions, TTL)


async def test_two_apis_racing_with_one_text_place_every_copy_in_one_partition(pool):
    apis = [BalancedPlacement(pool, Topic(24), 3600.0) for _ in range(2)]  # type: ignore[arg-type]
    copies = [_Builder(uuid.uuid4(), request_text="The same words, asked for forty times.").queued() for _ in range(40)]
    placed = await asyncio.gather(*(apis[i % 2].place([job]) for i, job in enumerate(copies)))
    partitions = {p for [p] in placed}
    assert len(partitions) == 1
    assert None not in partitions
    rows = await pool.fetch("SELECT fingerprint, kafka_partition FROM placements")
    assert [(r["fingerprint"], r["kafka_partition"]) for r in rows] == [(copies[0].fingerprint, partitions.pop())]


async def test_a_new_text_goes_to_the_partition_with_less_live_work_and_a_known_one_stays(pool):
    first = BalancedPlacement(pool, Topic(2), 3600.0)  # type: ignore[arg-type]
    long_job = _Builder(uuid.UUID(int=1), request_text="A long text. " * 200).queued()
    [busy] = await first.place([long_job])
    assert busy is not None
    await project(pool, [(long_job, busy)])  # live in the projection: queued

    api = BalancedPlacement(pool, Topic(2), 3600.0)  # type: ignore[arg-type]  # another API: reads the projection
    await api.refresh(2)
    short = _Builder(uuid.UUID(int=2), request_text="Short.").queued()
    twin = _Builder(uuid.UUID(int=3), request_text="A long text. " * 200).queued()
    assert await api.place([short]) == [1 - busy]
    assert await api.place([twin]) == [busy], "a duplicate meets its live twin, however busy that partition is"


async def test_an_expired_route_is_placed_anew(pool):
    api = BalancedPlacement(pool, Topic(2), 3600.0)  # type: ignore[arg-type]
    old = _Builder(uuid.UUID(int=1), request_text="Said last week.").queued()
    [was] = await api.place([old])
    other = _Builder(uuid.UUID(int=2), request_text="Something else, long enough to weigh. " * 50).queued()
    await pool.execute("INSERT INTO placements VALUES ($1, $2, now() + interval '1 hour')", other.fingerprint, was)
    await project(pool, [(other, was)])  # its old partition now holds live work
    await pool.execute(
        "UPDATE placements SET expires_at = now() - interval '1 second' WHERE fingerprint = $1", old.fingerprint
    )

    fresh = BalancedPlacement(pool, Topic(2), 3600.0)  # type: ignore[arg-type]
    await fresh.refresh(2)
    again = _Builder(uuid.UUID(int=3), request_text="Said last week.").queued()
    assert await fresh.place([again]) == [1 - was]


async def test_regression_placed_work_was_forgotten_before_the_projection_showed_it(pool):
    """Placed work was counted for 200 ms, then left to the projection's reading; under a burst the projector
    lags longer, and the partition of work not projected yet looked idle and drew more jobs."""
    api = BalancedPlacement(pool, Topic(2), 3600.0)  # type: ignore[arg-type]
    [busy] = await api.place([_Builder(uuid.UUID(int=1), request_text="A long text. " * 100).queued()])
    placed = []
    for n in range(2, 5):
        await api.refresh(2)  # a reading of the projection, which shows none of it yet
        placed += await api.place([_Builder(uuid.UUID(int=n), request_text=f"Short {n}.").queued()])
    assert placed == [1 - busy] * 3


async def test_the_lookup_places_new_fingerprints_keeps_known_ones_and_finds_live_results_in_one_statement(pool):
    made = _Builder(uuid.UUID(int=5), request_text="Said once.")
    async with pool.acquire() as conn:  # cached for as long as the test's events are old, and more
        events = (made.queued(), made.claimed(1), made.segment(1, 0), made.completed(1, 1))
        await apply_events(
            conn, [(e, RecordPosition("jobs", 3, i)) for i, e in enumerate(events)], timedelta(days=9999)
        )
    before = _Builder(uuid.UUID(int=6), request_text="Placed before.").queued()
    [kept] = await BalancedPlacement(pool, Topic(24), 3600.0).place([before])  # type: ignore[arg-type]
    new = _Builder(uuid.UUID(int=7), request_text="Never seen.").queued()
    fingerprints = [made.queued().fingerprint, before.fingerprint, new.fingerprint]
    live, placed, _ = await ProjectionReader(pool).cached_results_placed(
        fingerprints, [7, (kept + 1) % 24, 9], 60.0, 24
    )
    assert list(live) == [made.queued().fingerprint]
    assert live[made.queued().fingerprint].job_id == uuid.UUID(int=5)
    assert placed == {made.queued().fingerprint: 7, before.fingerprint: kept, new.fingerprint: 9}
    rows = await pool.fetch("SELECT fingerprint, kafka_partition FROM placements")
    assert {r["fingerprint"]: r["kafka_partition"] for r in rows} == placed


async def test_two_apis_placing_by_their_lookups_put_every_copy_of_a_text_in_one_partition(pool):
    apis = [BalancedPlacement(pool, Topic(24), 3600.0) for _ in range(2)]  # type: ignore[arg-type]
    reader = ProjectionReader(pool)
    copies = [_Builder(uuid.uuid4(), request_text="The same words, looked up forty times.").queued() for _ in range(40)]

    async def look_up(api: BalancedPlacement, job: JobQueued) -> int:
        draft = await api.propose([(job.job_id, job.fingerprint, job.payload.request)])
        assert draft is not None
        _, placed, _ = await reader.cached_results_placed(
            list(draft.fingerprints), list(draft.proposed), draft.ttl_s, draft.partitions
        )
        api.kept(draft, placed)
        return placed[job.fingerprint]

    partitions = set(await asyncio.gather(*(look_up(apis[i % 2], job) for i, job in enumerate(copies))))
    assert len(partitions) == 1
    assert await pool.fetchval("SELECT count(*) FROM placements") == 1


async def test_the_lookup_reads_the_jobs_idempotency_keys_named_in_the_same_statement(pool):
    """Issue 41, item 1: the lookup, the placements' upsert and the keys' jobs are one round trip."""
    made = _Builder(uuid.UUID(int=15), request_text="Said once, with a key.")
    queued = made.queued()
    keyed = queued.model_copy(update={"payload": queued.payload.model_copy(update={"idempotency_key": "t/k1"})})
    async with pool.acquire() as conn:
        events = (keyed, made.claimed(1), made.segment(1, 0), made.completed(1, 1))
        await apply_events(
            conn, [(e, RecordPosition("jobs", 3, i)) for i, e in enumerate(events)], timedelta(days=9999)
        )
    new = _Builder(uuid.UUID(int=16), request_text="Never seen, with a key.").queued()
    fingerprints = [keyed.fingerprint, new.fingerprint]
    reader = ProjectionReader(pool)
    live, placed, known = await reader.cached_results_placed(fingerprints, [7, 9], 60.0, 24, ["t/k1", "t/k2"])
    assert list(known) == ["t/k1"], "a key that named no job is not there"
    assert (known["t/k1"].job_id, known["t/k1"].fingerprint) == (uuid.UUID(int=15), keyed.fingerprint)
    assert known["t/k1"].state.value == "completed"
    assert known == await reader.jobs_by_keys(["t/k1", "t/k2"]), "as the keys' own lookup reads them"
    assert list(live) == [keyed.fingerprint]
    assert live[keyed.fingerprint].job_id == uuid.UUID(int=15)
    assert len(live[keyed.fingerprint].refs) == 1
    assert placed == {keyed.fingerprint: 7, new.fingerprint: 9}
    _, placed_alone, none = await reader.cached_results_placed([new.fingerprint], [3], 60.0, 24, ["t/none"])
    assert (placed_alone, none) == ({new.fingerprint: 9}, {}), "placed before: kept"
