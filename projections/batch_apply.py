"""A batch of job events applied set-based: a handful of statements per batch, not several per event.

The per-event path (:mod:`projections.apply`) costs a savepoint and two or
three statements for every event, so a job's four events cost about twenty
round trips. Here a batch costs a fixed number whatever its size:

1. every event goes into ``job_events`` in one ``INSERT … SELECT FROM
   unnest(…) ON CONFLICT DO NOTHING``; the ids it returns are the events
   applied for the first time, the rest are duplicates;
2. the rows those events touch (their jobs, the jobs' segments, the result
   cache of their fingerprints) are read in three statements;
3. the new events are folded onto those rows in memory, in log order, by
   :class:`projections.reducer.Projection`: the same state machine and
   columns as the per-event statements, which property tests keep equal;
4. what changed is written back: one upsert per table, one delete of the
   segments a claim or release discarded, one of the cache entries an
   eviction removed.

The projector is the only writer of these tables and applies one batch at a
time, so the rows read in step 2 are the rows the fold may build on. A batch
the tables refuse (a constraint, a value Postgres cannot store) raises; the
projector then applies that batch event by event, so that only the bad
record is dead-lettered.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

import asyncpg

from contracts import JobEvent
from foundation.kafka import RecordPosition
from projections.apply import Outcome
from projections.reducer import Applied, CacheRow, JobRow, Projection, SegmentRow, as_record, columns, event_row


@dataclass(frozen=True)
class _Table:
    name: str
    row_type: type
    types: tuple[str, ...]  # the SQL type of each column, in the row type's field order
    key: tuple[str, ...]

    def unnest(self) -> str:
        arrays = ", ".join(f"${i}::{t}[]" for i, t in enumerate(self.types, 1))
        return f"SELECT * FROM unnest({arrays})"

    def select(self, by: str, by_type: str) -> str:
        return f"SELECT {', '.join(columns(self.row_type))} FROM {self.name} WHERE {by} = ANY($1::{by_type}[])"

    def upsert(self) -> str:
        names = columns(self.row_type)
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in names if c not in self.key)
        return (
            f"INSERT INTO {self.name} ({', '.join(names)}) {self.unnest()}"
            f" ON CONFLICT ({', '.join(self.key)}) DO UPDATE SET {updates}"
        )


_TS = "timestamptz"
_JOBS: Final = _Table(
    "jobs",
    JobRow,
    ("uuid", "text", "text", "int", "jsonb", "text", "text", "bool", "uuid", "int", "int", "text", _TS, "text",
     "text", _TS, _TS, _TS, _TS, _TS, "uuid", _TS, "text"),
    ("job_id",),
)  # fmt: skip
_SEGMENTS: Final = _Table(
    "segments",
    SegmentRow,
    ("uuid", "int", "int", "int", "int", "text", "text", "text", "int", "int", "int", _TS, "text", "bool"),
    ("job_id", "segment_index"),
)
_CACHE: Final = _Table(
    "result_cache", CacheRow, ("text", "uuid", "int", "int", "bigint", _TS, _TS, _TS), ("fingerprint",)
)
# Built once: a batch reuses asyncpg's prepared statement for each.
_READS: Final = (
    _JOBS.select("job_id", "uuid"),
    _SEGMENTS.select("job_id", "uuid"),
    _CACHE.select("fingerprint", "text"),
)
_UPSERTS: Final = {table.name: table.upsert() for table in (_JOBS, _SEGMENTS, _CACHE)}
_EVENTS_INSERT: Final = (
    "INSERT INTO job_events (event_id, job_id, fingerprint, type, schema_version, attempt, occurred_at, producer,"
    " topic, kafka_partition, kafka_offset, payload)"
    " SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::int[], $6::int[], $7::timestamptz[],"
    " $8::text[], $9::text[], $10::int[], $11::bigint[], $12::jsonb[])"
    " ON CONFLICT (event_id) DO NOTHING RETURNING event_id"
)
_CACHE_DELETE: Final = "DELETE FROM result_cache WHERE fingerprint = ANY($1::text[])"
_SEGMENTS_DELETE: Final = (
    "DELETE FROM segments USING unnest($1::uuid[], $2::int[]) AS doomed(job_id, segment_index)"
    " WHERE segments.job_id = doomed.job_id AND segments.segment_index = doomed.segment_index"
)


def _arrays(rows: Sequence[object]) -> list[list[object]]:
    """Rows as one list per column, the shape ``unnest`` takes."""
    return [list(column) for column in zip(*(as_record(row) for row in rows), strict=True)]


async def apply_job_events(
    conn: asyncpg.Connection, events: Sequence[tuple[JobEvent, RecordPosition]], cache_ttl: timedelta
) -> list[tuple[JobEvent, Outcome]]:
    """Apply ``events`` (in log order) inside the caller's transaction; what became of each, in the same order."""
    if not events:
        return []
    first: dict[uuid.UUID, int] = {}  # event id -> its first position in the batch
    for i, (event, _) in enumerate(events):
        first.setdefault(event.event_id, i)
    rows = [event_row(*events[i]) for i in first.values()]
    new = {record["event_id"] for record in await conn.fetch(_EVENTS_INSERT, *_arrays(rows))}
    if not new:
        return [(event, Outcome.DUPLICATE) for event, _ in events]

    touched = list({event.job_id for event, _ in events if event.event_id in new})
    fingerprints = list({event.fingerprint for event, _ in events if event.event_id in new})
    fold = Projection(cache_ttl)  # seeded with the rows the new events build on
    read_jobs, read_segments, read_cache = _READS
    for record in await conn.fetch(read_jobs, touched):
        fold.jobs[record["job_id"]] = JobRow(*record)
    for record in await conn.fetch(read_segments, touched):
        fold.segments.setdefault(record["job_id"], {})[record["segment_index"]] = SegmentRow(*record)
    for record in await conn.fetch(read_cache, fingerprints):
        fold.cache[record["fingerprint"]] = CacheRow(*record)
    before_jobs = {job_id: as_record(row) for job_id, row in fold.jobs.items()}
    before_segments = {
        (job_id, index): as_record(row) for job_id, rows in fold.segments.items() for index, row in rows.items()
    }
    before_cache = {fingerprint: as_record(row) for fingerprint, row in fold.cache.items()}

    outcomes: list[tuple[JobEvent, Outcome]] = []
    for i, (event, _) in enumerate(events):
        if event.event_id not in new or first[event.event_id] != i:
            outcomes.append((event, Outcome.DUPLICATE))
            continue
        applied = fold.fold(event)
        outcomes.append((event, Outcome.APPLIED if applied is Applied.APPLIED else Outcome.FENCED))

    jobs = [row for job_id, row in fold.jobs.items() if before_jobs.get(job_id) != as_record(row)]
    after_segments = {(s.job_id, s.segment_index): s for s in fold.all_segments()}
    doomed = [key for key in before_segments if key not in after_segments]
    segments = [s for key, s in after_segments.items() if before_segments.get(key) != as_record(s)]
    cache = [row for fp, row in fold.cache.items() if before_cache.get(fp) != as_record(row)]
    evicted = [fp for fp in before_cache if fp not in fold.cache]
    if jobs:
        await conn.execute(_UPSERTS["jobs"], *_arrays(jobs))
    if doomed:
        await conn.execute(_SEGMENTS_DELETE, [k[0] for k in doomed], [k[1] for k in doomed])
    if segments:
        await conn.execute(_UPSERTS["segments"], *_arrays(segments))
    if evicted:
        await conn.execute(_CACHE_DELETE, evicted)
    if cache:
        await conn.execute(_UPSERTS["result_cache"], *_arrays(cache))
    return outcomes
