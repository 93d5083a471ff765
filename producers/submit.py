"""Turning a client's request into a ``JobQueued`` on the log, or a reason it cannot be."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from dataclasses import dataclass
from typing import Any, Final

import structlog
from pydantic import BaseModel, ConfigDict, Field

from contracts import (
    AudioRef,
    InvalidRequest,
    JobQueued,
    JobQueuedPayload,
    Priority,
    Producer,
    SynthesisRequest,
    derive_event_id,
    normalize_text,
    utc_now,
)
from contracts.request_text import first_refused_character
from contracts.voices import canonical_voice, parse_voice_spec
from foundation import audio_formats
from foundation.blobs import BlobStore
from foundation.errors import BrokerUnavailable, PublishUnconfirmed
from producers.admission import Admission
from producers.errors import Rejected
from producers.ports import JobLog
from producers.queries import EngineVoices, ProjectionReader, ProjectionUnavailable

log = structlog.get_logger("voxlog.api")
IDEMPOTENCY_NAMESPACE: Final = uuid.UUID("0b8f6d1e-5a3c-4f0e-9d57-3f1c2a9e8b40")


class SpeechOptions(BaseModel):
    """How to speak a text: the fields a job's request and a document's parts share."""

    model_config = ConfigDict(extra="forbid")

    voice: str = Field(description="A voice from GET /v1/voices.")
    speed: float = Field(1.0, description="Speed factor, VOXLOG_MIN_SPEED to VOXLOG_MAX_SPEED (0.5 to 2.0).")
    lang: str = Field("en-us", description="Language of the text: en-us or en-gb.")
    format: str = Field("wav", description="Audio format: wav, flac, ogg, opus, mp3 or pcm.")
    sample_rate: int = Field(24000, description="Output sample rate: 16000, 22050, 24000, 44100 or 48000.")
    engine: str | None = Field(None, description="Engine; VOXLOG_DEFAULT_ENGINE when omitted.")
    normalize: bool = Field(
        True,
        description="Spell out numbers, dates, times, money, units, ... before G2P ('$5' is read 'five dollars');"
        " false: the text goes to G2P as written.",
    )


class JobRequest(SpeechOptions):
    """POST /v1/jobs body."""

    text: str = Field(description="What to say; whitespace is folded, at most VOXLOG_MAX_TEXT_CHARS characters.")
    priority: Priority = Field(
        "interactive",
        description="interactive (the default here and for /v1/audio/speech) or batch (the default of"
        " /v1/batches): workers take interactive jobs first, and a batch job after every few.",
    )


@dataclass(frozen=True)
class Limits:
    max_text_chars: int
    min_speed: float
    max_speed: float
    default_engine: str
    max_batch: int = 10_000
    job_retention_s: float = 86400.0
    max_document_chars: int = 2_000_000
    document_part_chars: int = 1500


def validate(body: JobRequest, limits: Limits, engines: list[EngineVoices]) -> SynthesisRequest:
    """The normalized request, or :class:`Rejected` saying what to fix."""
    refused = first_refused_character(body.text)
    if refused is not None:
        raise Rejected(f"text contains {refused.describe()}; remove it (control characters have no sound)")
    text = normalize_text(body.text)
    if not text:
        raise Rejected("text is empty (after folding whitespace and removing invisible characters)")
    if len(text) > limits.max_text_chars:
        raise Rejected(f"text has {len(text)} characters; the limit is {limits.max_text_chars}: split it", 413)
    if not limits.min_speed <= body.speed <= limits.max_speed:
        raise Rejected(f"speed {body.speed} is outside [{limits.min_speed}, {limits.max_speed}]")
    try:
        fmt, rate = audio_formats.check(body.format, body.sample_rate)
    except audio_formats.UnsupportedAudio as exc:
        raise Rejected(str(exc)) from exc
    engine_name = (body.engine or limits.default_engine).strip().lower()
    engine = next((e for e in engines if e.engine == engine_name), None)
    if engine is None:
        known = ", ".join(e.engine for e in engines)
        if not known:
            raise Rejected("no speech worker has announced itself yet; start `voxlog worker` and retry", 503)
        raise Rejected(f"engine {engine_name!r} has no worker; known engines: {known}")
    lang = body.lang.strip().lower()
    if lang not in engine.languages:
        raise Rejected(
            f"lang {body.lang!r} is not supported by {engine_name}; use one of: {', '.join(engine.languages)}"
        )
    try:
        voice = canonical_voice(body.voice)
        parts = parse_voice_spec(voice)
    except InvalidRequest as exc:
        raise Rejected(str(exc)) from exc
    unknown = [name for name, _ in parts if name not in engine.voices]
    if unknown:
        raise Rejected(f"voice {unknown[0]!r} is unknown to {engine_name}; known voices: {', '.join(engine.voices)}")
    return SynthesisRequest(
        text=text,
        voice=voice,
        speed=body.speed,
        lang=lang,
        engine=engine_name,
        model_version=engine.model_version,
        format=fmt,
        sample_rate=rate,
        normalize=body.normalize,
    )


MAX_IDEMPOTENCY_KEY: Final = 200


def scoped_key(idempotency_key: str, authorization: str | None) -> str:
    """The key as the log records it: scoped to the client that sent it.

    Two clients that pick the same key are two keys: the scope is a hash of the
    request's ``Authorization`` header (``anon`` without one). The scoped key,
    not the client's alone, is what ``jobs.idempotency_key`` holds.
    """
    if len(idempotency_key) > MAX_IDEMPOTENCY_KEY:
        raise Rejected(f"Idempotency-Key has {len(idempotency_key)} characters; the limit is {MAX_IDEMPOTENCY_KEY}")
    refused = first_refused_character(idempotency_key)
    if refused is not None or not idempotency_key.strip():
        raise Rejected(
            "Idempotency-Key must be printable text" + (f": it contains {refused.describe()}" if refused else "")
        )
    scope = "anon" if not authorization else "c" + hashlib.sha256(authorization.encode()).hexdigest()[:16]
    return f"{scope}/{idempotency_key}"


def job_id_for(key: str | None, fingerprint: str) -> uuid.UUID:
    """A retry with the same (scoped) key and the same request names the same job; otherwise a new one.

    The fingerprint is part of the name, so a key reused with another request never names the
    first request's job, even before the projection shows that job (the API answers 409 once it does).
    """
    return uuid.uuid5(IDEMPOTENCY_NAMESPACE, f"{key}\n{fingerprint}") if key else uuid.uuid4()


def queued_event(
    request: SynthesisRequest,
    job_id: uuid.UUID,
    idempotency_key: str | None,
    producer: Producer,
    priority: Priority = "interactive",
) -> JobQueued:
    now = utc_now()
    return JobQueued(
        event_id=derive_event_id(job_id, "JobQueued", 0),
        job_id=job_id,
        fingerprint=request.fingerprint(),
        attempt=0,
        occurred_at=now,
        producer=producer,
        payload=JobQueuedPayload(request=request, idempotency_key=idempotency_key, submitted_at=now, priority=priority),
    )


@dataclass(frozen=True)
class Accepted:
    """Where a submission ended: a job on the log, or a finished job that already answers it."""

    job_id: uuid.UUID
    fingerprint: str
    finished: dict[str, Any] | None = None
    known: dict[str, Any] | None = None


async def enqueue(
    body: JobRequest,
    key: str | None,
    *,
    reader: ProjectionReader,
    publisher: JobLog,
    limits: Limits,
    producer: Producer,
    blobs: BlobStore,
    admission: Admission | None = None,
) -> Accepted:
    """Validate, answer from the cache or a previous submission, else publish ``JobQueued``.

    A cached result is handed out only once its blobs are marked used (touched): the sweeper then keeps
    them for the retention, and a result whose blobs are already gone is synthesized afresh.

    ``key`` is the scoped idempotency key (:func:`scoped_key`). Raises
    :class:`Rejected` for bad input (409 when the key named another request)
    and ``BrokerUnavailable`` when the log cannot take the job (nothing is
    recorded then).
    """
    synthesis = validate(body, limits, await reader.engines())
    fingerprint = synthesis.fingerprint()
    try:
        if key is not None and (earlier := await reader.job_by_key(key)) is not None:
            if earlier["fingerprint"] != fingerprint:
                raise Rejected(
                    f"this Idempotency-Key was used for another request (job {earlier['job_id']}); "
                    "send a new key with a new request",
                    409,
                )
            return Accepted(earlier["job_id"], fingerprint, known=earlier)
        cached = await reader.cached_job_id(fingerprint)
        if cached is not None and (done := await reader.job(cached)) is not None:
            refs = [AudioRef(sha256=s["audio_sha256"], uri=s["audio_uri"]) for s in done["segments"]]
            if await asyncio.to_thread(blobs.touch, refs):
                return Accepted(cached, fingerprint, finished=done)
    except ProjectionUnavailable as exc:
        # The read side is down, the log is not: take the job. A retry with the same key still names
        # the same job (the id comes from the key and the request), and the worker coalesces a duplicate.
        log.warning("submitting without the projection", error=str(exc))
    if admission is not None:
        await admission.admit([fingerprint], len(synthesis.text))
    job_id = job_id_for(key, fingerprint)
    await publisher.publish(queued_event(synthesis, job_id, key, producer, body.priority))
    return Accepted(job_id, fingerprint)


async def still_stored(blobs: BlobStore, found: dict[str, tuple[uuid.UUID, list[AudioRef]]]) -> dict[str, uuid.UUID]:
    """Of the live results ``found`` (by fingerprint), those whose blobs are all still stored, each marked
    used now (see :func:`enqueue`); in one hop off the event loop."""

    def touched() -> dict[str, uuid.UUID]:
        return {fingerprint: job_id for fingerprint, (job_id, refs) in found.items() if blobs.touch(refs)}

    return await asyncio.to_thread(touched) if found else {}


def unavailable_message(exc: BrokerUnavailable) -> str:
    """What a client should know when the log did not take its job, and how to retry safely."""
    if isinstance(exc, PublishUnconfirmed):
        return (
            f"the job log did not confirm the job in time ({exc}); it may still be recorded. Retry with the "
            "same Idempotency-Key, so that the retry and this attempt name one job"
        )
    return f"the job log is unreachable, nothing was accepted ({exc}); retry later, with the same Idempotency-Key"
