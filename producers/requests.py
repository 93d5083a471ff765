"""What a client may ask for (the request bodies' speech fields), and when a request is valid."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from contracts import InvalidRequest, Priority, SynthesisRequest, normalize_text
from contracts.request_text import first_refused_character, has_words
from contracts.voices import canonical_voice, parse_voice_spec
from foundation import audio_formats
from producers.errors import Rejected
from producers.rows import EngineVoices


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
    max_record_bytes: int = 1_000_000


def validate(body: JobRequest, limits: Limits, engines: Sequence[EngineVoices]) -> SynthesisRequest:
    """The normalized request, or :class:`Rejected` saying what to fix."""
    text = _text(body.text, limits)
    if not limits.min_speed <= body.speed <= limits.max_speed:
        raise Rejected(f"speed {body.speed} is outside [{limits.min_speed}, {limits.max_speed}]")
    try:
        fmt, rate = audio_formats.check(body.format, body.sample_rate)
    except audio_formats.UnsupportedAudio as exc:
        raise Rejected(str(exc)) from exc
    engine = _engine((body.engine or limits.default_engine).strip().lower(), engines)
    lang = body.lang.strip().lower()
    if lang not in engine.languages:
        raise Rejected(
            f"lang {body.lang!r} is not supported by {engine.engine}; use one of: {', '.join(engine.languages)}"
        )
    return SynthesisRequest(
        text=text,
        voice=_voice(body.voice, engine),
        speed=body.speed,
        lang=lang,
        engine=engine.engine,
        model_version=engine.model_version,
        format=fmt,
        sample_rate=rate,
        normalize=body.normalize,
    )


def _text(written: str, limits: Limits) -> str:
    refused = first_refused_character(written)
    if refused is not None:
        raise Rejected(f"text contains {refused.describe()}; remove it (control characters have no sound)")
    text = normalize_text(written)
    if not text:
        raise Rejected("text is empty (after folding whitespace and removing invisible characters)")
    if len(text) > limits.max_text_chars:
        raise Rejected(f"text has {len(text)} characters; the limit is {limits.max_text_chars}: split it", 413)
    if not has_words(text):
        raise Rejected(
            "text has nothing to speak: it needs at least one word or number, not only punctuation, symbols or"
            " emoji (a scene break such as '* * *' is a pause inside a document, POST /v1/documents)"
        )
    return text


def _engine(name: str, engines: Sequence[EngineVoices]) -> EngineVoices:
    engine = next((e for e in engines if e.engine == name), None)
    if engine is not None:
        return engine
    known = ", ".join(e.engine for e in engines)
    if not known:
        raise Rejected("no speech worker has announced itself yet; start `voxlog worker` and retry", 503)
    raise Rejected(f"engine {name!r} has no worker; known engines: {known}")


def _voice(spec: str, engine: EngineVoices) -> str:
    """The voice (a mix canonicalized), every part of it one the engine has."""
    try:
        voice = canonical_voice(spec)
        parts = parse_voice_spec(voice)
    except InvalidRequest as exc:
        raise Rejected(str(exc)) from exc
    unknown = [name for name, _ in parts if name not in engine.voices]
    if unknown:
        raise Rejected(f"voice {unknown[0]!r} is unknown to {engine.engine}; known voices: {', '.join(engine.voices)}")
    return voice
