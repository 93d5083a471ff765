"""POST /v1/documents: a long text (Markdown, plain text, or an EPUB upload) in, chapters of audio out.

The document is split into chapters and parts (:mod:`producers.document_split`),
each part its own job with its own fingerprint, at batch priority unless the
request says otherwise: the parts fan out over every worker, and a part that
repeats (in this document or any other) is synthesized once. Every part is
validated before anything is recorded. The parts' ``JobQueued`` go to the log
first, then the ``DocumentSubmitted`` that names them (by derived ids): a
document is visible only once all its parts are recorded, and a submission
the log took in part (503) is retried with the same Idempotency-Key, which
names the same document and parts. Documents are long by design: they are
not refused for the backlog (``VOXLOG_MAX_BACKLOG_S``), they wait their turn
behind interactive requests.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import timedelta
from typing import Annotated, Any, Final

from litestar import Request, Response, get, post
from litestar.datastructures import UploadFile
from litestar.exceptions import HTTPException, NotFoundException
from litestar.params import HeaderParameter
from pydantic import Field, ValidationError

from contracts import (
    DocumentChapter,
    DocumentSubmitted,
    DocumentSubmittedPayload,
    Markup,
    Priority,
    derive_event_id,
    document_part_job_id,
    utc_now,
)
from foundation.errors import BrokerUnavailable
from foundation.metrics import SUBMISSIONS
from producers.deps import ApiDeps, deps_of
from producers.document_audio import STREAMED_FORMATS
from producers.document_split import Document, DocumentError, split_epub, split_text
from producers.submit import JobRequest, Rejected, SpeechOptions, queued_event, scoped_key, validate

MAX_UPLOAD_BYTES: Final = 64 * 1024 * 1024
DOCUMENT_NAMESPACE: Final = uuid.UUID("a41f7c3e-0d2b-4e58-8f6a-2b9c5d1e7f30")


class DocumentOptions(SpeechOptions):
    """How to read the document: every part is a request with the :class:`SpeechOptions` fields."""

    format: str = Field("wav", description="Audio format of the stitched files: wav, mp3 or pcm.")
    priority: Priority = Field(
        "batch", description="batch (the default: interactive requests go first) or interactive."
    )
    title: str | None = Field(
        None, max_length=500, description="The title; else the document's own (heading, metadata)."
    )


class DocumentRequest(DocumentOptions):
    """POST /v1/documents JSON body (an EPUB is uploaded as multipart/form-data instead, field ``file``)."""

    text: str = Field(description="The document, at most VOXLOG_MAX_DOCUMENT_CHARS characters once read.")
    markup: str = Field("markdown", description="markdown (the default) or plain.")


async def _read_body(
    request: Request[Any, Any, Any], max_chars: int, part_chars: int
) -> tuple[Document, Markup, bytes, DocumentOptions]:
    """The split document, its markup, its raw bytes (for the idempotency key) and the options."""
    content_type = request.headers.get("content-type", "")
    try:
        if content_type.startswith("multipart/form-data"):
            form = await request.form()
            upload = form.get("file")
            if not isinstance(upload, UploadFile):
                raise Rejected("a multipart upload needs the document in a part named 'file'")
            fields = {k: v for k, v in form.items() if k != "file" and isinstance(v, str)}
            options = DocumentOptions.model_validate(fields)
            raw = await upload.read()
            name = (upload.filename or "").lower()
            if name.endswith(".epub"):
                return split_epub(raw, max_part_chars=part_chars, title=options.title), "epub", raw, options
            markup: Markup = "markdown" if name.endswith((".md", ".markdown")) else "plain"
            text = raw.decode("utf-8")
        else:
            body = DocumentRequest.model_validate_json(await request.body())
            if body.markup not in ("markdown", "plain"):
                raise Rejected(f"markup {body.markup!r} is not known: use markdown or plain (upload an EPUB as 'file')")
            options, text, raw = body, body.text, body.text.encode()
            markup = "plain" if body.markup == "plain" else "markdown"
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise Rejected(f"{where}: {first['msg']}", 400) from exc
    except UnicodeDecodeError as exc:
        raise Rejected(f"the document is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from exc
    if len(text) > max_chars * 2:  # markup included: refuse before splitting an absurd upload
        raise Rejected(f"the document has {len(text)} characters; the limit is {max_chars}: split it", 413)
    split = split_text(
        text, "plain" if markup == "plain" else "markdown", max_part_chars=part_chars, title=options.title
    )
    return split, markup, raw, options


@post("/v1/documents", status_code=202, summary="Submit a long document: chapters and parts, each part a job",
      request_max_body_size=MAX_UPLOAD_BYTES)  # fmt: skip
async def submit_document(
    request: Request[Any, Any, Any],
    idempotency_key: Annotated[str | None, HeaderParameter(name="Idempotency-Key")] = None,
) -> Response[dict[str, Any]]:
    """202 with the document's chapters and parts; 200 with the same when the Idempotency-Key named it before."""
    deps = deps_of(request)
    if deps.documents is None or deps.document_log is None:
        raise HTTPException(detail="this API serves no documents", status_code=404)
    limits = deps.limits
    try:
        key = scoped_key(idempotency_key, request.headers.get("authorization")) if idempotency_key else None
        document, markup, raw, options = await _read_body(
            request, limits.max_document_chars, limits.document_part_chars
        )
        if document.chars > limits.max_document_chars:
            raise Rejected(
                f"the document has {document.chars} characters; the limit is {limits.max_document_chars}: split it", 413
            )
        if options.format.strip().lower() not in STREAMED_FORMATS:
            raise Rejected(
                f"format {options.format!r}: a document is stitched as a stream; use one of: "
                + ", ".join(STREAMED_FORMATS)
            )
        engines = await deps.reader.engines()
        common = options.model_dump(include=set(SpeechOptions.model_fields))
        parts = [part for chapter in document.chapters for part in chapter.parts]
        syntheses = [validate(JobRequest(text=part.text, **common), limits, engines) for part in parts]
    except DocumentError as exc:
        raise HTTPException(detail=str(exc), status_code=422) from exc
    except Rejected as exc:
        raise HTTPException(detail=str(exc), status_code=exc.status, headers=exc.headers()) from exc
    digest = hashlib.sha256(raw + options.model_dump_json().encode()).hexdigest()
    document_id = uuid.uuid5(DOCUMENT_NAMESPACE, f"{key}\n{digest}") if key else uuid.uuid4()
    if key is not None and await deps.documents.document_by_key(key) == document_id:
        return Response(_submitted_body(document_id, document), status_code=200)
    events = [
        queued_event(synthesis, document_part_job_id(document_id, index), None, deps.producer, options.priority)
        for index, synthesis in enumerate(syntheses)
    ]
    breaks = "".join({"sentence": "s", "paragraph": "p", "chapter": "c"}[part.break_after] for part in parts)
    submitted = DocumentSubmitted(
        event_id=derive_event_id(document_id, "DocumentSubmitted", 0),
        occurred_at=utc_now(),
        producer=deps.producer,
        payload=DocumentSubmittedPayload(
            document_id=document_id,
            title=document.title[:500],
            markup=markup,
            chapters=tuple(DocumentChapter(title=c.title[:500], parts=len(c.parts)) for c in document.chapters),
            breaks=breaks,
            total_chars=document.chars,
            request=syntheses[0].model_copy(update={"text": document.title or "untitled"}),
            priority=options.priority,
            idempotency_key=key,
            submitted_at=utc_now(),
        ),
    )
    try:
        await deps.publisher.publish_all(events)  # the parts first: a visible document has every part
        await deps.document_log.publish(submitted)
    except BrokerUnavailable as exc:
        retry = f"the header Idempotency-Key: {idempotency_key}" if idempotency_key else "an Idempotency-Key header"
        detail = f"the job log did not confirm the whole document ({exc}); send it again with {retry} to resume it"
        raise HTTPException(detail=detail, status_code=503, headers={"Retry-After": "5"}) from exc
    SUBMISSIONS.labels("queued").inc(len(events))
    return Response(_submitted_body(document_id, document), status_code=202,
                    headers={"Location": f"/v1/documents/{document_id}"})  # fmt: skip


def _links(document_id: uuid.UUID) -> dict[str, str]:
    base = f"/v1/documents/{document_id}"
    return {"self": base, "audio": f"{base}/audio", "toc": f"{base}/toc"}


def _submitted_body(document_id: uuid.UUID, document: Document) -> dict[str, Any]:
    return {
        "document_id": document_id,
        "title": document.title,
        "parts": document.part_count,
        "chars": document.chars,
        "chapters": [{"index": i, "title": c.title, "parts": len(c.parts)} for i, c in enumerate(document.chapters)],
        "links": _links(document_id),
    }


async def document_and_parts(
    deps: ApiDeps, document_id: uuid.UUID
) -> tuple[dict[str, Any], list[dict[str, Any] | None]]:
    assert deps.documents is not None
    document = await deps.documents.document(document_id)
    if document is None:
        raise NotFoundException(f"no document {document_id} (a document just submitted appears within a moment)")
    return document, await deps.documents.parts(document_id, document["part_count"])


def document_state(parts: list[dict[str, Any] | None]) -> str:
    states = [p["state"] if p else "queued" for p in parts]
    if all(s == "completed" for s in states):
        return "completed"
    if "cancelled" in states:
        return "cancelled"
    if "failed" in states:
        return "failed"
    return "running" if any(s != "queued" for s in states) else "queued"


@get("/v1/documents/{document_id:uuid}", summary="A document's progress: parts done, audio so far, estimated finish")
async def get_document(request: Request[Any, Any, Any], document_id: uuid.UUID) -> dict[str, Any]:
    deps = deps_of(request)
    if deps.documents is None:
        raise NotFoundException("this API serves no documents")
    document, parts = await document_and_parts(deps, document_id)
    done = [p for p in parts if p and p["state"] == "completed"]
    counts = {
        state: sum(1 for p in parts if p and p["state"] == state) for state in ("completed", "failed", "cancelled")
    }
    done_chars = sum(p["chars"] for p in done)
    elapsed = (utc_now() - document["submitted_at"]).total_seconds()
    remaining = document["total_chars"] - done_chars
    live = document_state(parts) in ("queued", "running")
    finish = utc_now() + timedelta(seconds=remaining * elapsed / done_chars) if live and done_chars else None
    chapters, first = [], 0
    for index, chapter in enumerate(document["chapters"]):
        mine = parts[first : first + chapter["parts"]]
        chapters.append({
            "index": index,
            "title": chapter["title"],
            "parts": chapter["parts"],
            "completed": sum(1 for p in mine if p and p["state"] == "completed"),
            "audio_seconds": sum((p["total_duration_ms"] or 0) for p in mine if p and p["state"] == "completed") / 1000,
            "links": {"audio": f"/v1/documents/{document_id}/chapters/{index}/audio"},
        })  # fmt: skip
        first += chapter["parts"]
    return {
        "document_id": document_id,
        "title": document["title"],
        "state": document_state(parts),
        "submitted_at": document["submitted_at"],
        "priority": document["priority"],
        "request": {k: v for k, v in document["request"].items() if k != "text"},
        "chars": document["total_chars"],
        "parts": {"total": len(parts), **counts},
        "audio_seconds": sum((p["total_duration_ms"] or 0) for p in done) / 1000,
        "estimated_finish": finish,
        "chapters": chapters,
        "links": _links(document_id),
    }
