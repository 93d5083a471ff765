"""A batch of events applied set-based: two statements per batch, whatever its size and whichever tables it touches.

Every batch the projector applies goes this way, job events and node events
alike, and so does each record of a batch the tables refused
(:mod:`projections.projector`: a batch of one). On this machine a round
trip's loopback socket writes were the projector's largest CPU cost (half its
samples under py-spy, bench/profile_cpu.py), so a batch costs two:

1. **one read** of every row the batch's events build on
   (:func:`projections.reducer.builds_on`: the rows of their event ids in
   ``job_events``, which makes them duplicates, their jobs, the jobs'
   segments, the result cache of their fingerprints, the workers' node and
   heartbeat rows, the modes and documents they name), each table's as an
   array of rows in one ``SELECT``;
2. the events are folded onto those rows in memory, in log order, by
   :class:`projections.reducer.Projection`, the one definition of what an
   event does to the tables;
3. **one write**: a single statement of data-modifying ``WITH`` clauses
   upserts every row the fold changed and deletes every row it dropped, in
   every table, moves the projector's offsets past the batch and NOTIFYs the
   changed jobs. One statement is one transaction: it lands whole or not at
   all, so no ``BEGIN``/``COMMIT`` round trips are needed. Each table's rows
   travel as one JSON array of rows (serialized in Rust, each value cast to its
   column's type by the statement): an array parameter per column cost asyncpg
   an abstract-class check for every value and PostgreSQL a parse of every
   array, twice the client's CPU and the statement's time for a batch's rows.

Both statements are built from the table descriptions
(:data:`projections.rows.TABLES`), with a clause only for each table the batch
reads or changes, so a batch's work follows what it touches; each shape is
built once, and asyncpg prepares it once per connection.

Each partition has one projector at a time (projections.shards), which
applies one batch at a time, and a record's rows are its partition's (a job's
events share its partition; a node event's key names its row), so the rows
read in step 1 are the rows the fold may build on, and nothing changes between
the read and the write. A projector that lost a partition meanwhile is refused
in step 3 (:class:`projections.errors.Fenced`): the statement moves the
offsets only where the partition's generation is still the one its projector
was given. A batch the tables refuse (a constraint, a value PostgreSQL cannot
store) raises and writes nothing.
"""

from __future__ import annotations

import functools
import operator
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, cast

import asyncpg
from pydantic_core import to_json

from contracts import JobEvent, NodeEvent
from foundation.job_changes import notify_payloads
from foundation.kafka import RecordPosition
from projections.errors import Fenced, SharedRowChanged
from projections.reducer import Outcome, Projection, builds_on, is_node_event
from projections.rows import TABLES, Table, record_of
from projections.shared_rows import (
    SHARED_ROW_CHANGED_SQLSTATE,
    VERSION,
    Versions,
    delete_guard,
    guard_args,
    upsert_guard,
)

_Event = JobEvent | NodeEvent
FENCED_SQLSTATE = "VXF01"  # raised by projector_fence (migration 0014)


@dataclass(frozen=True)
class Offsets:
    """Where the projector stands after a batch: written by the batch's own statement."""

    consumer: str
    next_offsets: Mapping[tuple[str, int], int]  # (topic, partition) -> the next offset to read
    generations: Mapping[tuple[str, int], int] = field(default_factory=dict)
    """(topic, partition) -> the generation its projector was given it at (projections.shards); 0: never
    taken over, which any takeover fences off."""


class _Params:
    """Numbered parameters, in the order a statement's arguments are given."""

    def __init__(self) -> None:
        self.count = 0

    def take(self, sql_type: str) -> str:
        self.count += 1
        return f"${self.count}::{sql_type}"

    def array(self, sql_type: str) -> str:
        """An array parameter of ``sql_type`` values (an array column's values travel as array literals)."""
        return self.take(f"{_passed_as(sql_type)}[]")


def _passed_as(sql_type: str) -> str:
    # unnest flattens an array of arrays: an array column's values go as their text and are cast back.
    return "text" if sql_type.endswith("[]") else sql_type


@functools.cache
def _read_sql(tables: tuple[Table, ...]) -> str:
    """The batch's one read: each table's rows the batch looks up, as an array of rows."""
    params = _Params()
    arrays = []
    for table in tables:
        lookup = table.lookup
        if len(lookup) == 1:
            (column,) = lookup
            where = f"{column} = ANY({params.array(table.type_of(column))})"
        else:
            wanted = ", ".join(params.array(table.type_of(column)) for column in lookup)
            where = f"({', '.join(lookup)}) IN (SELECT * FROM unnest({wanted}))"
        read = ", ".join((*table.columns, VERSION) if table.shared else table.columns)
        arrays.append(f"ARRAY(SELECT ROW({read}) FROM {table.name} WHERE {where})")
    return f"SELECT {', '.join(arrays)}"


def _deletes(table: Table, params: _Params) -> str:
    gone = ", ".join(params.array(table.type_of(column)) for column in table.key)
    matches = " AND ".join(f"{table.name}.{column} = gone.{column}" for column in table.key)
    guard = delete_guard(table, params.take) if table.shared else ""
    return f"DELETE FROM {table.name} USING unnest({gone}) AS gone({', '.join(table.key)}) WHERE {matches}{guard}"


def _from_json(index: int, sql_type: str) -> str:
    """Column ``index`` of a row that travels as a JSON array, as its SQL type."""
    if sql_type.endswith("[]"):
        return f"ARRAY(SELECT jsonb_array_elements_text(new->{index}))::{sql_type}"
    return f"(new->>{index})::{sql_type}"


def _upserts(table: Table, params: _Params) -> str:
    names = ", ".join(table.columns)
    rows = params.take("jsonb")  # an array of rows, each an array of its values in column order
    values = ", ".join(_from_json(i, sql_type) for i, sql_type in enumerate(table.types))
    kept = (column for column in table.columns if column not in table.key)
    if table.counters:  # the batch's counts add to the stored ones
        updates = ", ".join(f"{column} = {table.name}.{column} + EXCLUDED.{column}" for column in kept)
    else:
        updates = ", ".join(f"{column} = EXCLUDED.{column}" for column in kept)
    return (
        f"INSERT INTO {table.name} ({names}) SELECT {values} FROM jsonb_array_elements({rows}) AS new"
        f" ON CONFLICT ({', '.join(table.key)}) DO UPDATE SET {updates}"
        + (upsert_guard(table, params.take) if table.shared else "")
    )


def _past_the_batch(params: _Params) -> str:
    """The clause that moves the projector's offsets past the batch, in the batch's own statement: the one
    place the projector's position is written. Only where the partition's generation is still the one the
    projector took it over at (projections.shards): the row is locked and checked at its newest version, so a
    takeover that committed meanwhile, even after this statement began, fences the batch off."""
    consumer, topics = params.take("text"), params.array("text")
    partitions, offsets, generations = params.array("integer"), params.array("bigint"), params.array("bigint")
    return (
        "INSERT INTO projection_offsets (consumer, topic, partition, next_offset, generation, updated_at)"
        f" SELECT {consumer}, *, now() FROM unnest({topics}, {partitions}, {offsets}, {generations})"
        " ON CONFLICT (consumer, topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset, updated_at = now()"
        " WHERE projection_offsets.generation = EXCLUDED.generation RETURNING 1"
    )


_Shape = tuple[tuple[Table, str], ...]  # (table, "gone" or "up"), in the order of the statement's clauses


@functools.cache
def _write_sql(shape: _Shape) -> str:
    """The batch's one write: numbered parameters in the order :func:`_write_args` gives them."""
    params = _Params()
    clauses = [
        f"{table.name}_{what} AS ({_deletes(table, params) if what == 'gone' else _upserts(table, params)})"
        for table, what in shape
    ]
    clauses.append(f"offsets_up AS ({_past_the_batch(params)})")
    partitions, changes = params.take("integer"), params.take("integer")
    channel, payloads = params.take("text"), params.array("text")
    # The fence raises (and the whole statement rolls back) unless every partition's offsets moved and every
    # shared row changed at the version read. The notifications are delivered at the statement's commit, with
    # everything it wrote.
    shared = " + ".join(f"(SELECT count(*) FROM {table.name}_{what})" for table, what in shape if table.shared)
    fence = f"projector_fence({partitions}, (SELECT count(*) FROM offsets_up), {changes}, {shared or 0})"
    notified = f"(SELECT count(pg_notify({channel}, payload)) FROM unnest({payloads}) AS payload)"
    return f"WITH {', '.join(clauses)} SELECT {fence}, {notified}"


@functools.cache
def _getters(table: Table) -> tuple[Callable[[object], tuple[object, ...]], Callable[[tuple[object, ...]], Any]]:
    """A row's record, and a record's key (a value for a key of one column, else a tuple); both in C, since
    a batch asks them of every row it holds."""
    indices = [table.columns.index(column) for column in table.key]
    return record_of(table.row_type), operator.itemgetter(*indices)


@dataclass
class _Changes:
    """What a batch's fold changed: per table, the records to upsert and the keys to delete."""

    upserts: dict[Table, list[tuple[object, ...]]]
    deletes: dict[Table, list[Any]]  # keys, as _getters gives them


_Stored = dict[Table, dict[Any, tuple[object, ...]]]


def _stored(projection: Projection) -> _Stored:
    """Every row the projection holds, as records by key."""
    found: _Stored = {}
    for table in TABLES:
        record, key_of = _getters(table)
        records = list(map(record, projection.rows(table.name)))
        found[table] = dict(zip(map(key_of, records), records, strict=True))
    return found


def _changes(before: _Stored, after: Projection) -> _Changes:
    changes = _Changes({}, {})
    for table, now in _stored(after).items():
        was = before[table]
        if upserts := [record for key, record in now.items() if was.get(key) != record]:
            changes.upserts[table] = upserts
        if deletes := [key for key in was if key not in now]:
            changes.deletes[table] = deletes
    return changes


def _write_args(
    shape: _Shape,
    changes: _Changes,
    versions: Versions,
    offsets: Offsets | None,
    channel: str | None,
    changed: list[uuid.UUID],
) -> list[Any]:
    args: list[Any] = []
    shared_changes = 0
    for table, what in shape:
        if what == "gone":
            keys = changes.deletes[table]
            args += [keys] if len(table.key) == 1 else [list(column) for column in zip(*keys, strict=True)]
        else:
            args.append(to_json(changes.upserts[table], inf_nan_mode="strings").decode())
        if table.shared:
            args += guard_args(table, versions)
            shared_changes += len(changes.deletes[table] if what == "gone" else changes.upserts[table])
    positions = list(offsets.next_offsets.items()) if offsets is not None else []
    return [
        *args,
        offsets.consumer if offsets is not None else "",
        [tp[0] for tp, _ in positions],
        [tp[1] for tp, _ in positions],
        [offset for _, offset in positions],
        [offsets.generations.get(tp, 0) for tp, _ in positions] if offsets is not None else [],
        len(positions),
        shared_changes,
        channel or "",
        notify_payloads(changed) if channel else [],
    ]


async def _seed(
    conn: asyncpg.Connection, projection: Projection, events: Sequence[tuple[_Event, RecordPosition]]
) -> Versions:
    """Read every row the events build on (one statement) into ``projection``; the versions of the shared
    tables' rows read."""
    wanted: dict[str, dict[object, None]] = {table.name: {} for table in TABLES}
    for event, _ in events:
        for table_name, value in builds_on(event):
            wanted[table_name][value] = None
    tables = tuple(table for table in TABLES if wanted[table.name])
    args: list[list[object]] = []
    for table in tables:
        values = list(wanted[table.name])
        args += [values] if len(table.lookup) == 1 else [list(column) for column in zip(*values, strict=True)]
    found = await conn.fetchrow(_read_sql(tables), *args)
    versions: Versions = {}
    for table, rows in zip(tables, found, strict=True):
        for values in rows:
            if table.shared:  # its version last
                versions.setdefault(table, {})[values[table.columns.index(table.key[0])]] = values[-1]
                values = values[:-1]
            projection.keep(table.row_type(*values))
    return versions


async def apply_events(
    conn: asyncpg.Connection,
    events: Sequence[tuple[_Event, RecordPosition]],
    cache_ttl: timedelta,
    offsets: Offsets | None = None,
    changes_channel: str | None = None,
    before_write: Callable[[], Awaitable[None]] | None = None,
) -> list[tuple[JobEvent, Outcome]]:
    """Apply ``events`` (in log order) in two statements; what became of each job event, in the same order.

    With ``offsets``, the write also moves the projector past the batch, and with ``changes_channel`` it
    NOTIFYs the jobs whose rows changed: both land with the batch or not at all; ``before_write`` is awaited
    between the read and the write (a test's hold on a projector).
    """
    if not events and offsets is None:
        return []
    projection = Projection(cache_ttl)
    versions = await _seed(conn, projection, events) if events else {}
    before = _stored(projection)
    outcomes: list[tuple[JobEvent, Outcome]] = []
    for event, at in events:
        if is_node_event(event):
            projection.apply_node(event, at)
        else:
            job = cast("JobEvent", event)
            outcomes.append((job, projection.apply(job, at)))
    changes = _changes(before, projection)
    shape = tuple(
        (table, what)
        for table in TABLES
        for what, rows in (("gone", changes.deletes), ("up", changes.upserts))
        if table in rows
    )
    changed = [event.job_id for event, outcome in outcomes if outcome is Outcome.APPLIED]
    if before_write is not None:
        await before_write()
    try:
        await conn.fetchval(
            _write_sql(shape), *_write_args(shape, changes, versions, offsets, changes_channel, changed)
        )
    except asyncpg.PostgresError as exc:
        if exc.sqlstate == FENCED_SQLSTATE and offsets is not None:
            raise Fenced(offsets.consumer, sorted(offsets.next_offsets), str(exc)) from exc
        if exc.sqlstate == SHARED_ROW_CHANGED_SQLSTATE:
            raise SharedRowChanged(str(exc)) from exc
        raise
    return outcomes
