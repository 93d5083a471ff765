"""The blocking client: :mod:`voxlog.client.operations` carried out with ``httpx.Client`` and ``time.sleep``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from producers.views import (
    BatchAccepted,
    CancelView,
    DocumentCancelView,
    DocumentView,
    JobAccepted,
    JobHistoryView,
    JobView,
    TocView,
)
from voxlog.client import operations as ops
from voxlog.client.options import ClientOptions
from voxlog.client.protocol import ApiError, RetryPolicy, Send, Sleep, exchange


class Client:
    """voxlog's API, with the retry protocol built in. ``Client(base_url, api_key=...)``, as a context manager.

    ``transport`` replaces the network (``httpx.MockTransport`` in tests)."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        options = ClientOptions(base_url, api_key, timeout_s, retry or RetryPolicy(), headers or {})
        self.retry = options.retry
        self._http = httpx.Client(transport=transport, **options.httpx_kwargs())

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # Submitting
    def submit_job(self, text: str, voice: str, *, idempotency_key: str | None = None, **fields: Any) -> JobAccepted:
        """``POST /v1/jobs``: other fields (``speed``, ``format``, ``input_format``...) as keywords."""
        return self.run(ops.submit_job(text, voice, idempotency_key, fields))

    def submit_batch(
        self, requests: Sequence[Mapping[str, Any]], *, idempotency_key: str | None = None
    ) -> BatchAccepted:
        return self.run(ops.submit_batch(requests, idempotency_key))

    def submit_document(
        self, source: str | Path, *, voice: str | None = None, idempotency_key: str | None = None, **fields: Any
    ) -> ops.DocumentSubmitted:
        """A text (``str``) or a file (``Path``: EPUB, Markdown, plain text); ``replayed`` when the key named a
        document submitted before."""
        return self.run(ops.submit_document(source, voice, idempotency_key, fields))

    def speech(self, input: str, voice: str, *, idempotency_key: str | None = None, **fields: Any) -> bytes:
        """OpenAI's ``POST /v1/audio/speech`` (``model``, ``response_format``, ``speed``... as keywords)."""
        return self.run(ops.speech({"input": input, "voice": voice, **fields}, idempotency_key, stream=False))

    def stream_speech(
        self, input: str, voice: str, *, idempotency_key: str | None = None, **fields: Any
    ) -> Iterator[bytes]:
        """The speech as it is made: chunks of the format asked for (retried until its first byte)."""
        call = ops.speech({"input": input, "voice": voice, **fields}, idempotency_key, stream=True)
        response = self._open(call)
        try:
            yield from response.iter_bytes()
        except httpx.TransportError as exc:
            raise ApiError("speech", None, f"the stream broke ({type(exc).__name__}: {exc})") from exc
        finally:
            response.close()

    # Reading and waiting
    def voices(self) -> dict[str, Any]:
        return self.run(ops.voices())

    def job(self, job_id: uuid.UUID | str) -> JobView:
        return self.run(ops.job(job_id))[0]

    def wait(self, job_id: uuid.UUID | str, *, timeout_s: float = 600.0) -> JobView:
        """The job once it ended (completed, failed or cancelled): reads the API holds until it changes."""
        return self.run(ops.wait_job(job_id, timeout_s))

    def events(self, job_id: uuid.UUID | str) -> JobHistoryView:
        """The job's history from the log (``GET /v1/jobs/{id}/events``): its events, attempts, time per state."""
        return self.run(ops.events(job_id))

    def document(self, document_id: uuid.UUID | str, *, wait_s: float | None = None) -> DocumentView:
        """The document's progress; with ``wait_s``, once a part changed state (or that long)."""
        return self.run(ops.document(document_id, wait_s))[0]

    def wait_document(self, document_id: uuid.UUID | str, *, timeout_s: float = 3600.0) -> DocumentView:
        return self.run(ops.wait_document(document_id, timeout_s))

    # Audio and captions
    def audio(self, job_id: uuid.UUID | str) -> bytes:
        return self.run(ops.fetch(ops.audio_url(job_id), f"audio of job {job_id}"))

    def download(self, url: str, dest: Path, *, params: Mapping[str, str] | None = None) -> Path:
        """Stream ``url`` (a link of a job or document) into ``dest``, through ``dest.part``."""
        self.run(ops.fetch(url, f"GET {url}", dest, params))
        return dest

    def captions(
        self,
        job_id: uuid.UUID | str | None = None,
        fmt: ops.CaptionFormat = "srt",
        *,
        document_id: uuid.UUID | str | None = None,
        chapter: int | None = None,
    ) -> str:
        """A job's captions, or a document's (``document_id``), or one of its chapters' (and ``chapter``)."""
        return self.run(ops.captions(job_id, fmt, document_id=document_id, chapter=chapter))

    def toc(self, document_id: uuid.UUID | str) -> TocView:
        """A completed document's table of contents: each chapter's start and length in its whole audio."""
        return self.run(ops.toc(document_id))

    def speak(self, text: str, voice: str, *, timeout_s: float = 600.0, **fields: Any) -> bytes:
        """Submit, wait, download: the audio of ``text``, or :class:`ApiError` saying why there is none."""
        accepted = self.submit_job(text, voice, **fields)
        ended = self.wait(accepted.job_id, timeout_s=timeout_s)
        if ended.state.value != "completed":
            error = ended.error.message if ended.error else None
            raise ApiError(f"job {ended.job_id}", None, f"it ended {ended.state.value}: {error or 'no reason given'}")
        return self.audio(ended.job_id)

    # Cancelling
    def cancel(self, job_id: uuid.UUID | str) -> CancelView:
        return self.run(ops.cancel(job_id))

    def cancel_document(self, document_id: uuid.UUID | str) -> DocumentCancelView:
        return self.run(ops.cancel_document(document_id))

    # Carrying operations out
    def run(self, step: ops.Call[Any] | ops.Program[Any]) -> Any:
        """One call, or a program of calls and sleeps, to its end."""
        if isinstance(step, ops.Call):
            return self._call(step)
        program, result = step, None
        thrown: ApiError | None = None
        while True:
            try:
                action = program.throw(thrown) if thrown is not None else program.send(result)
            except StopIteration as done:
                return done.value
            thrown, result = None, None
            if isinstance(action, Sleep):
                time.sleep(action.seconds)
                continue
            try:
                result = self._call(action)
            except ApiError as exc:
                thrown = exc

    def _call(self, call: ops.Call[Any]) -> Any:
        return call.parse(self._exchange(call, stream=False))

    def _open(self, call: ops.Call[Any]) -> httpx.Response:
        return self._exchange(call, stream=True)

    def _exchange(self, call: ops.Call[Any], *, stream: bool) -> httpx.Response:
        request = call.request(self._http)
        steps = exchange(request, self.retry, call.what, ok=call.ok)
        outcome: httpx.Response | httpx.TransportError | None = None
        while True:
            try:
                step = steps.send(outcome)
            except StopIteration as done:
                response: httpx.Response = done.value
                return response
            if isinstance(step, Sleep):
                time.sleep(step.seconds)
                outcome = None
                continue
            outcome = self._send(step, call, stream)

    def _send(self, step: Send, call: ops.Call[Any], stream: bool) -> httpx.Response | httpx.TransportError:
        """One attempt: an answer (its body read, or into ``call.sink``, or left open for a stream), or the
        missing answer's error."""
        try:
            response = self._http.send(step.request, stream=stream or call.sink is not None)
            if call.sink is not None:
                try:
                    _into(response, call.sink, call.ok)
                finally:
                    response.close()
            elif stream and response.status_code not in call.ok:
                response.read()
                response.close()
            return response
        except httpx.TransportError as exc:
            return exc


def _into(response: httpx.Response, sink: Path, ok: frozenset[int]) -> None:
    if response.status_code not in ok:
        response.read()
        return
    partial = sink.with_name(sink.name + ".part")
    with partial.open("wb") as out:
        for chunk in response.iter_bytes():
            out.write(chunk)
    partial.replace(sink)
