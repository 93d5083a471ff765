"""Every operation of the client, written once: the request it sends, the answers it accepts, what it returns.

An operation is a :class:`Call` (one request, retried by :func:`voxlog.client.protocol.exchange`), or a
program: a generator that yields calls and sleeps and receives each call's result, for what takes several
requests (waiting for a job to end). :class:`voxlog.client.Client` and :class:`voxlog.client.AsyncClient`
carry programs out, each with its own I/O.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Generic, Literal, TypeVar

import httpx

from contracts import TERMINAL_STATES
from producers.views import (
    BatchAccepted,
    CancelView,
    DocumentAccepted,
    DocumentCancelView,
    DocumentView,
    JobAccepted,
    JobHistoryView,
    JobView,
    TocView,
)
from voxlog.client.protocol import ApiError, Sleep

T = TypeVar("T")

ENDED_JOB: Final = frozenset(state.value for state in TERMINAL_STATES)
ENDED_DOCUMENT: Final = frozenset({"completed", "failed", "cancelled"})
WAIT_S: Final = 25.0
"""The wait a client asks the API for per read (``Prefer: wait``); the API grants up to 60 s."""
VISIBLE_WITHIN_S: Final = 30.0
"""How long a job or document just accepted may be unknown to the status routes (the projection follows the
log a moment behind) before a wait gives up on it."""
OK: Final = frozenset({200})
ACCEPTED: Final = frozenset({200, 202})

CaptionFormat = Literal["srt", "vtt", "json"]


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and what its answer means. ``sink``: stream the answer's body into this file."""

    what: str
    method: str
    url: str
    parse: Callable[[httpx.Response], T]
    ok: frozenset[int] = OK
    json: Any = None
    params: Mapping[str, str] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    data: Mapping[str, str] | None = None
    files: Any = None
    sink: Path | None = None

    def request(self, http: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        """Built once per call: every attempt sends the same body and ``Idempotency-Key``."""
        return http.build_request(
            self.method,
            self.url,
            json=self.json,
            params=self.params,
            headers=dict(self.headers),
            data=self.data,
            files=self.files,
        )


Program = Generator[Call[Any] | Sleep, Any, T]


def with_headers(call: Call[T], headers: Mapping[str, str]) -> Call[T]:
    """``call`` with ``headers`` added to its own (a run's ``traceparent``, say), sent on every attempt."""
    return replace(call, headers={**call.headers, **headers})


def idempotency(key: str | None) -> dict[str, str]:
    """The header naming one logical request: the caller's key, else a new one (the same on every retry)."""
    return {"Idempotency-Key": key or uuid.uuid4().hex}


def _json(response: httpx.Response) -> Any:
    return response.json()


def voices() -> Call[dict[str, Any]]:
    return Call("the voices", "GET", "/v1/voices", _json)


def submit_job(text: str, voice: str, key: str | None, fields: Mapping[str, Any]) -> Call[JobAccepted]:
    body = {"text": text, "voice": voice, **fields}
    return Call(
        "submitting a job", "POST", "/v1/jobs", lambda r: JobAccepted.model_validate(r.json()), ACCEPTED, body,
        headers=idempotency(key),
    )  # fmt: skip


def submit_batch(requests: Sequence[Mapping[str, Any]], key: str | None) -> Call[BatchAccepted]:
    return Call(
        "submitting a batch", "POST", "/v1/batches", lambda r: BatchAccepted.model_validate(r.json()), ACCEPTED,
        {"requests": list(requests)}, headers=idempotency(key),
    )  # fmt: skip


class DocumentSubmitted(DocumentAccepted):
    """The API's answer to a document's submission, and whether it was a replay: the ``Idempotency-Key`` named a
    document the log holds already (the API answers 200 then, 202 for a new one), which goes on being spoken."""

    replayed: bool = False


def _submitted(response: httpx.Response) -> DocumentSubmitted:
    return DocumentSubmitted.model_validate({**response.json(), "replayed": response.status_code == 200})


def submit_document(
    source: str | Path, voice: str | None, key: str | None, fields: Mapping[str, Any]
) -> Call[DocumentSubmitted]:
    """A text as JSON, or a file (EPUB, Markdown, plain text) as a multipart upload."""
    parse, headers = _submitted, idempotency(key)
    chosen = {"voice": voice} if voice else {}
    if isinstance(source, Path):
        data = {name: str(value) for name, value in {**chosen, **fields}.items()}
        upload = {"file": (source.name, source.read_bytes(), _content_type(source))}
        return Call(f"submitting {source.name}", "POST", "/v1/documents", parse, ACCEPTED, data=data, files=upload,
                    headers=headers)  # fmt: skip
    return Call("submitting a document", "POST", "/v1/documents", parse, ACCEPTED, {"text": source, **chosen,
                **fields}, headers=headers)  # fmt: skip


def _content_type(path: Path) -> str:
    import mimetypes

    return mimetypes.guess_type(path.name)[0] or "application/octet-stream"


def job(job_id: uuid.UUID | str, wait_s: float | None = None) -> Call[tuple[JobView, bool]]:
    """The job's status; with ``wait_s``, once it changed (or that long): the view, and whether the API waited."""
    return Call(f"job {job_id}", "GET", f"/v1/jobs/{job_id}", lambda r: (JobView.model_validate(r.json()),
                _waited(r)), headers=_prefer(wait_s))  # fmt: skip


def document(document_id: uuid.UUID | str, wait_s: float | None = None) -> Call[tuple[DocumentView, bool]]:
    return Call(f"document {document_id}", "GET", f"/v1/documents/{document_id}", lambda r: (
        DocumentView.model_validate(r.json()), _waited(r)), headers=_prefer(wait_s))  # fmt: skip


def _prefer(wait_s: float | None) -> dict[str, str]:
    return {} if wait_s is None else {"Prefer": f"wait={max(0.0, wait_s):.1f}"}


def _waited(response: httpx.Response) -> bool:
    return "wait=" in response.headers.get("preference-applied", "")


def events(job_id: uuid.UUID | str) -> Call[JobHistoryView]:
    """The job's history read from the log: every event (applied or fenced), its attempts, its time per state."""
    return Call(f"events of job {job_id}", "GET", f"/v1/jobs/{job_id}/events",
                lambda r: JobHistoryView.model_validate(r.json()))  # fmt: skip


def cancel(job_id: uuid.UUID | str) -> Call[CancelView]:
    return Call(f"cancelling job {job_id}", "DELETE", f"/v1/jobs/{job_id}",
                lambda r: CancelView.model_validate(r.json()), ACCEPTED)  # fmt: skip


def cancel_document(document_id: uuid.UUID | str) -> Call[DocumentCancelView]:
    return Call(f"cancelling document {document_id}", "DELETE", f"/v1/documents/{document_id}",
                lambda r: DocumentCancelView.model_validate(r.json()), ACCEPTED)  # fmt: skip


def audio_url(job_id: uuid.UUID | str | None = None, *, document_id: uuid.UUID | str | None = None,
              chapter: int | None = None) -> str:  # fmt: skip
    """The audio of a job, a document, or one of a document's chapters."""
    if job_id is not None:
        return f"/v1/jobs/{job_id}/audio"
    base = f"/v1/documents/{document_id}"
    return f"{base}/chapters/{chapter}/audio" if chapter is not None else f"{base}/audio"


def fetch(url: str, what: str, sink: Path | None = None, params: Mapping[str, str] | None = None) -> Call[bytes]:
    """A GET of a body (audio, captions, a table of contents): its bytes, or streamed into ``sink``."""
    return Call(what, "GET", url, lambda r: b"" if sink is not None else r.content, params=params, sink=sink)


def captions_url(url: str) -> str:
    """The captions beside an audio URL (``.../audio`` -> ``.../captions``)."""
    return url.removesuffix("/audio") + "/captions"


def captions(
    job_id: uuid.UUID | str | None,
    fmt: CaptionFormat,
    *,
    document_id: uuid.UUID | str | None = None,
    chapter: int | None = None,
) -> Call[str]:
    """The captions of a job, a document, or one of a document's chapters (409 until its audio is)."""
    if (job_id is None) == (document_id is None):
        raise TypeError("captions: name a job or a document, not both")
    url = captions_url(audio_url(job_id, document_id=document_id, chapter=chapter))
    what = f"job {job_id}" if job_id is not None else f"document {document_id}"
    what += f" chapter {chapter}" if chapter is not None and job_id is None else ""
    return Call(f"captions of {what}", "GET", url, lambda r: r.content.decode(), params={"format": fmt})


def toc(document_id: uuid.UUID | str) -> Call[TocView]:
    """The document's table of contents (each chapter's start in its whole audio): 409 until it completed."""
    return Call(f"table of contents of document {document_id}", "GET", f"/v1/documents/{document_id}/toc",
                lambda r: TocView.model_validate(r.json()))  # fmt: skip


def speech(body: Mapping[str, Any], key: str | None, *, stream: bool) -> Call[bytes]:
    """OpenAI's ``POST /v1/audio/speech`` (``model`` ``tts-1`` unless given: the default engine): streamed as it is
    made, or the whole answer once its job completed (``stream`` false: an error still has its status)."""
    sent = {"model": "tts-1", **body, "stream": stream}
    return Call("speech", "POST", "/v1/audio/speech", lambda r: r.content, json=sent, headers=idempotency(key))


def wait_job(
    job_id: uuid.UUID | str, timeout_s: float, clock: Callable[[], float] = time.monotonic
) -> Program[JobView]:
    """Until the job ends: reads that the API holds until the job changes (``Prefer: wait``), never a tight poll
    (against an API that answers at once, reads paced from 0.2 s to 2 s). A job just accepted may be unknown
    for a moment (:data:`VISIBLE_WITHIN_S`). Raises :class:`WaitTimeout` past ``timeout_s``."""
    view: JobView = yield from _until_ended(
        lambda wait_s: job(job_id, wait_s), lambda v: v.state.value in ENDED_JOB, f"job {job_id}", timeout_s, clock
    )
    return view


def wait_document(
    document_id: uuid.UUID | str,
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
    on_change: Callable[[DocumentView], None] | None = None,
) -> Program[DocumentView]:
    """As :func:`wait_job`, for a document; ``on_change`` sees each view read on the way (progress)."""
    view: DocumentView = yield from _until_ended(
        lambda wait_s: document(document_id, wait_s), lambda v: v.state in ENDED_DOCUMENT, f"document {document_id}",
        timeout_s, clock, on_change,
    )  # fmt: skip
    return view


class WaitTimeout(ApiError):
    """A job or document did not end within the time the caller gave; it goes on on the server."""


V = TypeVar("V")


def _until_ended(
    read: Callable[[float], Call[tuple[V, bool]]],
    ended: Callable[[V], bool],
    what: str,
    timeout_s: float,
    clock: Callable[[], float],
    on_change: Callable[[V], None] | None = None,
) -> Program[V]:
    started = clock()
    deadline, pace = started + timeout_s, 0.2
    while True:
        left = deadline - clock()
        try:
            view, waited = yield read(min(WAIT_S, max(0.0, left)))
        except ApiError as exc:
            if exc.status != 404 or clock() - started > VISIBLE_WITHIN_S or clock() >= deadline:
                raise
            yield Sleep(min(pace, max(0.0, deadline - clock())))
            pace = min(2 * pace, 2.0)
            continue
        if on_change is not None:
            on_change(view)
        if ended(view):
            return view
        if clock() >= deadline:
            raise WaitTimeout(f"waiting for {what}", None, f"it did not end within {timeout_s:g} s; it goes on on"
                              " the server")  # fmt: skip
        if not waited:  # an API that does not hold reads: pace them
            yield Sleep(min(pace, max(0.0, deadline - clock())))
            pace = min(2 * pace, 2.0)
