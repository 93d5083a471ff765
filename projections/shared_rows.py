"""Rows that events of several partitions may change, written only if still the version a batch read.

Projector shards (projections.shards) apply different partitions at the same
time, each batch reading its rows in one statement and writing them in
another. A job's rows are its partition's, but a ``result_cache`` row (by
fingerprint) may be changed by jobs in two partitions: a fingerprint's
placement can expire between two of its jobs, or PostgreSQL be down when the
second is placed. So a table marked ``shared`` is read with each row's
version (its ``xmin``: the transaction that wrote it), and the batch's write
changes a row of it only where the row is still at the version the batch
read (absent, for a row the batch found none of): a conflicting upsert and
a delete check it at the row's newest version, under its lock. A row
changed meanwhile leaves the write short, and ``projector_fence`` rolls the
whole statement back (:class:`projections.errors.SharedRowChanged`); the
projector applies the batch again, from a fresh read, which folds the other
shard's row as the log's order would.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from projections.rows import Table

SHARED_ROW_CHANGED_SQLSTATE = "VXC01"  # raised by projector_fence (migration 0014)
VERSION = "xmin::text"
"""A row's version, read beside its columns."""

Versions = dict[Table, dict[Any, str]]
"""Per shared table, the version of each row a batch read, by key."""


def _read_version(table: Table, take: Any) -> str:
    """The version the batch read of the row ``EXCLUDED`` or the table's row names (NULL: none was read)."""
    (key,) = table.key
    keys, versions = take(f"{table.type_of(key)}[]"), take("text[]")
    return f"(SELECT read.v FROM unnest({keys}, {versions}) AS read(k, v) WHERE read.k = {{row}}.{key})"


def upsert_guard(table: Table, take: Any) -> str:
    """The end of an upsert of ``table``: a row that exists now is replaced only at the version read."""
    read = _read_version(table, take).format(row="EXCLUDED")
    return f" WHERE {table.name}.{VERSION} IS NOT DISTINCT FROM {read} RETURNING 1"


def delete_guard(table: Table, take: Any) -> str:
    """The end of a delete from ``table``: a row goes only at the version read."""
    read = _read_version(table, take).format(row=table.name)
    return f" AND {table.name}.{VERSION} = {read} RETURNING 1"


def guard_args(table: Table, versions: Versions) -> list[list[Any]]:
    """The parameters of a guard of ``table``: every key read, and its version."""
    read: Mapping[Any, str] = versions.get(table, {})
    return [list(read), list(read.values())]
