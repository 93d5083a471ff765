"""POST /v1/audio/speech, compatible with OpenAI's speech API.

The request becomes an ordinary job (same validation, fingerprint, cache and
log). Like OpenAI's endpoint and Kokoro-FastAPI, the answer streams by
default: the body (chunked, with the format's Content-Type) grows segment by
segment as the projection shows them, for every format that can be sent that
way (``foundation.audio_formats.STREAMABLE``: ``pcm``; ``wav`` with a header
whose sizes say "unknown"; ``mp3`` as constant-bitrate frames without
per-segment LAME tags). ``flac``, ``ogg`` and ``opus`` cannot be joined from
per-segment encodes, so they are answered whole once the job completes, as is
any format when the request says ``"stream": false`` (Kokoro-FastAPI's
field). ``stream_format="audio"`` (OpenAI's default) is the same raw body;
``stream_format="sse"`` streams OpenAI's ``speech.audio.delta`` events, each
a whole file of one segment. Either way the handler waits for the job up to
VOXLOG_SPEECH_TIMEOUT_S.

What goes wrong before the first audio is an HTTP error (the job failed, did
not finish in time, its status or first segment cannot be read); a job that
fails after some audio cuts the body off instead of ending it as if whole.
Errors use OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``,
from this route's own exception handlers. ``instructions`` is accepted and
ignored (Kokoro has no steering prompt).
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from typing import Any, Final, Literal, TypeVar

from litestar import Request, Response, post
from litestar.exceptions import HTTPException
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import JSONBody
from litestar.response import ServerSentEvent, Stream
from litestar.types import ExceptionHandlersMap
from pydantic import BaseModel, ConfigDict, Field

from contracts import JobState
from contracts.ssml import InputFormat
from foundation.audio_formats import encode, media_type, stream_header, streamable
from foundation.blobs import BlobNotFound, BlobStore
from foundation.errors import BrokerUnavailable
from producers.api_keys import Principal
from producers.audio_out import Audible, StreamEnd, audio_stream, render, segment_samples, segments_as_they_appear
from producers.auth import SUBMIT
from producers.cancel import cancelled_when_abandoned
from producers.deps import ApiDeps, Injected
from producers.errors import ProducerError, Rejected
from producers.http_errors import RETRY, broker_message
from producers.job_routes import IdempotencyKey, submit_one
from producers.openapi_docs import SpeechOperation
from producers.queries import ProjectionReader, ProjectionUnavailable
from producers.requests import JobRequest
from producers.rows import JobRow

OPENAI_VOICES: Final = frozenset(
    {"alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer", "verse", "marin", "cedar"}
)
OPENAI_MODELS: Final = frozenset({"tts-1", "tts-1-hd", "gpt-4o-mini-tts"})

T = TypeVar("T")


class NormalizationOptions(BaseModel):
    """Kokoro-FastAPI's text normalization switches: ``normalize`` turns voxlog's rules off or on; its finer
    switches (units, URLs, ...) have no counterpart and are accepted without effect."""

    model_config = ConfigDict(extra="ignore")

    normalize: bool = True


class SpeechRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    input: str = Field(min_length=1)
    input_format: InputFormat | None = None  # voxlog's: text or ssml (a leading <speak is SSML when omitted)
    voice: str | dict[str, str]
    instructions: str | None = None
    response_format: str = "mp3"
    speed: float = 1.0
    stream_format: Literal["sse", "audio"] | None = None
    # Kokoro-FastAPI's switch: false answers with the whole file once the job completes.
    stream: bool = True
    normalization_options: NormalizationOptions | None = None


class OpenAIError(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class OpenAIErrorBody(BaseModel):
    error: OpenAIError


class SpeechFailed(ProducerError):
    """What the route answers in OpenAI's error shape: the job failed, timed out, or its audio is gone."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.param, self.code = status, param, code


def openai_error(
    status: int,
    message: str,
    *,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> Response[OpenAIErrorBody]:
    kind = "invalid_request_error" if status < 500 else "server_error"
    body = OpenAIErrorBody(error=OpenAIError(message=message, type=kind, param=param, code=code))
    return Response(body, status_code=status, headers=headers)


def _failed(_: Request[Any, Any, Any], exc: SpeechFailed) -> Response[OpenAIErrorBody]:
    return openai_error(exc.status, str(exc), param=exc.param, code=exc.code)


def _rejected(_: Request[Any, Any, Any], exc: Rejected) -> Response[OpenAIErrorBody]:
    headers = exc.headers()
    if exc.status == 429:  # OpenAI's own status for "slow down", with its code
        return openai_error(429, str(exc), code="rate_limit_exceeded", headers=headers)
    # OpenAI answers every invalid request with 400, whatever our own API would say.
    return openai_error(400 if exc.status < 500 else exc.status, str(exc), headers=headers)


def _bad_body(_: Request[Any, Any, Any], exc: HTTPException) -> Response[OpenAIErrorBody]:
    """Litestar's refusal of the body: fields that do not validate (named), or a body that is not JSON. The
    door's answers come here too (401, 403, 429: :mod:`producers.auth`), and a body over the route's size (413):
    those keep their own message and headers (WWW-Authenticate, Retry-After)."""
    if exc.status_code != 400:
        code = "rate_limit_exceeded" if exc.status_code == 429 else None
        return openai_error(exc.status_code, exc.detail, code=code, headers=exc.headers)
    extra = exc.extra if isinstance(exc.extra, list) and exc.extra else None
    if extra is None:
        return openai_error(exc.status_code, f"the request body is not valid JSON: {exc.detail}")
    first = extra[0] if isinstance(extra[0], dict) else {}
    param = str(first["key"]) if first.get("key") else None
    return openai_error(400, f"invalid request: {first.get('message', exc.detail)}", param=param)


def _no_projection(_: Request[Any, Any, Any], exc: ProjectionUnavailable) -> Response[OpenAIErrorBody]:
    return openai_error(503, f"PostgreSQL is unreachable: {exc}", headers=RETRY)


def _no_log(_: Request[Any, Any, Any], exc: BrokerUnavailable) -> Response[OpenAIErrorBody]:
    return openai_error(503, broker_message(exc), headers=RETRY)


def _voice(spec: str | dict[str, str], default_voice: str, voices: tuple[str, ...]) -> str:
    name = spec.get("id", "") if isinstance(spec, dict) else spec
    if name in OPENAI_VOICES and name not in voices:
        # OpenAI's voice names are not Kokoro's: serve them with the configured (or first) voice.
        return default_voice or (voices[0] if voices else name)
    return name


async def job_request(speech: SpeechRequest, deps: ApiDeps) -> JobRequest:
    engines = await deps.reader.engines()
    engine = speech.model if any(e.engine == speech.model for e in engines) else None
    if engine is None and speech.model not in OPENAI_MODELS:
        known = ", ".join(sorted(OPENAI_MODELS | {e.engine for e in engines}))
        raise SpeechFailed(400, f"model {speech.model!r} is unknown; use one of: {known}", param="model")
    if speech.stream_format == "sse" and not speech.stream:
        raise SpeechFailed(
            400, 'stream_format "sse" streams; it cannot be combined with "stream": false', param="stream"
        )
    voices = next((e.voices for e in engines if e.engine == (engine or deps.limits.default_engine)), ())
    return JobRequest(
        text=speech.input,
        input_format=speech.input_format,
        voice=_voice(speech.voice, deps.openai_default_voice, voices),
        speed=speech.speed,
        format=speech.response_format,
        engine=engine,
        normalize=speech.normalization_options.normalize if speech.normalization_options else True,
    )


OPENAI_HANDLERS: Final[ExceptionHandlersMap] = {
    SpeechFailed: _failed,
    Rejected: _rejected,
    HTTPException: _bad_body,
    ProjectionUnavailable: _no_projection,
    BrokerUnavailable: _no_log,
}
"""The OpenAI-shaped answers of what goes wrong, for this route and those that follow its shape."""

OPENAI_ERRORS: Final = {
    status: ResponseSpec(OpenAIErrorBody, description=description)
    for status, description in {
        400: "Invalid request (OpenAI's status for every invalid request), or the job could not be spoken.",
        401: "No API key, or not a valid one.",
        403: "The key lacks the submit scope.",
        429: "Over the backlog limit: code rate_limit_exceeded; retry after Retry-After.",
        500: "The job failed, or its audio is gone.",
        503: "Kafka or PostgreSQL is unreachable, or cache-only mode.",
        504: "The job did not finish within VOXLOG_SPEECH_TIMEOUT_S.",
    }.items()
}


@post(
    "/v1/audio/speech",
    summary="OpenAI-compatible speech",
    guards=SUBMIT,
    operation_class=SpeechOperation,
    status_code=200,
    responses=OPENAI_ERRORS,
    exception_handlers=dict(OPENAI_HANDLERS),
)
async def openai_speech(
    data: JSONBody[SpeechRequest],
    deps: Injected[ApiDeps],
    principal: Injected[Principal],
    request: Request[Any, Any, Any],
    idempotency_key: IdempotencyKey = None,
) -> Response[bytes] | Stream:
    body = await job_request(data, deps)
    answered = await submit_one(deps.submissions, body, idempotency_key, principal, request)
    job_id, fingerprint = answered.job_id, answered.fingerprint
    try:
        return await _answer(deps, data, job_id, fingerprint, body.format.strip().lower(), body.sample_rate)
    except ProjectionUnavailable as exc:
        raise SpeechFailed(503, f"job {job_id} was accepted, but its status cannot be read: {exc}") from exc


async def _answer(
    deps: ApiDeps, speech: SpeechRequest, job_id: uuid.UUID, fingerprint: str, fmt: str, rate: int
) -> Response[bytes] | Stream:
    """The accepted job's audio: as server-sent events, streamed as segments appear, or whole."""
    if speech.stream_format == "sse":
        return ServerSentEvent(_sse(deps, job_id, fmt, rate))
    if speech.stream and streamable(fmt):
        return await _streamed(deps, job_id, fingerprint, fmt, rate)
    _, audio = await whole_audio(deps, job_id, fmt, rate)
    return Response(audio, media_type=media_type(fmt, rate), headers={"X-Voxlog-Job-Id": str(job_id)})


async def whole_audio(deps: ApiDeps, job_id: uuid.UUID, fmt: str, rate: int) -> tuple[JobRow, bytes]:
    """The job once it completed, and its whole audio; :class:`SpeechFailed` when it does not complete in time."""
    job = await _wait_finished(deps, job_id)
    if job is None:
        raise SpeechFailed(504, f"job {job_id} did not finish within {deps.speech_timeout_s:.0f}s")
    if job.state is not JobState.COMPLETED:
        status = 400 if job.error_code == "input_rejected" else 500
        raise SpeechFailed(status, job.error_message or f"job {job_id} is {job.state.value}")
    try:
        return job, await render(deps.blobs, job.segments, fmt, rate)
    except (BlobNotFound, ValueError) as exc:
        raise SpeechFailed(500, f"audio of job {job_id} is gone: {exc}") from exc


async def _wait_finished(deps: ApiDeps, job_id: uuid.UUID) -> JobRow | None:
    deadline = time.monotonic() + deps.speech_timeout_s
    with deps.changes.watch(job_id) as changes:
        while time.monotonic() < deadline:
            job = await deps.reader.job(job_id)
            if job is not None and job.ended:
                return job
            await changes.wait()
    return None


async def _segments_as_projected(deps: ApiDeps, job_id: uuid.UUID, end: StreamEnd) -> AsyncIterator[Audible]:
    """Each segment once, in order, as the projection shows it, until the job ends or times out."""
    reader: ProjectionReader = deps.reader
    with deps.changes.watch(job_id) as changes:
        async for segment in segments_as_they_appear(
            lambda since: reader.progress(job_id, since), changes.wait, deps.speech_timeout_s, end
        ):
            yield segment


async def _streamed(deps: ApiDeps, job_id: uuid.UUID, fingerprint: str, fmt: str, rate: int) -> Stream:
    """The body as segments are projected. It starts only once the first segment is encoded, so that
    what fails before any audio still gets its status code. A client that leaves mid-stream cancels the
    job, unless another request waits for the same audio (:mod:`producers.cancel`)."""
    end = StreamEnd()
    segments = _segments_as_projected(deps, job_id, end)
    first = await anext(segments, None)
    if first is None:  # the job ended without audio, or not in time: the status can still say so
        raise _stream_failed(job_id, end)
    chunks = _raw_stream(deps.blobs, fmt, rate, _chain([first], segments), end)
    try:
        # The header, if the format has one, then the first segment's audio.
        opening = [await anext(chunks) for _ in range(2 if stream_header(fmt, rate) else 1)]
    except (BlobNotFound, ValueError) as exc:
        raise SpeechFailed(500, f"audio of job {job_id} is gone: {exc}") from exc
    body = cancelled_when_abandoned(deps, job_id, fingerprint, _chain(opening, chunks))
    return Stream(body, media_type=media_type(fmt, rate), headers={"X-Voxlog-Job-Id": str(job_id)})


async def _chain(first: Iterable[T], rest: AsyncIterator[T]) -> AsyncIterator[T]:
    for item in first:
        yield item
    async for item in rest:
        yield item


def _stream_failed(job_id: uuid.UUID, end: StreamEnd) -> SpeechFailed:
    if end.state == "timeout":
        return SpeechFailed(504, f"job {job_id}: {end.error}")
    status = 400 if end.error_code == "input_rejected" else 500
    return SpeechFailed(status, f"job {job_id} failed: {end.error or 'no audio'}", code=end.error_code or "job_failed")


class StreamBroken(ProducerError):
    """A streamed job failed after its first audio: the response is cut off, not ended as if complete."""


async def _raw_stream(
    blobs: BlobStore, fmt: str, rate: int, segments: AsyncIterator[Audible], end: StreamEnd
) -> AsyncIterator[bytes]:
    if header := stream_header(fmt, rate):
        yield header
    async for chunk in audio_stream(blobs, segments, fmt, rate):
        yield chunk
    if not end.completed:
        # Headers and audio are out: what is left is to not end the body as if it were whole. The
        # server aborts the connection, and the client sees an incomplete response, not a short file.
        raise StreamBroken(f"the job ended {end.state} after some audio: {end.error}")


async def _sse(deps: ApiDeps, job_id: uuid.UUID, fmt: str, rate: int) -> AsyncIterator[str]:
    total_ms = 0
    end = StreamEnd()
    async for segment in _segments_as_projected(deps, job_id, end):
        samples, source_rate = await segment_samples(deps.blobs, segment)
        audio = await asyncio.to_thread(encode, samples, source_rate, fmt, rate)
        total_ms += segment.duration_ms
        yield json.dumps({"type": "speech.audio.delta", "audio": base64.b64encode(audio).decode()})
    if end.completed:
        yield json.dumps({"type": "speech.audio.done", "job_id": str(job_id), "duration_ms": total_ms})
    else:
        code = "timeout" if end.state == "timeout" else "job_failed"
        error = {"message": f"job {job_id}: {end.error or end.state}", "type": "server_error", "code": code}
        yield json.dumps({"type": "error", "job_id": str(job_id), "error": error})
