"""A batch of job events applied set-based: two statements per batch, whatever its size.

The per-event path (:mod:`projections.apply`) costs a savepoint and two or
three statements for every event, so a job's four events cost about twenty
round trips. Here a batch costs two, and on this machine a round trip's
loopback socket writes were the projector's largest CPU cost (half its
samples under py-spy, bench/profile_cpu.py):

1. **one read**: which of the batch's event ids ``job_events`` already holds
   (those are duplicates), and the rows the batch's events build on (their
   jobs, the jobs' segments, the result cache of their fingerprints), each
   as an array of rows in one ``SELECT``;
2. the new events are folded onto those rows in memory, in log order, by
   :class:`projections.reducer.Projection`: the same state machine and
   columns as the per-event statements, which property tests keep equal;
3. **one write**: a single statement of data-modifying ``WITH`` clauses
   inserts the new events into ``job_events``, upserts what changed in each
   table, deletes the segments a claim or release discarded and the cache
   entries an eviction removed, moves the projector's offsets past the batch
   and NOTIFYs the changed jobs. One statement is one transaction: it lands
   whole or not at all, so no ``BEGIN``/``COMMIT`` round trips are needed.

The projector is the only writer of these tables and applies one batch at a
time, so the rows read in step 1 are the rows the fold may build on, and
nothing changes between the read and the write. A batch the tables refuse (a
constraint, a value Postgres cannot store) raises and writes nothing; the
projector then applies that batch event by event, so that only the bad
record is dead-lettered.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final

import asyncpg

from contracts import JobEvent
from foundation.job_changes import notify_payloads
from foundation.kafka import RecordPosition
from projections.apply import Outcome
from projections.reducer import Applied, Projection
from projections.rows import CacheRow, EventRow, JobRow, SegmentRow, as_record, columns, event_row


@dataclass(frozen=True)
class _Table:
    name: str
    row_type: type
    types: tuple[str, ...]  # the SQL type of each column, in the row type's field order
    key: tuple[str, ...]


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


def _placeholders(types: Sequence[str], first: int) -> str:
    return ", ".join(f"${i}::{t}[]" for i, t in enumerate(types, first))


def _upsert(table: _Table, first: int) -> str:
    names = columns(table.row_type)
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in names if c not in table.key)
    return (
        f"INSERT INTO {table.name} ({', '.join(names)}) SELECT * FROM unnest({_placeholders(table.types, first)})"
        f" ON CONFLICT ({', '.join(table.key)}) DO UPDATE SET {updates}"
    )


def _rows_of(table: _Table, by: str, param: str) -> str:
    return f"ARRAY(SELECT ROW({', '.join(columns(table.row_type))}) FROM {table.name} WHERE {by} = ANY({param}))"


_EVENT_TYPES: Final = ("uuid", "uuid", "text", "text", "int", "int", _TS, "text", "text", "int", "bigint", "jsonb")
_EVENT_COLUMNS: Final = (
    "event_id, job_id, fingerprint, type, schema_version, attempt, occurred_at, producer,"
    " topic, kafka_partition, kafka_offset, payload"
)


def _write_sql() -> str:
    """The batch's one write: numbered parameters in the order :func:`_write_args` gives them."""
    n = 1
    clauses: list[str] = []

    def take(count: int) -> int:
        nonlocal n
        n += count
        return n - count

    first = take(len(_EVENT_TYPES))
    clauses.append(
        f"new_events AS (INSERT INTO job_events ({_EVENT_COLUMNS})"
        f" SELECT * FROM unnest({_placeholders(_EVENT_TYPES, first)}) ON CONFLICT (event_id) DO NOTHING)"
    )
    clauses.append(f"jobs_up AS ({_upsert(_JOBS, take(len(_JOBS.types)))})")
    job, index = take(1), take(1)
    clauses.append(
        f"segments_gone AS (DELETE FROM segments USING unnest(${job}::uuid[], ${index}::int[])"
        " AS doomed(job_id, segment_index)"
        " WHERE segments.job_id = doomed.job_id AND segments.segment_index = doomed.segment_index)"
    )
    clauses.append(f"segments_up AS ({_upsert(_SEGMENTS, take(len(_SEGMENTS.types)))})")
    clauses.append(f"cache_gone AS (DELETE FROM result_cache WHERE fingerprint = ANY(${take(1)}::text[]))")
    clauses.append(f"cache_up AS ({_upsert(_CACHE, take(len(_CACHE.types)))})")
    consumer, topics, partitions, offsets = take(1), take(1), take(1), take(1)
    clauses.append(
        "offsets_up AS (INSERT INTO projection_offsets (consumer, topic, partition, next_offset, updated_at)"
        f" SELECT ${consumer}, *, now() FROM unnest(${topics}::text[], ${partitions}::int[], ${offsets}::bigint[])"
        " ON CONFLICT (consumer, topic, partition)"
        " DO UPDATE SET next_offset = EXCLUDED.next_offset, updated_at = now())"
    )
    channel, payloads = take(1), take(1)
    # Delivered at the statement's commit, with everything it wrote.
    return (
        f"WITH {', '.join(clauses)}"
        f" SELECT count(pg_notify(${channel}, payload)) FROM unnest(${payloads}::text[]) AS payload"
    )


# Built once: a batch reuses asyncpg's prepared statement for each.
_READ: Final = (
    "SELECT ARRAY(SELECT event_id FROM job_events WHERE event_id = ANY($1::uuid[])),"
    f" {_rows_of(_JOBS, 'job_id', '$2::uuid[]')},"
    f" {_rows_of(_SEGMENTS, 'job_id', '$2::uuid[]')},"
    f" {_rows_of(_CACHE, 'fingerprint', '$3::text[]')}"
)
_WRITE: Final = _write_sql()


def _arrays(rows: Sequence[object], width: int) -> list[list[object]]:
    """Rows as one list per column, the shape ``unnest`` takes (``width`` empty lists for no rows)."""
    if not rows:
        return [[] for _ in range(width)]
    return [list(column) for column in zip(*(as_record(row) for row in rows), strict=True)]


@dataclass(frozen=True)
class Offsets:
    """Where the projector stands after a batch: written by the batch's own statement."""

    consumer: str
    next_offsets: Mapping[tuple[str, int], int]  # (topic, partition) -> the next offset to read


@dataclass
class _Changes:
    events: list[EventRow] = field(default_factory=list)
    jobs: list[JobRow] = field(default_factory=list)
    doomed: list[tuple[uuid.UUID, int]] = field(default_factory=list)
    segments: list[SegmentRow] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    cache: list[CacheRow] = field(default_factory=list)


def _write_args(changes: _Changes, offsets: Offsets | None, channel: str | None, changed: list[uuid.UUID]) -> list[Any]:
    positions = list(offsets.next_offsets.items()) if offsets is not None else []
    return [
        *_arrays(changes.events, len(_EVENT_TYPES)),
        *_arrays(changes.jobs, len(_JOBS.types)),
        [key[0] for key in changes.doomed],
        [key[1] for key in changes.doomed],
        *_arrays(changes.segments, len(_SEGMENTS.types)),
        changes.evicted,
        *_arrays(changes.cache, len(_CACHE.types)),
        offsets.consumer if offsets is not None else "",
        [tp[0] for tp, _ in positions],
        [tp[1] for tp, _ in positions],
        [offset for _, offset in positions],
        channel or "",
        notify_payloads(changed) if channel else [],
    ]


async def _fold(
    conn: asyncpg.Connection, events: Sequence[tuple[JobEvent, RecordPosition]], cache_ttl: timedelta
) -> tuple[list[tuple[JobEvent, Outcome]], _Changes]:
    """Read what the batch builds on (one statement) and fold its new events onto it in memory."""
    first: dict[uuid.UUID, int] = {}  # event id -> its first position in the batch
    for i, (event, _) in enumerate(events):
        first.setdefault(event.event_id, i)
    known, jobs, segments, cache = await conn.fetchrow(
        _READ,
        list(first),
        list({event.job_id for event, _ in events}),
        list({event.fingerprint for event, _ in events}),
    )
    new = set(first) - set(known)
    changes = _Changes(events=[event_row(*events[i]) for event_id, i in first.items() if event_id in new])
    if not new:
        return [(event, Outcome.DUPLICATE) for event, _ in events], changes

    fold = Projection(cache_ttl)  # seeded with the rows the new events build on
    for values in jobs:
        row = JobRow(*values)
        fold.jobs[row.job_id] = row
    for values in segments:
        segment = SegmentRow(*values)
        fold.segments.setdefault(segment.job_id, {})[segment.segment_index] = segment
    for values in cache:
        entry = CacheRow(*values)
        fold.cache[entry.fingerprint] = entry
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

    after_segments = {(s.job_id, s.segment_index): s for s in fold.all_segments()}
    changes.jobs = [row for job_id, row in fold.jobs.items() if before_jobs.get(job_id) != as_record(row)]
    changes.doomed = [key for key in before_segments if key not in after_segments]
    changes.segments = [s for key, s in after_segments.items() if before_segments.get(key) != as_record(s)]
    changes.cache = [row for fp, row in fold.cache.items() if before_cache.get(fp) != as_record(row)]
    changes.evicted = [fp for fp in before_cache if fp not in fold.cache]
    return outcomes, changes


async def apply_job_events(
    conn: asyncpg.Connection,
    events: Sequence[tuple[JobEvent, RecordPosition]],
    cache_ttl: timedelta,
    offsets: Offsets | None = None,
    changes_channel: str | None = None,
) -> list[tuple[JobEvent, Outcome]]:
    """Apply ``events`` (in log order) in two statements; what became of each, in the same order.

    With ``offsets``, the write also moves the projector past the batch, and with ``changes_channel`` it
    NOTIFYs the jobs whose rows changed: both land with the batch or not at all. Outside a transaction
    the write commits on its own; inside one (a batch with node events), with it.
    """
    if not events and offsets is None:
        return []
    outcomes, changes = await _fold(conn, events, cache_ttl) if events else ([], _Changes())
    changed = [event.job_id for event, outcome in outcomes if outcome is Outcome.APPLIED]
    await conn.fetchval(_WRITE, *_write_args(changes, offsets, changes_channel, changed))
    return outcomes
