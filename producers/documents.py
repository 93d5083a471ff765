"""POST /v1/documents: a long text (Markdown, plain text, or an EPUB upload) in, chapters of audio out.

The document is parsed and split into chapters and parts off the event loop,
under its budgets (:mod:`producers.document_parsing`, :mod:`producers.document_split`),
each part its own job with its own fingerprint, at batch priority unless the
request says otherwise: the parts fan out over every worker, and a part that
repeats (in this document or any other) is synthesized once. The parts go
through the submission pipeline as any request does
(:mod:`producers.submission`: every part validated, and every record checked
against the size the log takes, before anything is recorded; admission,
placement): the ``DocumentSubmitted`` that names the parts (by derived ids)
goes to the log first, then their ``JobQueued``, so a submission the log took
in part (503) leaves no part without its document, and its retry with the
Idempotency-Key the 503 names sends the parts the projection does not show
yet, never a second document or a second job of a part.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, Final

from litestar import Request, Response, get, post
from litestar.datastructures import UploadFile
from litestar.exceptions import NotFoundException
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath

from contracts import (
    DocumentChapter,
    DocumentSubmitted,
    DocumentSubmittedPayload,
    JobState,
    Markup,
    PartBreak,
    Producer,
    SynthesisRequest,
    derive_event_id,
    document_part_job_id,
    node_event,
    utc_now,
)
from contracts.document_state import document_state
from contracts.job_state import LIVE_STATES
from contracts.pronunciations import checked_map
from producers.api_keys import Principal
from producers.auth import READ, SUBMIT
from producers.deps import Injected
from producers.document_audio import STREAMED_FORMATS
from producers.document_parsing import DocumentOptions, DocumentParser, DocumentRequest, Received
from producers.document_split import BreakKind, Document
from producers.errors import Rejected
from producers.http_errors import responses
from producers.idempotency import document_id_for
from producers.job_routes import IdempotencyKey, submission_key
from producers.long_poll import PreferHeader, applied, preferred_wait, until_changed
from producers.openapi_docs import document_operation
from producers.ports import JobChangeFeed
from producers.requests import JobRequest, SpeechOptions
from producers.submission import Item, Submission, Submissions
from producers.views import (
    ChapterAccepted,
    ChapterProgressView,
    DocumentAccepted,
    DocumentView,
    PartsRequestView,
    PartsView,
    document_links,
)
from projections.reads.documents import DocumentReader
from projections.reads.rows import DocumentRow, PartRow

MAX_UPLOAD_BYTES: Final = 64 * 1024 * 1024
"""What the route reads of a body at most (VOXLOG_MAX_DOCUMENT_BYTES may say less)."""
BREAKS: Final[dict[BreakKind, PartBreak]] = {"sentence": "s", "paragraph": "p", "scene": "b", "chapter": "c"}


async def _received(request: Request[Any, Any, Any]) -> Received:
    """The body as it came, unparsed (a multipart form is taken apart: its file and its fields)."""
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        try:
            form = await request.form()
        except UnicodeDecodeError as exc:  # Litestar decodes every part without a file name as a field
            raise Rejected(
                f"a field of the multipart form is not UTF-8 text ({exc.reason} at byte {exc.start}); send the"
                " document as the 'file' part, with a file name, and the other fields as UTF-8",
                400,
            ) from None
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise Rejected("a multipart upload needs the document in a part named 'file'")
        fields = {k: v for k, v in form.items() if k != "file" and isinstance(v, str)}
        return Received(await upload.read(), upload.filename or "", fields)
    return Received(await request.body())


@post(
    "/v1/documents",
    status_code=202,
    summary="Submit a long document: chapters and parts, each part a job",
    guards=SUBMIT,
    operation_class=document_operation(DocumentRequest, DocumentOptions),
    request_max_body_size=MAX_UPLOAD_BYTES,
    responses=responses(
        400,
        401,
        403,
        404,
        409,
        413,
        422,
        429,
        503,
        _200=ResponseSpec(DocumentAccepted, description="The key's document."),
    ),
)
async def submit_document(
    request: Request[Any, Any, Any],
    submissions: Injected[Submissions],
    documents: Injected[DocumentReader],
    document_parser: Injected[DocumentParser],
    producer: Injected[Producer],
    principal: Injected[Principal],
    idempotency_key: IdempotencyKey = None,
) -> Response[DocumentAccepted]:
    """202 with the document's chapters and parts; 200 with the same when the Idempotency-Key named it before.
    The document is parsed off the event loop (:mod:`producers.document_parsing`)."""
    key, sent = submission_key(idempotency_key, principal, request)
    parsed = await document_parser.parse(await _received(request), principal.tenant)
    document, markup, options = parsed.document, parsed.markup, parsed.options
    if options.format.strip().lower() not in STREAMED_FORMATS:
        raise Rejected(
            f"format {options.format!r}: a document is stitched as a stream; use one of: " + ", ".join(STREAMED_FORMATS)
        )
    document_id = document_id_for(key, parsed.digest)
    known = sent and await documents.document_by_key(key) == document_id
    common = options.model_dump(include=set(SpeechOptions.model_fields))
    parts = [part for chapter in document.chapters for part in chapter.parts]
    items = [
        # A document is text: a part that starts with "<speak" is read as written, never as SSML.
        Item(
            JobRequest(text=part.text, input_format="text", **common),
            options.priority,
            document_part_job_id(document_id, index),
            document_id,
        )
        for index, part in enumerate(parts)
    ]

    def record(requests: Sequence[SynthesisRequest]) -> DocumentSubmitted:
        return _document_record(
            document_id, document, markup, requests[0], options, key if sent else None, producer, principal.tenant
        )

    # A retry of a document the log holds sends only the parts it lacks (the pipeline knows the others).
    submission = Submission(items, key, sent, principal, from_cache=False, record=None if known else record)
    await submissions.submit(submission)
    if known:
        return Response(_accepted(document_id, document), status_code=200)
    return Response(
        _accepted(document_id, document), status_code=202, headers={"Location": f"/v1/documents/{document_id}"}
    )


def _document_record(
    document_id: uuid.UUID,
    document: Document,
    markup: Markup,
    first: SynthesisRequest,
    options: DocumentOptions,
    key: str | None,
    producer: Producer,
    tenant: str,
) -> DocumentSubmitted:
    parts = [part for chapter in document.chapters for part in chapter.parts]
    own = checked_map(options.pronunciations or {})  # checked already: every part's request was
    now = utc_now()
    return node_event(
        DocumentSubmitted,
        producer,
        DocumentSubmittedPayload(
            document_id=document_id,
            title=document.title[:500],
            markup=markup,
            chapters=tuple(DocumentChapter(title=c.title[:500], parts=len(c.parts)) for c in document.chapters),
            breaks="".join(BREAKS[part.break_after] for part in parts),
            total_chars=document.chars,
            # The document's own pronunciations (each part's job records those its text says, with the lexicon's).
            request=first.model_copy(update={"text": document.title or "untitled", "pronunciations": own}),
            priority=options.priority,
            idempotency_key=key,
            submitted_at=now,
            tenant=tenant,
        ),
        event_id=derive_event_id(document_id, "DocumentSubmitted", 0),
        at=now,
    )


def _accepted(document_id: uuid.UUID, document: Document) -> DocumentAccepted:
    return DocumentAccepted(
        document_id=document_id,
        title=document.title,
        parts=document.part_count,
        chars=document.chars,
        chapters=[ChapterAccepted(index=i, title=c.title, parts=len(c.parts)) for i, c in enumerate(document.chapters)],
        links=document_links(document_id),
    )


async def document_and_parts(
    documents: DocumentReader, document_id: uuid.UUID, principal: Principal
) -> tuple[DocumentRow, list[PartRow | None]]:
    """The document and its parts, if it is the principal's tenant's (another tenant's: 404, as none)."""
    document = await documents.document(document_id, principal.tenant)
    if document is None:
        raise NotFoundException(f"no document {document_id} (a document just submitted appears within a moment)")
    return document, await documents.parts(document_id, document.part_count)


def _done(parts: Sequence[PartRow | None]) -> int:
    """Parts whose audio (or pause) is ready: completed, or with nothing to speak."""
    return sum(1 for p in parts if p is not None and p.done)


def _count(parts: Sequence[PartRow | None], state: JobState) -> int:
    return sum(1 for p in parts if p is not None and p.state is state and not p.silent)


def _audio_s(parts: Sequence[PartRow | None]) -> float:
    return sum(p.total_duration_ms or 0 for p in parts if p is not None and p.state is JobState.COMPLETED) / 1000


@get(
    "/v1/documents/{document_id:uuid}",
    summary="A document's progress: parts done, audio so far, estimated finish",
    guards=READ,
    responses=responses(401, 403, 404, 503),
)
async def get_document(
    document_id: FromPath[uuid.UUID],
    documents: Injected[DocumentReader],
    changes: Injected[JobChangeFeed],
    principal: Injected[Principal],
    prefer: PreferHeader = None,
) -> Response[DocumentView]:
    """With ``Prefer: wait=N``, the answer waits until a part changed state or the document ended
    (:mod:`producers.long_poll`: it watches the first part still live)."""

    async def read() -> tuple[DocumentRow, list[PartRow | None]]:
        return await document_and_parts(documents, document_id, principal)

    if (wait := preferred_wait(prefer)) is None:
        return Response(_document_view(document_id, *await read()))
    document, parts = await until_changed(changes, read, _part_states, _first_live_part(document_id), wait)
    return Response(_document_view(document_id, document, parts), headers=applied(wait))


def _part_states(found: tuple[DocumentRow, list[PartRow | None]]) -> tuple[JobState | None, ...]:
    return tuple(None if part is None else part.state for part in found[1])


def _first_live_part(
    document_id: uuid.UUID,
) -> Callable[[tuple[DocumentRow, list[PartRow | None]]], uuid.UUID | None]:
    def first(found: tuple[DocumentRow, list[PartRow | None]]) -> uuid.UUID | None:
        live = (i for i, part in enumerate(found[1]) if part is None or part.state in LIVE_STATES)
        index = next(live, None)
        return None if index is None else document_part_job_id(document_id, index)

    return first


def _document_view(document_id: uuid.UUID, document: DocumentRow, parts: list[PartRow | None]) -> DocumentView:
    state = document_state(parts)
    done_chars = sum(p.chars for p in parts if p is not None and p.state is JobState.COMPLETED)
    elapsed = (utc_now() - document.submitted_at).total_seconds()
    remaining = document.total_chars - done_chars
    live = state in ("queued", "running")
    finish = utc_now() + timedelta(seconds=remaining * elapsed / done_chars) if live and done_chars else None
    chapters = []
    for index, chapter in enumerate(document.chapters):
        mine = [parts[i] for i in document.chapter_parts(index)]
        chapters.append(
            ChapterProgressView(
                index=index,
                title=chapter.title,
                parts=chapter.parts,
                completed=_done(mine),
                audio_seconds=_audio_s(mine),
                links={"audio": f"/v1/documents/{document_id}/chapters/{index}/audio"},
            )
        )
    return DocumentView(
        document_id=document_id,
        title=document.title,
        state=state,
        submitted_at=document.submitted_at,
        priority=document.priority,
        request=PartsRequestView.model_validate(document.request.model_dump(exclude={"text"})),
        chars=document.total_chars,
        parts=PartsView(
            total=len(parts),
            completed=_done(parts),
            failed=_count(parts, JobState.FAILED),
            cancelled=_count(parts, JobState.CANCELLED),
        ),
        audio_seconds=_audio_s(parts),
        estimated_finish=finish,
        chapters=chapters,
        links=document_links(document_id),
    )
