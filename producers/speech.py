"""POST /v1/audio/speech, compatible with OpenAI's speech API (its published document, kept in
``tests/fixtures/openai/speech_openapi.json``, is what ``tests/e2e/test_openai_conformance.py`` checks).

The request becomes an ordinary job (same validation, fingerprint, cache and log). Like OpenAI's endpoint
and Kokoro-FastAPI, the answer streams by default: the body (chunked, with the format's Content-Type) grows
segment by segment as the projection shows them, one encoder making the whole answer
(``foundation.stream_encoders``) for every format that can be sent that way (``pcm``, ``wav`` with a
header whose sizes say "unknown", ``mp3``, ``aac``); ``flac``, ``opus`` and ``ogg`` are answered whole once the job
completes, as is any format when the request says ``"stream": false`` (Kokoro-FastAPI's field).
``stream_format="audio"`` (OpenAI's default) is the same raw body; ``stream_format="sse"`` streams OpenAI's
events (:mod:`producers.speech_events`). Either way the handler waits for the job up to
VOXLOG_SPEECH_TIMEOUT_S.

OpenAI's voice names are served by the voices VOXLOG_OPENAI_VOICES maps them to; ``instructions`` are read
for a speed and a voice (:mod:`producers.speech_instructions`) and what could not be mapped is reported in
``X-Voxlog-Instructions``; ``X-Voxlog-Voice`` names the voice that speaks, ``X-Voxlog-Job-Id`` the job.

What goes wrong before the first audio is an HTTP error (the job failed, did not finish in time, its status
or first segment cannot be read); a job that fails after some audio cuts the body off instead of ending it
as if whole. Errors use OpenAI's shape and codes (:mod:`producers.openai_errors`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

from litestar import Request, Response, post
from litestar.params import JSONBody
from litestar.response import ServerSentEvent, Stream
from pydantic import BaseModel, ConfigDict, Field

from contracts import InvalidRequest, JobState
from contracts.ssml import InputFormat
from contracts.voices import parse_voice_spec
from foundation.audio_formats import media_type, streamable
from foundation.blobs import BlobNotFound, BlobStore
from foundation.settings import OPENAI_VOICES as DEFAULT_OPENAI_VOICES
from producers.api_keys import Principal
from producers.audio_out import Audible, StreamEnd, audio_stream, render, segments_as_they_appear
from producers.auth import SUBMIT
from producers.cancel import cancelled_when_abandoned
from producers.deps import ApiDeps, Injected
from producers.errors import ProducerError
from producers.job_routes import IdempotencyKey, submit_one
from producers.openai_errors import OPENAI_ERRORS, OPENAI_HANDLERS, SpeechFailed
from producers.openapi_docs import SpeechOperation
from producers.requests import JobRequest, Limits
from producers.speech_events import speech_events
from producers.speech_instructions import HEADER as INSTRUCTIONS_HEADER
from producers.speech_instructions import header_value, read_instructions
from producers.stream_guard import closed_at_end
from producers.unreachable import unreachable
from projections.errors import ProjectionUnavailable
from projections.reads.jobs import ProjectionReader
from projections.reads.rows import JobRecord

__all__ = ["OPENAI_ERRORS", "OPENAI_HANDLERS", "SpeechFailed", "SpeechRequest", "job_request", "whole_audio"]

OPENAI_VOICES: Final = frozenset(DEFAULT_OPENAI_VOICES)
OPENAI_MODELS: Final = frozenset({"tts-1", "tts-1-hd", "gpt-4o-mini-tts", "gpt-4o-mini-tts-2025-12-15"})

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
    instructions: str | None = Field(None, max_length=4096)
    response_format: str = "mp3"
    speed: float = 1.0
    stream_format: Literal["sse", "audio"] | None = None
    # Kokoro-FastAPI's switch: false answers with the whole file once the job completes.
    stream: bool = True
    normalization_options: NormalizationOptions | None = None
    # voxlog's: words said as given phonemes (docs/ssml.md, Pronunciation), winning over the server's lexicon
    pronunciations: dict[str, str] | None = None


def served_voice(spec: str | dict[str, str], deps: ApiDeps, voices: Sequence[str]) -> str:
    """The voice that speaks for ``spec``: the engine's own voice of that name; for an OpenAI voice name, the
    voice VOXLOG_OPENAI_VOICES maps it to if the engine has it (every part of a mix), else
    VOXLOG_OPENAI_DEFAULT_VOICE, else the first announced voice; anything else as given (validation then
    says it is unknown, listing the known ones)."""
    name = spec.get("id", "") if isinstance(spec, dict) else spec
    if name in voices or name not in OPENAI_VOICES:
        return name
    mapped = deps.openai_voices.get(name, "")
    try:
        if mapped and all(part in voices for part, _ in parse_voice_spec(mapped)):
            return mapped
    except InvalidRequest:
        pass  # a mapping that is not a voice spec serves no one: the default voice does
    return deps.openai_default_voice or (voices[0] if voices else name)


@dataclass(frozen=True)
class Prepared:
    """The job a speech request becomes, and the headers that tell how it was read."""

    job: JobRequest
    headers: dict[str, str]


async def prepare(speech: SpeechRequest, deps: ApiDeps) -> Prepared:
    engines = await deps.reader.engines()
    engine = speech.model if any(e.engine == speech.model for e in engines) else None
    if engine is None and speech.model not in OPENAI_MODELS:
        known = ", ".join(sorted(OPENAI_MODELS | {e.engine for e in engines}))
        raise SpeechFailed(
            404, f"model {speech.model!r} is unknown; use one of: {known}", param="model", code="model_not_found"
        )
    if speech.stream_format == "sse" and not speech.stream:
        raise SpeechFailed(
            400,
            'stream_format "sse" streams; it cannot be combined with "stream": false',
            param="stream",
            code="invalid_value",
        )
    voices = next((e.voices for e in engines if e.engine == (engine or deps.limits.default_engine)), ())
    voice, speed, headers = speech.voice, speech.speed, dict[str, str]()
    if speech.instructions and speech.instructions.strip():
        steering = read_instructions(speech.instructions, voices, OPENAI_VOICES)
        voice = steering.voice or voice
        speed, clamped = _steered_speed(speech.speed, steering.speed_factor, deps.limits)
        headers[INSTRUCTIONS_HEADER] = header_value(steering, speed if steering.speed_factor != 1 else None, clamped)
    served = served_voice(voice, deps, voices)
    headers["X-Voxlog-Voice"] = served
    job = JobRequest(
        text=speech.input,
        input_format=speech.input_format,
        voice=served,
        speed=speed,
        format=speech.response_format,
        engine=engine,
        normalize=speech.normalization_options.normalize if speech.normalization_options else True,
        pronunciations=speech.pronunciations,
    )
    return Prepared(job=job, headers=headers)


def _steered_speed(speed: float, factor: float, limits: Limits) -> tuple[float, bool]:
    """The request's speed times the instructions' factor, held to the accepted range (``True`` when it
    was). A request whose own speed is out of range keeps it, to be refused for it."""
    if factor == 1.0 or not limits.min_speed <= speed <= limits.max_speed:
        return speed, False
    wanted = round(speed * factor, 4)
    held = min(max(wanted, limits.min_speed), limits.max_speed)
    return held, held != wanted


async def job_request(speech: SpeechRequest, deps: ApiDeps) -> JobRequest:
    """The job a speech request becomes (:func:`prepare`, without its headers)."""
    return (await prepare(speech, deps)).job


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
    prepared = await prepare(data, deps)
    body = prepared.job
    answered = await submit_one(deps.submissions, body, idempotency_key, principal, request)
    job_id, fingerprint = answered.job_id, answered.fingerprint
    headers = {**prepared.headers, "X-Voxlog-Job-Id": str(job_id)}
    try:
        return await _answer(deps, data, job_id, fingerprint, body.format.strip().lower(), body.sample_rate, headers)
    except ProjectionUnavailable as exc:
        said = unreachable("postgres", exc, path=request.url.path, job_id=str(job_id))
        raise SpeechFailed(503, f"job {job_id} was accepted, but its status cannot be read ({said})") from exc


async def _answer(
    deps: ApiDeps,
    speech: SpeechRequest,
    job_id: uuid.UUID,
    fingerprint: str,
    fmt: str,
    rate: int,
    headers: Mapping[str, str],
) -> Response[bytes] | Stream:
    """The accepted job's audio: as server-sent events, streamed as segments appear, or whole."""
    if speech.stream_format == "sse":
        end = StreamEnd()
        segments = closed_at_end(_segments_as_projected(deps, job_id, end))
        events = closed_at_end(speech_events(deps.blobs, segments, end, job_id, fmt, rate, speech.input))
        return ServerSentEvent(events, headers=dict(headers))
    if speech.stream and streamable(fmt):
        return await _streamed(deps, job_id, fingerprint, fmt, rate, headers)
    _, audio = await whole_audio(deps, job_id, fmt, rate)
    return Response(audio, media_type=media_type(fmt, rate), headers=dict(headers))


async def whole_audio(deps: ApiDeps, job_id: uuid.UUID, fmt: str, rate: int) -> tuple[JobRecord, bytes]:
    """The job once it completed, and its whole audio; :class:`SpeechFailed` when it does not complete in time."""
    job = await _wait_finished(deps, job_id)
    if job is None:
        raise SpeechFailed(504, f"job {job_id} did not finish within {deps.speech_timeout_s:.0f}s")
    if job.state is not JobState.COMPLETED:
        status = 400 if job.error_code == "input_rejected" else 500
        raise SpeechFailed(status, job.error_message or f"job {job_id} is {job.state.value}", code=job.error_code)
    try:
        return job, await render(deps.blobs, job.segments, fmt, rate)
    except (BlobNotFound, ValueError) as exc:
        raise SpeechFailed(500, f"audio of job {job_id} is gone: {exc}") from exc


async def _wait_finished(deps: ApiDeps, job_id: uuid.UUID) -> JobRecord | None:
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


async def _streamed(
    deps: ApiDeps, job_id: uuid.UUID, fingerprint: str, fmt: str, rate: int, headers: Mapping[str, str]
) -> Stream:
    """The body as segments are projected. It starts only once the first segment is encoded, so that
    what fails before any audio still gets its status code. A client that leaves mid-stream cancels the
    job, unless another request waits for the same audio (:mod:`producers.cancel`)."""
    end = StreamEnd()
    segments = closed_at_end(_segments_as_projected(deps, job_id, end))
    first = await anext(segments, None)
    if first is None:  # the job ended without audio, or not in time: the status can still say so
        raise _stream_failed(job_id, end)
    chunks = closed_at_end(_raw_stream(deps.blobs, fmt, rate, _chain([first], segments), end))
    try:
        opening = [await anext(chunks)]  # the header, if the format has one, and the first segment's audio
    except (BlobNotFound, ValueError) as exc:
        raise SpeechFailed(500, f"audio of job {job_id} is gone: {exc}") from exc
    body = closed_at_end(cancelled_when_abandoned(deps, job_id, fingerprint, _chain(opening, chunks)))
    return Stream(body, media_type=media_type(fmt, rate), headers=dict(headers))


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
    """One encoder's stream of ``segments`` (``audio_out.audio_stream``): its first piece carries the
    format's header, if it has one, with the first segment's audio."""
    async for chunk in audio_stream(blobs, segments, fmt, rate):
        yield chunk
    if not end.completed:
        # Headers and audio are out: what is left is to not end the body as if it were whole. The
        # server aborts the connection, and the client sees an incomplete response, not a short file.
        raise StreamBroken(f"the job ended {end.state} after some audio: {end.error}")
