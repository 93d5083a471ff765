"""A document's audio (whole, or per chapter), its table of contents, and its cancellation."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Sequence
from typing import Final

from litestar import Response, delete, get
from litestar.exceptions import HTTPException, NotFoundException
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath
from litestar.response import Stream

from contracts import Producer, document_part_job_id
from contracts.job_state import LIVE_STATES
from foundation.audio_formats import media_type
from foundation.blobs import BlobStore
from producers.api_keys import Principal
from producers.auth import READ, SUBMIT
from producers.cancel import cancellation
from producers.deps import Injected
from producers.document_audio import ChapterSpan, chapter_spans, stitched
from producers.documents import document_and_parts
from producers.http_errors import responses
from producers.openapi_docs import StitchedOperation
from producers.ports import JobChangeFeed, JobLog
from producers.stream_guard import closed_at_end
from producers.views import DocumentCancelView, TocChapterView, TocView
from projections.reads.documents import DocumentReader, part_job_ids
from projections.reads.jobs import ProjectionReader
from projections.reads.rows import DocumentRow, PartRow, StoredSegment

CANCEL_VISIBLE_WITHIN_S: Final = 5.0  # then 202 with "visible": false; the cancellation still holds


async def layout(
    documents: DocumentReader, document_id: uuid.UUID, principal: Principal, chapter: int | None = None
) -> tuple[DocumentRow, list[ChapterSpan], dict[int, list[StoredSegment]]]:
    """The document, its chapters' places in the audio, and the completed parts' segments (by part index).
    409 when the parts asked for (one chapter's, or all) are not all completed."""
    document, parts, wanted = await completed(documents, document_id, principal, chapter)
    return (document, *await laid_out(documents, document_id, document, len(parts), wanted))


async def completed(
    documents: DocumentReader, document_id: uuid.UUID, principal: Principal, chapter: int | None = None
) -> tuple[DocumentRow, list[PartRow | None], Sequence[int]]:
    """The document (the principal's tenant's), its parts, and the indexes of those asked for (one chapter's,
    or all), once they are all completed (else 409): what is checked before any segment is read."""
    document, parts = await document_and_parts(documents, document_id, principal)
    if chapter is not None and not 0 <= chapter < len(document.chapters):
        raise NotFoundException(f"document {document_id} has chapters 0 to {len(document.chapters) - 1}")
    wanted = document.chapter_parts(chapter) if chapter is not None else range(len(parts))
    pending = [i for i in wanted if (part := parts[i]) is None or not part.done]
    if pending:
        what = f"chapter {chapter}" if chapter is not None else "the document"
        raise HTTPException(
            detail=f"{what} has {len(pending)} of {len(wanted)} parts not completed yet (GET /v1/documents/"
            f"{document_id} shows the progress)",
            status_code=409,
        )
    return document, parts, wanted


async def laid_out(
    documents: DocumentReader, document_id: uuid.UUID, document: DocumentRow, part_count: int, wanted: Sequence[int]
) -> tuple[list[ChapterSpan], dict[int, list[StoredSegment]]]:
    """The chapters' places in the audio, and the ``wanted`` parts' segments (by part index)."""
    ids = part_job_ids(document_id, part_count)
    by_job = await documents.segments([ids[i] for i in wanted])
    segments = {i: by_job.get(ids[i], []) for i in range(part_count) if ids[i] in by_job}
    return chapter_spans(document.chapters, document.breaks, segments), segments


def stitched_parts(
    document: DocumentRow, spans: Sequence[ChapterSpan], segments: dict[int, list[StoredSegment]]
) -> list[tuple[list[StoredSegment], str]]:
    """The parts of ``spans``' chapters in reading order: each one's segments and the break after it."""
    return [
        (segments.get(p, []), document.breaks[p]) for s in spans for p in range(s.first_part, s.first_part + s.parts)
    ]


def _stream(
    blobs: BlobStore,
    document: DocumentRow,
    spans: Sequence[ChapterSpan],
    segments: dict[int, list[StoredSegment]],
    name: str,
) -> Stream:
    fmt, rate = document.request.format, document.request.sample_rate
    start = spans[0].start_ms
    chapters = [(s.start_ms - start, s.start_ms - start + s.duration_ms, s.title) for s in spans]
    parts = stitched_parts(document, spans, segments)
    extension = "raw" if fmt == "pcm" else fmt
    return Stream(
        closed_at_end(stitched(blobs, parts, fmt, rate, chapters)),
        media_type=media_type(fmt, rate),
        headers={"Content-Disposition": f'attachment; filename="{name}.{extension}"'},
    )


@get(
    "/v1/documents/{document_id:uuid}/audio",
    summary="The whole document as one file, chapters marked",
    guards=READ,
    operation_class=StitchedOperation,
    responses=responses(401, 403, 404, 409, 503),
)
async def get_document_audio(
    document_id: FromPath[uuid.UUID],
    documents: Injected[DocumentReader],
    blobs: Injected[BlobStore],
    principal: Injected[Principal],
) -> Stream:
    document, spans, segments = await layout(documents, document_id, principal)
    return _stream(blobs, document, spans, segments, str(document_id))


@get(
    "/v1/documents/{document_id:uuid}/chapters/{index:int}/audio",
    summary="One chapter as one file",
    guards=READ,
    operation_class=StitchedOperation,
    responses=responses(401, 403, 404, 409, 503),
)
async def get_chapter_audio(
    document_id: FromPath[uuid.UUID],
    index: FromPath[int],
    documents: Injected[DocumentReader],
    blobs: Injected[BlobStore],
    principal: Injected[Principal],
) -> Stream:
    document, spans, segments = await layout(documents, document_id, principal, index)
    return _stream(blobs, document, [spans[index]], segments, f"{document_id}-{index:03d}")


@get(
    "/v1/documents/{document_id:uuid}/toc",
    summary="The table of contents: each chapter's start and length",
    guards=READ,
    responses=responses(401, 403, 404, 409, 503),
)
async def get_toc(
    document_id: FromPath[uuid.UUID], documents: Injected[DocumentReader], principal: Injected[Principal]
) -> TocView:
    """Times are those of GET .../audio (the whole document); 409 until every part is completed."""
    document, spans, _ = await layout(documents, document_id, principal)
    return TocView(
        document_id=document_id,
        title=document.title,
        duration_ms=sum(s.duration_ms for s in spans),
        chapters=[
            TocChapterView(
                index=s.index,
                title=s.title,
                start_ms=s.start_ms,
                duration_ms=s.duration_ms,
                parts=s.parts,
                audio=f"/v1/documents/{document_id}/chapters/{s.index}/audio",
            )
            for s in spans
        ],
    )


@delete(
    "/v1/documents/{document_id:uuid}",
    status_code=202,
    summary="Cancel a document's remaining parts",
    guards=SUBMIT,
    responses=responses(
        401, 403, 404, 503, _200=ResponseSpec(DocumentCancelView, description="Every part had ended already.")
    ),
)
async def cancel_document(
    document_id: FromPath[uuid.UUID],
    documents: Injected[DocumentReader],
    reader: Injected[ProjectionReader],
    publisher: Injected[JobLog],
    producer: Injected[Producer],
    changes: Injected[JobChangeFeed],
    principal: Injected[Principal],
) -> Response[DocumentCancelView]:
    """Every part not ended yet is cancelled (its own ``JobCancelled``); finished parts keep their audio.
    Answers once the projection shows it (``visible``), or after ``CANCEL_VISIBLE_WITHIN_S``; 200 when nothing
    was left to cancel."""
    _, parts = await document_and_parts(documents, document_id, principal)
    events = [
        cancellation(
            document_part_job_id(document_id, i),
            part.fingerprint,
            "document",
            producer,
            f"DELETE /v1/documents/{document_id}",
            document_id,
        )
        for i, part in enumerate(parts)
        if part is not None and part.state in LIVE_STATES
    ]
    partitions = await reader.partitions_of([event.job_id for event in events]) if events else {}
    await publisher.publish_all(events, [partitions.get(event.job_id) for event in events])
    ended = sum(1 for p in parts if p is not None and p.state not in LIVE_STATES)
    visible = await _cancellations_visible(documents, changes, document_id, len(parts), CANCEL_VISIBLE_WITHIN_S)
    body = DocumentCancelView(
        document_id=document_id, cancelled=len(events), ended_already=ended, parts=len(parts), visible=visible
    )
    return Response(body, status_code=202 if events else 200)


async def _cancellations_visible(
    documents: DocumentReader, changes: JobChangeFeed, document_id: uuid.UUID, count: int, within_s: float
) -> bool:
    """Wait (bounded) until the projection shows no live part: workers ask the projection before they claim
    a part, so once it shows the cancellations, no remaining part starts. It reads again when the projector
    names the first part still live (the job change feed, watched before the read), not on a timer."""
    deadline, watched = time.monotonic() + within_s, 0
    while True:
        with changes.watch(document_part_job_id(document_id, watched)) as change:
            parts = await documents.parts(document_id, count)
            live = [i for i, part in enumerate(parts) if part is None or part.state in LIVE_STATES]
            left = deadline - time.monotonic()
            if not live:
                return True
            if left <= 0:
                return False
            if live[0] == watched:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(change.wait(), left)
        watched = live[0]
