"""Captions of a job, a document and a chapter, timed to the audio their audio routes serve."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Annotated

from litestar import Response, get
from litestar.exceptions import HTTPException
from litestar.params import FromPath, QueryParameter

from contracts import JobState
from producers.api_keys import Principal
from producers.auth import READ
from producers.captions import MEDIA_TYPES, CaptionFormat, Part, rendered, timeline
from producers.deps import Injected
from producers.document_output import layout, stitched_parts
from producers.document_queries import DocumentReader
from producers.http_errors import responses
from producers.job_routes import known_job
from producers.openapi_docs import CaptionsOperation
from producers.queries import ProjectionReader

Format = Annotated[
    CaptionFormat,
    QueryParameter(name="format", description="srt, vtt (WebVTT), or json (every word, and the cues)"),
]


def _answer(parts: Sequence[Part], fmt: CaptionFormat, name: str) -> Response[bytes]:
    words, duration_ms = timeline(parts)
    extension = "json" if fmt == "json" else fmt
    return Response(
        rendered(words, duration_ms, fmt),
        media_type=MEDIA_TYPES[fmt],
        headers={"Content-Disposition": f'inline; filename="{name}.{extension}"'},
    )


@get(
    "/v1/jobs/{job_id:uuid}/captions",
    summary="The job's captions: each word's time in GET .../audio",
    operation_class=CaptionsOperation,
    guards=READ,
    responses=responses(401, 403, 404, 409, 503),
)
async def get_job_captions(
    job_id: FromPath[uuid.UUID],
    reader: Injected[ProjectionReader],
    principal: Injected[Principal],
    fmt: Format = "srt",
) -> Response[bytes]:
    job = await known_job(reader, job_id, principal)
    if job.state is not JobState.COMPLETED:
        raise HTTPException(detail=f"job {job_id} is {job.state.value}, not completed", status_code=409)
    return _answer([(list(job.segments), None)], fmt, str(job_id))


@get(
    "/v1/documents/{document_id:uuid}/captions",
    summary="The document's captions, timed to GET .../audio with its pauses and chapter gaps",
    operation_class=CaptionsOperation,
    guards=READ,
    responses=responses(401, 403, 404, 409, 503),
)
async def get_document_captions(
    document_id: FromPath[uuid.UUID],
    documents: Injected[DocumentReader],
    principal: Injected[Principal],
    fmt: Format = "srt",
) -> Response[bytes]:
    document, spans, segments = await layout(documents, document_id, principal)
    return _answer(stitched_parts(document, spans, segments), fmt, str(document_id))


@get(
    "/v1/documents/{document_id:uuid}/chapters/{index:int}/captions",
    summary="One chapter's captions, timed to GET .../chapters/{index}/audio",
    operation_class=CaptionsOperation,
    guards=READ,
    responses=responses(401, 403, 404, 409, 503),
)
async def get_chapter_captions(
    document_id: FromPath[uuid.UUID],
    index: FromPath[int],
    documents: Injected[DocumentReader],
    principal: Injected[Principal],
    fmt: Format = "srt",
) -> Response[bytes]:
    document, spans, segments = await layout(documents, document_id, principal, index)
    return _answer(stitched_parts(document, [spans[index]], segments), fmt, f"{document_id}-{index:03d}")


CAPTION_ROUTES = (get_job_captions, get_document_captions, get_chapter_captions)
