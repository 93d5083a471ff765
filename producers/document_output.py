"""A document's audio (whole, or per chapter), its table of contents, and its cancellation."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any, Final

from litestar import Request, Response, delete, get
from litestar.exceptions import HTTPException, NotFoundException
from litestar.response import Stream

from contracts import document_part_job_id
from contracts.job_state import LIVE_STATES
from foundation.audio_formats import media_type
from foundation.errors import BrokerUnavailable
from producers.cancel import cancellation
from producers.deps import ApiDeps, deps_of
from producers.document_audio import ChapterSpan, chapter_spans, stitched
from producers.document_queries import part_job_ids
from producers.documents import document_and_parts

_LIVE: Final = frozenset(state.value for state in LIVE_STATES)
CANCEL_VISIBLE_WITHIN_S: Final = 5.0  # then 202 with "visible": false; the cancellation still holds


async def _layout(
    deps: ApiDeps, document_id: uuid.UUID, chapter: int | None = None
) -> tuple[dict[str, Any], list[ChapterSpan], dict[int, list[dict[str, Any]]]]:
    """The document, its chapters' places in the audio, and the completed parts' segments (by part index).
    409 when the parts asked for (one chapter's, or all) are not all completed."""
    if deps.documents is None:
        raise NotFoundException("this API serves no documents")
    document, parts = await document_and_parts(deps, document_id)
    if chapter is not None and not 0 <= chapter < len(document["chapters"]):
        raise NotFoundException(f"document {document_id} has chapters 0 to {len(document['chapters']) - 1}")
    wanted = range(len(parts))
    if chapter is not None:
        first = sum(c["parts"] for c in document["chapters"][:chapter])
        wanted = range(first, first + document["chapters"][chapter]["parts"])
    pending = [i for i in wanted if not parts[i] or parts[i]["state"] != "completed"]  # type: ignore[index]
    if pending:
        what = f"chapter {chapter}" if chapter is not None else "the document"
        raise HTTPException(
            detail=f"{what} has {len(pending)} of {len(wanted)} parts not completed yet (GET /v1/documents/"
            f"{document_id} shows the progress)",
            status_code=409,
        )
    ids = part_job_ids(document_id, len(parts))
    by_job = await deps.documents.segments([ids[i] for i in wanted] if chapter is not None else ids)
    segments = {i: by_job.get(ids[i], []) for i in range(len(parts)) if ids[i] in by_job}
    return document, chapter_spans(document["chapters"], document["breaks"], segments), segments


def _stream(
    deps: ApiDeps,
    document: dict[str, Any],
    spans: list[ChapterSpan],
    segments: dict[int, list[dict[str, Any]]],
    name: str,
) -> Stream:
    fmt, rate = document["request"]["format"], document["request"]["sample_rate"]
    start = spans[0].start_ms
    chapters = [(s.start_ms - start, s.start_ms - start + s.duration_ms, s.title) for s in spans]
    parts = [
        (segments.get(p, []), document["breaks"][p]) for s in spans for p in range(s.first_part, s.first_part + s.parts)
    ]
    extension = "raw" if fmt == "pcm" else fmt
    return Stream(
        stitched(deps.blobs, parts, fmt, rate, chapters),
        media_type=media_type(fmt, rate),
        headers={"Content-Disposition": f'attachment; filename="{name}.{extension}"'},
    )


@get("/v1/documents/{document_id:uuid}/audio", summary="The whole document as one file, chapters marked")
async def get_document_audio(request: Request[Any, Any, Any], document_id: uuid.UUID) -> Stream:
    deps = deps_of(request)
    document, spans, segments = await _layout(deps, document_id)
    return _stream(deps, document, spans, segments, str(document_id))


@get("/v1/documents/{document_id:uuid}/chapters/{index:int}/audio", summary="One chapter as one file")
async def get_chapter_audio(request: Request[Any, Any, Any], document_id: uuid.UUID, index: int) -> Stream:
    deps = deps_of(request)
    document, spans, segments = await _layout(deps, document_id, index)
    return _stream(deps, document, [spans[index]], segments, f"{document_id}-{index:03d}")


@get("/v1/documents/{document_id:uuid}/toc", summary="The table of contents: each chapter's start and length")
async def get_toc(request: Request[Any, Any, Any], document_id: uuid.UUID) -> dict[str, Any]:
    """Times are those of GET .../audio (the whole document); 409 until every part is completed."""
    document, spans, _ = await _layout(deps_of(request), document_id)
    return {
        "document_id": document_id,
        "title": document["title"],
        "duration_ms": sum(s.duration_ms for s in spans),
        "chapters": [
            {
                "index": s.index,
                "title": s.title,
                "start_ms": s.start_ms,
                "duration_ms": s.duration_ms,
                "parts": s.parts,
                "audio": f"/v1/documents/{document_id}/chapters/{s.index}/audio",
            }
            for s in spans
        ],
    }


@delete("/v1/documents/{document_id:uuid}", status_code=202, summary="Cancel a document's remaining parts")
async def cancel_document(request: Request[Any, Any, Any], document_id: uuid.UUID) -> Response[dict[str, Any]]:
    """Every part not ended yet is cancelled (its own ``JobCancelled``); finished parts keep their audio.
    Answers once the projection shows it (``visible``), or after ``CANCEL_VISIBLE_WITHIN_S``."""
    deps = deps_of(request)
    if deps.documents is None:
        raise NotFoundException("this API serves no documents")
    _, parts = await document_and_parts(deps, document_id)
    events = [
        cancellation(
            document_part_job_id(document_id, i),
            part["fingerprint"],
            "document",
            deps.producer,
            f"DELETE /v1/documents/{document_id}",
            document_id,
        )
        for i, part in enumerate(parts)
        if part is not None and part["state"] in _LIVE
    ]
    partitions = await deps.reader.partitions_of([event.job_id for event in events]) if events else {}
    try:
        await deps.publisher.publish_all(events, [partitions.get(event.job_id) for event in events])
    except BrokerUnavailable as exc:
        detail = f"the job log did not confirm the cancellation ({exc}); retry the DELETE"
        raise HTTPException(detail=detail, status_code=503, headers={"Retry-After": "5"}) from exc
    ended = sum(1 for p in parts if p is not None and p["state"] not in _LIVE)
    visible = await _cancellations_visible(deps, document_id, len(parts), CANCEL_VISIBLE_WITHIN_S)
    body = {
        "document_id": document_id,
        "cancelled": len(events),
        "ended_already": ended,
        "parts": len(parts),
        "visible": visible,
    }
    return Response(body, status_code=202 if events else 200)


async def _cancellations_visible(deps: ApiDeps, document_id: uuid.UUID, count: int, within_s: float) -> bool:
    """Wait (bounded) until the projection shows no live part: workers ask the projection before they claim
    a part, so once it shows the cancellations, no remaining part starts. It reads again when the projector
    names the first part still live (the job change feed, watched before the read), not on a timer."""
    assert deps.documents is not None
    deadline, watched = time.monotonic() + within_s, 0
    while True:
        with deps.changes.watch(document_part_job_id(document_id, watched)) as changes:
            parts = await deps.documents.parts(document_id, count)
            live = [i for i, part in enumerate(parts) if part is None or part["state"] in _LIVE]
            left = deadline - time.monotonic()
            if not live:
                return True
            if left <= 0:
                return False
            if live[0] == watched:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changes.wait(), left)
        watched = live[0]
