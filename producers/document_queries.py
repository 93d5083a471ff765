"""Reads of a document's projection: its row in ``documents`` and its parts' rows in ``jobs``.

A part's job id derives from the document id and its index
(:func:`contracts.document_part_job_id`), so the parts are read by id, not
through a table of their own.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Final

import asyncpg

from contracts import document_part_job_id
from foundation.db import reading
from producers.queries import QUERY_TIMEOUT_S, ProjectionUnavailable

_PART_COLUMNS: Final = (
    "job_id, fingerprint, state, attempt, total_duration_ms, segment_count, cache_hit, source_job_id, completed_at,"
    " cancel_reason, error_code, error_message, char_length(request->>'text') AS chars"
)


def part_job_ids(document_id: uuid.UUID, count: int) -> list[uuid.UUID]:
    return [document_part_job_id(document_id, index) for index in range(count)]


class DocumentReader:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def document(self, document_id: uuid.UUID) -> dict[str, Any] | None:
        async with reading(f"document {document_id}", ProjectionUnavailable):
            row = await self._pool.fetchrow(
                "SELECT * FROM documents WHERE document_id = $1", document_id, timeout=QUERY_TIMEOUT_S
            )
        if row is None:
            return None
        document = dict(row)
        document["chapters"] = json.loads(document["chapters"])
        document["request"] = json.loads(document["request"])
        return document

    async def document_by_key(self, key: str) -> uuid.UUID | None:
        async with reading("a document's idempotency key", ProjectionUnavailable):
            found: uuid.UUID | None = await self._pool.fetchval(
                "SELECT document_id FROM documents WHERE idempotency_key = $1", key, timeout=QUERY_TIMEOUT_S
            )
        return found

    async def parts(self, document_id: uuid.UUID, count: int) -> list[dict[str, Any] | None]:
        """Each part's ``jobs`` row, in reading order (``None`` for a part the projection does not show yet)."""
        ids = part_job_ids(document_id, count)
        async with reading(f"the parts of document {document_id}", ProjectionUnavailable):
            rows = await self._pool.fetch(
                f"SELECT {_PART_COLUMNS} FROM jobs WHERE job_id = ANY($1::uuid[])", ids, timeout=QUERY_TIMEOUT_S
            )
        by_id = {row["job_id"]: dict(row) for row in rows}
        return [by_id.get(job_id) for job_id in ids]

    async def segments(self, job_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[dict[str, Any]]]:
        """The audio segments of completed parts, in order; a cache hit's are its source job's."""
        async with reading("the parts' segments", ProjectionUnavailable):
            rows = await self._pool.fetch(
                "SELECT j.job_id AS part, s.segment_index, s.audio_sha256, s.audio_uri, s.duration_ms"
                " FROM jobs j JOIN segments s ON s.job_id = coalesce(j.source_job_id, j.job_id)"
                " WHERE j.job_id = ANY($1::uuid[]) AND j.state = 'completed' ORDER BY j.job_id, s.segment_index",
                job_ids,
                timeout=QUERY_TIMEOUT_S,
            )
        found: dict[uuid.UUID, list[dict[str, Any]]] = {}
        for row in rows:
            found.setdefault(row["part"], []).append(dict(row))
        return found
