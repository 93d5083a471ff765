"""The real projector on real Postgres ends where the pure fold (contracts.job_state) does, for any log.

Hypothesis plays partitions of the jobs topic (tests.support.job_logs): duplicates,
stale attempts' late events interleaved after newer claims, cache hits, and
arbitrary sequences. The projector applies them in batches of random sizes,
as its consumer would hand them over.
"""

from __future__ import annotations

import itertools
import uuid
from collections import defaultdict
from datetime import timedelta

import asyncpg
from aiokafka.structs import TopicPartition
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts import JobEvent, JobState, JobStatus, fold
from contracts.job_state import Fenced, transition
from projections.projector import Projector, ProjectorConfig
from tests.support.job_logs import arbitrary_logs, realistic_logs
from tests.support.records import RecordedDeadLetters, record_of

TOPIC = "jobs"
CONFIG = ProjectorConfig(
    name="props", jobs_topic=TOPIC, nodes_topic="nodes", cache_ttl=timedelta(minutes=10), max_batch=50
)
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def expected_segments(events: list[JobEvent]) -> dict[uuid.UUID, dict[int, int]]:
    """Per job, the segments the fold keeps: those its current attempt produced, unless that attempt
    was released (a released attempt's partial audio is discarded)."""
    statuses: dict[uuid.UUID, JobStatus] = {}
    kept: dict[uuid.UUID, dict[int, int]] = defaultdict(dict)
    for event in events:
        outcome = transition(statuses.get(event.job_id), event)
        if isinstance(outcome, Fenced):
            continue
        statuses[event.job_id] = outcome
        if event.type == "SegmentProduced":
            kept[event.job_id][event.payload.index] = event.attempt
        elif event.type == "JobClaimed" or outcome.state is JobState.RELEASED:
            kept[event.job_id] = {}
    return {job_id: segments for job_id, segments in kept.items() if segments}


async def project(pool: asyncpg.Pool, events: list[JobEvent], cuts: list[int]) -> None:
    async with pool.acquire() as conn:
        await conn.execute("TRUNCATE jobs, segments, job_events, result_cache, projection_offsets")
    projector = Projector(CONFIG, pool, consumer=None, partitions=[], dead_letter=RecordedDeadLetters())  # type: ignore[arg-type]
    records = [record_of(event, TOPIC, 0, offset) for offset, event in enumerate(events)]
    bounds = sorted({0, len(records), *(c % (len(records) + 1) for c in cuts)})
    for start, end in itertools.pairwise(bounds):
        await projector.apply_batch({TopicPartition(TOPIC, 0): records[start:end]})


async def projected(pool: asyncpg.Pool) -> tuple[dict[uuid.UUID, JobStatus], dict[uuid.UUID, dict[int, int]]]:
    async with pool.acquire() as conn:
        jobs = {
            r["job_id"]: JobStatus(JobState(r["state"]), r["attempt"]) for r in await conn.fetch("SELECT * FROM jobs")
        }
        segments: dict[uuid.UUID, dict[int, int]] = defaultdict(dict)
        for r in await conn.fetch("SELECT job_id, segment_index, attempt FROM segments"):
            segments[r["job_id"]][r["segment_index"]] = r["attempt"]
    return jobs, dict(segments)


async def assert_projection_is_the_fold(pool: asyncpg.Pool, events: list[JobEvent], cuts: list[int]) -> None:
    await project(pool, events, cuts)
    jobs, segments = await projected(pool)
    assert jobs == fold(events)
    assert segments == expected_segments(events)


CUTS = st.lists(st.integers(0, 200), max_size=4)


@PROPERTY
@given(events=realistic_logs(), cuts=CUTS)
async def test_the_projector_ends_where_the_fold_does_on_realistic_logs(pool, events, cuts):
    await assert_projection_is_the_fold(pool, events, cuts)


@PROPERTY
@given(events=arbitrary_logs(), cuts=CUTS)
async def test_the_projector_ends_where_the_fold_does_on_any_sequence(pool, events, cuts):
    await assert_projection_is_the_fold(pool, events, cuts)
