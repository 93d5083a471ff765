"""How much audio a request will make, known before any synthesis: the unit work is counted in.

Characters are what a tenant sends, not what a worker spends: the same characters at speed 0.25 are four
times the audio and cost about four times the model time (3.9x, measured on the real model), and an SSML
break costs no characters at all. The expected audio is the text's characters over the rate they are said
at (English read aloud runs at about :data:`CHARS_PER_AUDIO_S` characters a second at speed 1; a prosody
rate multiplies the request's speed), plus every pause. The bound on one request's audio
(``VOXLOG_MAX_REQUEST_AUDIO_S``) and the audio quotas are judged on it, before the log takes the job.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from contracts.events import SynthesisRequest
from contracts.ssml import Pause, Phonemes, Piece, parse

CHARS_PER_AUDIO_S: Final = 15.0
"""Characters of English text said per second of audio at speed 1 (an estimate; a phoneme string counts as
text does)."""


def expected_audio_s(request: SynthesisRequest) -> float:
    """Seconds of audio ``request`` is expected to make (its pauses exactly, its speech estimated)."""
    if request.input_format != "ssml":
        return text_audio_s(request.text, request.speed)
    return pieces_audio_s(parse(request.text).pieces, request.speed)


def expected_audio_ms(request: SynthesisRequest) -> int:
    return round(expected_audio_s(request) * 1000)


def work_chars(request: SynthesisRequest) -> int:
    """The request's work in characters said at speed 1 (the backlog's unit: :mod:`projections.reads.backlog`)."""
    return round(expected_audio_s(request) * CHARS_PER_AUDIO_S)


def text_audio_s(text: str, speed: float) -> float:
    return len(text) / (CHARS_PER_AUDIO_S * speed)


def pieces_audio_s(pieces: Iterable[Piece], speed: float) -> float:
    """:func:`expected_audio_s` of SSML's pieces (:attr:`contracts.ssml.Ssml.pieces`) at ``speed``."""
    seconds = 0.0
    for piece in pieces:
        if isinstance(piece, Pause):
            seconds += piece.ms / 1000
        elif isinstance(piece, Phonemes):
            seconds += text_audio_s(piece.ph, speed * piece.rate)
        else:
            seconds += text_audio_s(piece.text, speed * piece.rate)
    return seconds
