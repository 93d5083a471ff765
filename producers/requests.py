"""What a client may ask for (the request bodies' speech fields), and when a request is valid.

A submission's requests are validated together (:func:`validate_all`): inline while their texts are short,
in an offload process (:mod:`foundation.offload`) once they add up to more than ``INLINE_CHARS``
characters: 10,000 requests of 5,000 characters each held the event loop for seconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from contracts import InvalidRequest, Priority, SynthesisRequest, normalize_text
from contracts.audio_estimate import pieces_audio_s, text_audio_s
from contracts.pronunciations import MAX_REQUEST_ENTRIES, PronunciationError, applied, checked_map
from contracts.request_text import first_refused_character, has_words
from contracts.ssml import InputFormat, Ssml, SsmlError, Text, check_speed, looks_like_ssml, parse
from contracts.voices import canonical_voice, parse_voice_spec
from foundation import audio_formats
from foundation.offload import OverBudget
from producers.errors import Rejected
from producers.ports import OffLoop
from projections.reads.rows import EngineVoices


class SpeechOptions(BaseModel):
    """How to speak a text: the fields a job's request and a document's parts share."""

    model_config = ConfigDict(extra="forbid")

    voice: str = Field(description="A voice from GET /v1/voices.")
    speed: float = Field(
        1.0,
        description="Speed factor, 0.25 to 4.0 (above 2.0, time-stretched).",
    )
    lang: str = Field("en-us", description="Language of the text: en-us or en-gb.")
    format: str = Field("wav", description="Audio format: wav, flac, ogg, opus, mp3 or pcm.")
    sample_rate: int = Field(24000, description="Output sample rate: 16000, 22050, 24000, 44100 or 48000.")
    engine: str | None = Field(None, description="Engine; VOXLOG_DEFAULT_ENGINE when omitted.")
    normalize: bool = Field(
        True,
        description="Spell out numbers, dates, times, money, units, ... before G2P ('$5' is read 'five dollars');"
        " false: the text goes to G2P as written.",
    )
    pronunciations: dict[str, str] | None = Field(
        None,
        description="Words said as given phonemes, word -> phonemes in Kokoro's alphabet (the one SSML's"
        f' <phoneme ph> takes), at most {MAX_REQUEST_ENTRIES}: {{"tomato": "təmˈɑːtoʊ"}}. A word is matched'  # noqa: RUF001
        " whole and case-insensitively; these win over the server's lexicon (GET /v1/lexicon), whose entries"
        " apply to every request that says their word. The job records those its text says.",
    )


class JobRequest(SpeechOptions):
    """POST /v1/jobs body."""

    text: str = Field(description="What to say; whitespace is folded, at most VOXLOG_MAX_TEXT_CHARS characters.")
    input_format: InputFormat | None = Field(
        None,
        description="text, or ssml (the SSML subset of docs/ssml.md); when omitted, a text that"
        " starts with <speak (after whitespace) is SSML, any other is text.",
    )
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
    max_record_bytes: int = 1_000_000
    max_audio_s: float = 900.0  # 0: no bound


INLINE_CHARS: Final = 50_000
"""Up to this many characters of text in all, a submission is validated on the event loop (some
milliseconds); past it, in an offload process."""
OFFLOAD_SETTINGS: Final = {
    "cpu": "VOXLOG_OFFLOAD_CPU_S",
    "memory": "VOXLOG_OFFLOAD_MEMORY_MB",
    "time": "VOXLOG_OFFLOAD_CPU_S",  # the wall-clock allowance: ten times the CPU seconds, and more
}


def beyond_budget(exc: OverBudget, doing: str, fix: str) -> Rejected:
    """The 413 of work the offload stopped past a budget: what took too long, the budget's setting, what to do."""
    return Rejected(f"{doing} took more than {exc.limit} ({OFFLOAD_SETTINGS[exc.budget]}): {fix}", 413)


@dataclass(frozen=True)
class Refused:
    """Why one request is invalid: the status and message :class:`Rejected` would have."""

    status: int
    detail: str
    param: str | None = None


async def validate_all(
    bodies: Sequence[JobRequest],
    limits: Limits,
    engines: Sequence[EngineVoices],
    offload: OffLoop | None,
    lexicon: Mapping[str, str] | None = None,
) -> list[SynthesisRequest | Refused]:
    """Each body validated, in order (:func:`validate_each`), with the pronunciations of ``lexicon`` its text
    says, off the loop when they are long; a 413 naming the budget when that takes more than the offload
    allows."""
    if offload is None or sum(len(body.text) for body in bodies) <= INLINE_CHARS:
        return validate_each(bodies, limits, engines, lexicon)
    try:
        return await offload.run(validate_each, bodies, limits, engines, lexicon)
    except OverBudget as exc:
        raise beyond_budget(exc, "validating the requests", "send fewer or shorter ones") from exc


def validate_each(
    bodies: Sequence[JobRequest],
    limits: Limits,
    engines: Sequence[EngineVoices],
    lexicon: Mapping[str, str] | None = None,
) -> list[SynthesisRequest | Refused]:
    """The normalized request of each body, or why it is refused (what an offload process runs for a batch)."""
    checked: list[SynthesisRequest | Refused] = []
    for body in bodies:
        try:
            checked.append(validate(body, limits, engines, lexicon))
        except Rejected as exc:
            checked.append(Refused(exc.status, str(exc), exc.param))
    return checked


def validate(
    body: JobRequest, limits: Limits, engines: Sequence[EngineVoices], lexicon: Mapping[str, str] | None = None
) -> SynthesisRequest:
    """The normalized request, with the pronunciations its text says (its own, else ``lexicon``'s: see
    :mod:`contracts.pronunciations`), or :class:`Rejected` saying what to fix."""
    ssml = body.input_format == "ssml" or (body.input_format is None and looks_like_ssml(body.text))
    if not limits.min_speed <= body.speed <= limits.max_speed:
        raise Rejected(f"speed {body.speed} is outside [{limits.min_speed}, {limits.max_speed}]", param="speed")
    if ssml:
        parsed = _ssml(body.text, body.speed, limits)
        text, said = parsed.canonical, [p.text for p in parsed.pieces if isinstance(p, Text)]
        audio_s = pieces_audio_s(parsed.pieces, body.speed)
    else:
        text = _text(body.text, limits)
        said, audio_s = [text], text_audio_s(text, body.speed)
    _check_audio(audio_s, body.speed, limits)
    try:
        own = checked_map(body.pronunciations or {})
    except PronunciationError as exc:
        raise Rejected(str(exc), param="pronunciations") from exc
    try:
        fmt, rate = audio_formats.check(body.format, body.sample_rate)
    except audio_formats.UnsupportedAudio as exc:
        raise Rejected(
            str(exc), param="format" if isinstance(exc, audio_formats.UnsupportedFormat) else "sample_rate"
        ) from exc
    engine = _engine((body.engine or limits.default_engine).strip().lower(), engines)
    lang = body.lang.strip().lower()
    if lang not in engine.languages:
        raise Rejected(
            f"lang {body.lang!r} is not supported by {engine.engine}; use one of: {', '.join(engine.languages)}",
            param="lang",
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
        input_format="ssml" if ssml else "text",
        pronunciations=applied(said, own, lexicon or {}),
    )


def _check_audio(seconds: float, speed: float, limits: Limits) -> None:
    """413 for a request whose audio (:func:`contracts.audio_estimate.expected_audio_s`: its characters at its
    speed, and its pauses) passes ``VOXLOG_MAX_REQUEST_AUDIO_S``: a short text can ask for a long answer."""
    if limits.max_audio_s and seconds > limits.max_audio_s:
        raise Rejected(
            f"this request makes about {seconds:.0f} s of audio (its text at speed {speed:g}, and its"
            f" pauses); the limit is {limits.max_audio_s:g} s (VOXLOG_MAX_REQUEST_AUDIO_S): split the text,"
            " or ask for a faster speed or shorter breaks",
            413,
        )


def _text(written: str, limits: Limits) -> str:
    refused = first_refused_character(written)
    if refused is not None:
        raise Rejected(
            f"text contains {refused.describe()}; remove it (control characters have no sound)", param="text"
        )
    text = normalize_text(written)
    if not text:
        raise Rejected("text is empty (after folding whitespace and removing invisible characters)", param="text")
    if len(text) > limits.max_text_chars:
        raise Rejected(
            f"text has {len(text)} characters; the limit is {limits.max_text_chars}: split it", 413, param="text"
        )
    if not has_words(text):
        raise Rejected(
            "text has nothing to speak: it needs at least one word or number, not only punctuation, symbols or"
            " emoji (a scene break such as '* * *' is a pause inside a document, POST /v1/documents)",
            param="text",
        )
    return text


def _ssml(written: str, speed: float, limits: Limits) -> Ssml:
    """The canonical SSML (:mod:`contracts.ssml`), or why it cannot be spoken. What is parsed is bounded: twice
    the text limit as sent (markup and whitespace included), the limit once canonical, as a text's. A text
    declared SSML without its ``<speak>`` (or an XML declaration) is read inside one."""
    refused = first_refused_character(written)
    if refused is not None:
        raise Rejected(f"text contains {refused.describe()}; remove it (control characters have no sound)")
    if len(written) > 2 * limits.max_text_chars:
        raise Rejected(
            f"the SSML has {len(written)} characters; the limit is {2 * limits.max_text_chars} as sent (twice"
            f" VOXLOG_MAX_TEXT_CHARS): split it",
            413,
        )
    if not looks_like_ssml(written) and not written.lstrip().startswith("<?xml"):
        written = f"<speak>{written}</speak>"  # input_format="ssml" without the root element: it is implied
    try:
        ssml = parse(written)
        check_speed(ssml, speed)
    except SsmlError as exc:
        raise Rejected(str(exc)) from exc
    if len(ssml.canonical) > limits.max_text_chars:
        raise Rejected(
            f"the SSML has {len(ssml.canonical)} characters in its canonical form; the limit is"
            f" {limits.max_text_chars}: split it",
            413,
        )
    if not ssml.speaks(has_words):
        raise Rejected("the SSML has nothing to speak: it needs at least one word or number, not only breaks")
    return ssml


def _engine(name: str, engines: Sequence[EngineVoices]) -> EngineVoices:
    engine = next((e for e in engines if e.engine == name), None)
    if engine is not None:
        return engine
    known = ", ".join(e.engine for e in engines)
    if not known:
        raise Rejected("no speech worker has announced itself yet; start `voxlog worker` and retry", 503)
    raise Rejected(f"engine {name!r} has no worker; known engines: {known}", param="engine")


def _voice(spec: str, engine: EngineVoices) -> str:
    """The voice (a mix canonicalized), every part of it one the engine has."""
    try:
        voice = canonical_voice(spec)
        parts = parse_voice_spec(voice)
    except InvalidRequest as exc:
        raise Rejected(str(exc), param="voice") from exc
    unknown = [name for name, _ in parts if name not in engine.voices]
    if unknown:
        raise Rejected(
            f"voice {unknown[0]!r} is unknown to {engine.engine}; known voices: {', '.join(engine.voices)}",
            param="voice",
        )
    return voice
