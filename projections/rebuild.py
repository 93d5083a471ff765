"""Writing a rebuilt projection into a schema, and comparing two schemas row by row.

A rebuilt projection (:class:`projections.reducer.Projection`) is copied in
whole with ``COPY`` (one per table of :data:`projections.rows.TABLES`), not
one statement per event. Two schemas
are compared table by table on every column the log determines; the columns
that record when or by whom a row was written, not what the log says, are
left out and named (:data:`NOT_FROM_THE_LOG`).
"""

from __future__ import annotations

import functools
import io
import itertools
import json
import operator
import re
import types
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Final, get_args, get_type_hints

import asyncpg

from projections.migrations import quote_schema
from projections.reducer import Projection
from projections.rows import TABLES, Table, array_literal, columns


@dataclass(frozen=True)
class OffsetRow:
    consumer: str
    topic: str
    partition: int
    next_offset: int


NOT_FROM_THE_LOG: Final = {
    "job_events.recorded_at": "when the projector wrote the row",
    "projection_offsets.consumer": "the name of the projector that wrote the offsets",
    "projection_offsets.updated_at": "when the projector wrote the offsets",
    "projection_offsets.generation": "how many times a projector took the partition over (projections.shards)",
}


async def write(
    conn: asyncpg.Connection, schema: str, projection: Projection, consumer: str, *, events_written: bool = False
) -> None:
    """Copy ``projection`` into ``schema``'s (empty, migrated) tables, in one transaction
    (``events_written``: ``job_events`` is filled already, by a streaming copy).

    The rows go as ``COPY``'s text format, written here with plain string formatting: encoding each
    value through the driver cost more than folding the event. They go in chunks, so that the server
    parses one (on another core) while the next is written.
    """
    offsets = [OffsetRow(consumer, topic, partition, at) for (topic, partition), at in projection.offsets.items()]
    async with conn.transaction():
        for table in TABLES:
            if events_written and table.name == "job_events":
                continue
            await conn.copy_to_table(
                table.name,
                source=copy_chunks(projection.rows(table.name), table.row_type),
                schema_name=schema,
                columns=columns(table.row_type),
            )
        await conn.copy_to_table(
            "projection_offsets",
            source=io.BytesIO(copy_text(offsets, OffsetRow)),
            schema_name=schema,
            columns=columns(OffsetRow),
        )


_ESCAPES: Final = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_SPECIAL: Final = re.compile(r"[\\\t\n\r]")


def _text(value: str) -> str:
    return value.translate(_ESCAPES) if _SPECIAL.search(value) else value


def _array(values: list[str]) -> str:
    return _text(array_literal(values))


_CONVERTERS: Final[dict[object, Callable[[Any], str]]] = {
    bool: lambda v: "t" if v else "f",
    int: str,
    float: repr,
    str: _text,
    uuid.UUID: str,
    datetime: datetime.isoformat,
    date: date.isoformat,
    list[str]: _array,
}


def _converter(hint: object) -> Callable[[Any], str]:
    """The function that writes one column's values in ``COPY``'s text format, chosen once by its type."""
    members = get_args(hint) if isinstance(hint, types.UnionType) else ()
    if type(None) not in members:
        return _CONVERTERS[hint]
    (inner,) = (m for m in members if m is not type(None))
    convert = _CONVERTERS[inner]
    return lambda v: "\\N" if v is None else convert(v)


@functools.cache
def _line_writer(row_type: type) -> Callable[[object], str]:
    hints = get_type_hints(row_type)
    convert = tuple(_converter(hints[name]) for name in columns(row_type))
    values = operator.attrgetter(*columns(row_type))
    return lambda row: "\t".join([c(v) for c, v in zip(convert, values(row), strict=True)])


def copy_text(rows: Iterable[object], row_type: type) -> bytes:
    """Rows of a row dataclass in ``COPY``'s text format.

    Each column's writer is chosen once from its declared type, not value by value: writing the rows
    is most of a replay's work once the events are folded.
    """
    return "".join(line + "\n" for line in map(_line_writer(row_type), rows)).encode()


async def copy_chunks(rows: Iterable[object], row_type: type, per_chunk: int = 2000) -> AsyncIterator[bytes]:
    """``rows`` as ``COPY`` text, ``per_chunk`` rows at a time."""
    remaining = iter(rows)
    while chunk := list(itertools.islice(remaining, per_chunk)):
        yield copy_text(chunk, row_type)


@dataclass(frozen=True)
class Difference:
    table: str
    key: str
    what: str  # "only in live", "only in rebuilt", or the columns that differ

    def line(self) -> str:
        return f"{self.table} {self.key}: {self.what}"


async def compare(
    conn: asyncpg.Connection,
    live: str,
    rebuilt: str,
    consumers: tuple[str, str],
    limit: int = 1000,
    rebuilt_conn: asyncpg.Connection | None = None,
) -> list[Difference]:
    """Every difference between ``live`` and ``rebuilt`` in the projected tables (up to ``limit``).

    ``conn`` reads the live schema (a snapshot transaction, when the projector is still writing);
    ``rebuilt_conn``, when given, reads the rebuilt one.
    """
    other = rebuilt_conn or conn
    differences: list[Difference] = []
    for table in TABLES:
        names = columns(table.row_type)
        left = await _rows(conn, live, table, names)
        right = await _rows(other, rebuilt, table, names)
        differences += _differ(table.name, left, right)
    offsets = "SELECT topic, partition, next_offset FROM {}.projection_offsets WHERE consumer = $1"
    left_offsets = {(r[0], r[1]): r[2] for r in await conn.fetch(offsets.format(quote_schema(live)), consumers[0])}
    right_offsets = {(r[0], r[1]): r[2] for r in await other.fetch(offsets.format(quote_schema(rebuilt)), consumers[1])}
    # No row and a row at offset 0 say the same: nothing of the partition applied (a projector writes the row
    # when it takes the partition over, before it applies anything; a replay, only once it folded a record).
    for key in sorted(left_offsets.keys() | right_offsets.keys()):
        if left_offsets.get(key, 0) != right_offsets.get(key, 0):
            what = f"next offset {left_offsets.get(key)} live, {right_offsets.get(key)} rebuilt"
            differences.append(Difference("projection_offsets", f"{key[0]}[{key[1]}]", what))
    return differences[:limit]


async def _rows(
    conn: asyncpg.Connection, schema: str, table: Table, names: list[str]
) -> dict[tuple[object, ...], dict[str, object]]:
    listed = ", ".join(names)
    found = {}
    for record in await conn.fetch(f"SELECT {listed} FROM {quote_schema(schema)}.{table.name}"):
        row = dict(record)
        for column in table.json_columns:  # jsonb: compare values, not spellings
            row[column] = json.loads(row[column]) if isinstance(row[column], str) else row[column]
        found[tuple(row[k] for k in table.key)] = row
    return found


def _differ(
    table: str, live: dict[tuple[object, ...], dict[str, object]], rebuilt: dict[tuple[object, ...], dict[str, object]]
) -> list[Difference]:
    out = []
    for key in live.keys() - rebuilt.keys():
        out.append(Difference(table, _key(key), "only in live"))
    for key in rebuilt.keys() - live.keys():
        out.append(Difference(table, _key(key), "only in rebuilt"))
    for key in live.keys() & rebuilt.keys():
        changed = [column for column, value in live[key].items() if rebuilt[key][column] != value]
        if changed:
            detail = ", ".join(f"{c}: {live[key][c]!r} live, {rebuilt[key][c]!r} rebuilt" for c in changed)
            out.append(Difference(table, _key(key), detail))
    return sorted(out, key=lambda d: (d.table, d.key))


def _key(key: tuple[object, ...]) -> str:
    return "/".join(map(str, key))
