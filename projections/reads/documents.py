"""Reads of a document's projection: its row in ``documents`` and its parts' rows in ``jobs``.

A part's job id derives from the document id and its index
(:func:`contracts.document_part_job_id`), so the parts are read by id, not
through a table of their own.
"""

from __future__ import annotations

import uuid
from typing import Final

import asyncpg

from contracts import document_part_job_id
from foundation.db import reading
from projections.errors import ProjectionUnavailable
from projections.reads.jobs import QUERY_TIMEOUT_S
from projections.reads.rows import DocumentRow, PartRow, StoredSegment, columns

_PART_COLUMNS: Final = columns(PartRow, but=PartRow._computed) + ", char_length(request->>'text') AS chars"


def part_job_ids(document_id: uuid.UUID, count: int) -> list[uuid.UUID]:
    return [document_part_job_id(document_id, index) for index in range(count)]


class DocumentReader:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def document(self, document_id: uuid.UUID, tenant: str | None = None) -> DocumentRow | None:
        """The document (``tenant``'s only, when given: another tenant's is unknown)."""
        async with reading(f"document {document_id}", ProjectionUnavailable):
            row = await self._pool.fetchrow(
                f"SELECT {columns(DocumentRow)} FROM documents WHERE document_id = $1"
                " AND ($2::text IS NULL OR tenant = $2)",
                document_id,
                tenant,
                timeout=QUERY_TIMEOUT_S,
            )
        return None if row is None else DocumentRow.from_mapping(row)

    async def document_by_key(self, key: str) -> uuid.UUID | None:
        async with reading("a document's idempotency key", ProjectionUnavailable):
            found: uuid.UUID | None = await self._pool.fetchval(
                "SELECT document_id FROM documents WHERE idempotency_key = $1", key, timeout=QUERY_TIMEOUT_S
            )
        return found

    async def parts(self, document_id: uuid.UUID, count: int) -> list[PartRow | None]:
        """Each part's ``jobs`` row, in reading order (``None`` for a part the projection does not show yet)."""
        ids = part_job_ids(document_id, count)
        async with reading(f"the parts of document {document_id}", ProjectionUnavailable):
            rows = await self._pool.fetch(
                f"SELECT {_PART_COLUMNS} FROM jobs WHERE job_id = ANY($1::uuid[])", ids, timeout=QUERY_TIMEOUT_S
            )
        by_id = {row["job_id"]: PartRow.from_mapping(row) for row in rows}
        return [by_id.get(job_id) for job_id in ids]

    async def segments(self, job_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[StoredSegment]]:
        """The audio segments of completed parts, in order; a cache hit's are its source job's."""
        async with reading("the parts' segments", ProjectionUnavailable):
            rows = await self._pool.fetch(
                f"SELECT j.job_id AS part, {columns(StoredSegment, prefix='s.')}"
                " FROM jobs j JOIN segments s ON s.job_id = coalesce(j.source_job_id, j.job_id)"
                " WHERE j.job_id = ANY($1::uuid[]) AND j.state = 'completed' ORDER BY j.job_id, s.segment_index",
                job_ids,
                timeout=QUERY_TIMEOUT_S,
            )
        found: dict[uuid.UUID, list[StoredSegment]] = {}
        for row in rows:
            found.setdefault(row["part"], []).append(StoredSegment.from_mapping(row))
        return found
