"""The real projector on real Postgres ends where the pure fold (contracts.job_state) does, for any log.

Hypothesis plays partitions of the jobs topic (tests.support.job_logs): duplicates,
stale attempts' late events interleaved after newer claims, cache hits, and
arbitrary sequences; and the control topic beside them (tests.support.node_logs):
announcements, heartbeats, mode switches and documents, out of their clocks'
order and repeated. The projector applies them in batches of random sizes that
hold records of both topics, as its consumer would hand them over.
"""

from __future__ import annotations

import itertools
import uuid
from collections import defaultdict
from datetime import datetime, timedelta

import asyncpg
from aiokafka import ConsumerRecord
from aiokafka.structs import TopicPartition
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts import (
    DocumentSubmitted,
    JobEvent,
    JobState,
    JobStatus,
    NodeAnnounced,
    NodeEvent,
    NodeHeartbeat,
    ServiceModeSet,
    fold,
    recorded_segment,
)
from contracts.job_state import Fenced, transition
from projections.projector import Projector, ProjectorConfig
from projections.reducer import is_node_event
from projections.rows import TABLES
from tests.support.job_logs import arbitrary_logs, realistic_logs
from tests.support.node_logs import with_node_events
from tests.support.records import RecordedDeadLetters, record_of

TOPIC, CONTROL = "jobs", "control"
CONFIG = ProjectorConfig(
    name="props", jobs_topic=TOPIC, control_topic=CONTROL, cache_ttl=timedelta(minutes=10), max_batch=50
)
Log = list[JobEvent | NodeEvent]
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
        segment = recorded_segment(event)  # its own record's, or the last riding in a completion (version 3)
        if segment is not None:
            kept[event.job_id][segment.index] = event.attempt
        elif event.type == "JobClaimed" or outcome.state is JobState.RELEASED:
            kept[event.job_id] = {}
    return {job_id: segments for job_id, segments in kept.items() if segments}


def expected_node_rows(log: Log) -> dict[str, dict[tuple[object, ...], uuid.UUID]]:
    """Per node table, the event each row holds: of a worker's announcements, heartbeats, and each source's
    mode switches, the last in log order of those with the latest clock; of a document's records, the first."""
    latest: dict[str, dict[tuple[object, ...], tuple[datetime, uuid.UUID]]] = defaultdict(dict)
    for event in log:
        match event:
            case NodeAnnounced():
                table, key, clock = "nodes", (event.payload.worker_id,), event.occurred_at
            case NodeHeartbeat():
                table, key, clock = "node_heartbeats", (event.payload.worker_id,), event.payload.sent_at
            case ServiceModeSet():
                table, key, clock = "service_modes", (event.payload.mode, event.payload.source), event.occurred_at
            case DocumentSubmitted():
                latest["documents"].setdefault((event.payload.document_id,), (event.occurred_at, event.event_id))
                continue
            case _:
                continue
        held = latest[table].get(key)
        if held is None or clock >= held[0]:
            latest[table][key] = (clock, event.event_id)
    return {table: {key: event_id for key, (_, event_id) in rows.items()} for table, rows in latest.items()}


def positions(log: Log) -> list[tuple[str, int]]:
    """Where each event of ``log`` lies: job events in the jobs topic, node events in the control topic."""
    next_offset: dict[str, int] = defaultdict(int)
    found = []
    for event in log:
        topic = CONTROL if is_node_event(event) else TOPIC
        found.append((topic, next_offset[topic]))
        next_offset[topic] += 1
    return found


async def project(pool: asyncpg.Pool, log: Log, cuts: list[int]) -> None:
    """Apply ``log`` through the projector, cut into batches at ``cuts`` (each batch holds both topics)."""
    async with pool.acquire() as conn:
        await conn.execute(f"TRUNCATE {', '.join(t.name for t in TABLES)}, projection_offsets")
    projector = Projector(CONFIG, pool, consumer=None, partitions=[], dead_letter=RecordedDeadLetters())  # type: ignore[arg-type]
    records = [record_of(event, topic, 0, offset) for event, (topic, offset) in zip(log, positions(log), strict=True)]
    bounds = sorted({0, len(records), *(c % (len(records) + 1) for c in cuts)})
    for start, end in itertools.pairwise(bounds):
        batch: dict[TopicPartition, list[ConsumerRecord]] = defaultdict(list)
        for record in records[start:end]:
            batch[TopicPartition(record.topic, 0)].append(record)
        await projector.apply_batch(batch)


async def projected(pool: asyncpg.Pool) -> tuple[dict[uuid.UUID, JobStatus], dict[uuid.UUID, dict[int, int]]]:
    async with pool.acquire() as conn:
        jobs = {
            r["job_id"]: JobStatus(JobState(r["state"]), r["attempt"]) for r in await conn.fetch("SELECT * FROM jobs")
        }
        segments: dict[uuid.UUID, dict[int, int]] = defaultdict(dict)
        for r in await conn.fetch("SELECT job_id, segment_index, attempt FROM segments"):
            segments[r["job_id"]][r["segment_index"]] = r["attempt"]
    return jobs, dict(segments)


async def projected_node_rows(pool: asyncpg.Pool) -> dict[str, dict[tuple[object, ...], uuid.UUID]]:
    found = {}
    async with pool.acquire() as conn:
        for table in (t for t in TABLES if t.name in ("nodes", "node_heartbeats", "service_modes", "documents")):
            rows = await conn.fetch(f"SELECT {', '.join(table.key)}, last_event_id FROM {table.name}")
            if rows:
                found[table.name] = {tuple(r)[:-1]: r["last_event_id"] for r in rows}
    return found


async def assert_projection_is_the_fold(pool: asyncpg.Pool, log: Log, cuts: list[int]) -> None:
    await project(pool, log, cuts)
    jobs, segments = await projected(pool)
    events = [event for event in log if not is_node_event(event)]
    assert jobs == fold(events)
    assert segments == expected_segments(events)
    assert await projected_node_rows(pool) == expected_node_rows(log)


CUTS = st.lists(st.integers(0, 200), max_size=4)


@PROPERTY
@given(events=realistic_logs(), cuts=CUTS)
async def test_the_projector_ends_where_the_fold_does_on_realistic_logs(pool, events, cuts):
    await assert_projection_is_the_fold(pool, events, cuts)


@PROPERTY
@given(events=arbitrary_logs(), cuts=CUTS)
async def test_the_projector_ends_where_the_fold_does_on_any_sequence(pool, events, cuts):
    await assert_projection_is_the_fold(pool, events, cuts)


@PROPERTY
@given(log=with_node_events(arbitrary_logs()), cuts=CUTS)
async def test_the_projector_ends_where_the_fold_does_with_node_events_in_its_batches(pool, log, cuts):
    await assert_projection_is_the_fold(pool, log, cuts)
