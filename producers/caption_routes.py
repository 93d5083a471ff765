"""Captions of a job, a document and a chapter, timed to the audio their audio routes serve.

Each is built off the event loop and kept (:mod:`producers.caption_cache`): only once the job or document is
known to be the caller's and completed, so the cache answers no one what the checks would not.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Sequence
from functools import partial
from typing import Annotated

from litestar import Response, get
from litestar.exceptions import HTTPException
from litestar.params import FromPath, QueryParameter

from contracts import JobState
from producers.api_keys import Principal
from producers.auth import READ
from producers.caption_cache import CaptionCache
from producers.captions import MEDIA_TYPES, CaptionFormat, Part, rendered, timeline
from producers.deps import Injected
from producers.document_output import completed, laid_out, stitched_parts
from producers.http_errors import responses
from producers.job_routes import known_job
from producers.openapi_docs import CaptionsOperation
from projections.reads.documents import DocumentReader
from projections.reads.jobs import ProjectionReader

Format = Annotated[
    CaptionFormat,
    QueryParameter(name="format", description="srt, vtt (WebVTT), or json (every word, and the cues)"),
]


def _built(parts: Sequence[Part], fmt: CaptionFormat) -> bytes:
    """The captions of ``parts``: what runs in the cache's thread, never on the loop."""
    words, duration_ms = timeline(parts)
    return rendered(words, duration_ms, fmt)


def _answer(body: bytes, fmt: CaptionFormat, name: str) -> Response[bytes]:
    extension = "json" if fmt == "json" else fmt
    return Response(
        body,
        media_type=MEDIA_TYPES[fmt],
        headers={"Content-Disposition": f'inline; filename="{name}.{extension}"'},
    )


async def _document_captions(
    documents: DocumentReader,
    captions: CaptionCache,
    document_id: uuid.UUID,
    principal: Principal,
    fmt: CaptionFormat,
    chapter: int | None,
) -> bytes:
    document, parts, wanted = await completed(documents, document_id, principal, chapter)
    key: Hashable = ("document", document_id, chapter, fmt)

    found = captions.cached(key)
    if found is not None:  # the segments, a book's worth of rows, are read only when the captions are not kept
        return found
    spans, segments = await laid_out(documents, document_id, document, len(parts), wanted)
    chosen = spans if chapter is None else [spans[chapter]]
    return await captions.get(key, partial(_built, stitched_parts(document, chosen, segments), fmt))


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
    captions: Injected[CaptionCache],
    principal: Injected[Principal],
    fmt: Format = "srt",
) -> Response[bytes]:
    job = await known_job(reader, job_id, principal)
    if job.state is not JobState.COMPLETED:
        raise HTTPException(detail=f"job {job_id} is {job.state.value}, not completed", status_code=409)
    body = await captions.get(("job", job_id, None, fmt), partial(_built, [(list(job.segments), None)], fmt))
    return _answer(body, fmt, str(job_id))


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
    captions: Injected[CaptionCache],
    principal: Injected[Principal],
    fmt: Format = "srt",
) -> Response[bytes]:
    body = await _document_captions(documents, captions, document_id, principal, fmt, None)
    return _answer(body, fmt, str(document_id))


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
    captions: Injected[CaptionCache],
    principal: Injected[Principal],
    fmt: Format = "srt",
) -> Response[bytes]:
    body = await _document_captions(documents, captions, document_id, principal, fmt, index)
    return _answer(body, fmt, f"{document_id}-{index:03d}")


CAPTION_ROUTES = (get_job_captions, get_document_captions, get_chapter_captions)
