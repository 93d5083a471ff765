"""What a TTS engine offers the node: segmentation and per-segment synthesis."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from contracts.engine_info import EngineInfo

Audio = npt.NDArray[np.float32]
"""Mono float32 samples in [-1, 1] at ``EngineInfo.sample_rate``."""


@dataclass(frozen=True)
class Segment:
    """One model call's worth of text, with its place in the request text."""

    index: int
    start: int
    end: int
    text: str
    token_ids: tuple[int, ...]
    spoken: str = ""  # the text the G2P read: ``text`` normalized, or as written when not asked to
    rate: float = 1.0  # said at the request's speed times this (an SSML <prosody rate>)
    silence: int = 0  # samples of silence instead of speech (an SSML pause): no ids, no model call


@dataclass(frozen=True)
class WordTime:
    """One caption entry of a segment: characters ``[start, end)`` of the request text as written (a word,
    or a written form spelled out as several spoken words: "2.5 kg"), said from sample ``first`` to sample
    ``last`` (exclusive) of the segment's audio."""

    start: int
    end: int
    first: int
    last: int


@dataclass(frozen=True)
class Speech:
    """A segment's audio and when each of its words is said in it (none when the engine cannot tell)."""

    audio: Audio
    words: tuple[WordTime, ...] | None


class Engine(Protocol):
    """A loaded TTS model.

    ``segment`` raises ``EngineInputError`` for an unsupported language or text
    with nothing to speak; ``synthesize`` raises ``EngineInputError`` for an
    unknown voice or speed and ``EngineFailure`` when the runtime fails; ``speak`` is ``synthesize``
    with the words' times in the audio, from the model's own predicted durations where it has them;
    ``phoneme_ids`` are the model's ids of phonemes written in its alphabet (an SSML ``<phoneme ph>``, which
    bypasses G2P), and raises ``EngineInputError`` for one it does not have.
    """

    @property
    def info(self) -> EngineInfo: ...

    def segment(self, text: str, lang: str, *, normalize: bool = True) -> list[Segment]: ...

    def phoneme_ids(self, phonemes: str) -> tuple[int, ...]: ...

    def synthesize(self, segment: Segment, voice: str, speed: float) -> Audio: ...

    def speak(self, segment: Segment, voice: str, speed: float) -> Speech: ...


@dataclass(frozen=True)
class SpeechRequest:
    """One segment to speak in a voice at a speed: an item of a batch."""

    segment: Segment
    voice: str
    speed: float


@runtime_checkable
class BatchSpeaker(Protocol):
    """An engine whose one model call can speak several segments, each exactly as it would be alone."""

    def speak_batch(self, requests: Sequence[SpeechRequest]) -> list[Speech]: ...


def speak_batch(engine: Engine, requests: Sequence[SpeechRequest]) -> list[Speech]:
    """Each request's speech, in order: one call where ``engine`` batches, one call a segment where it does not.
    Raises as ``speak`` does, for the first request it cannot serve."""
    if isinstance(engine, BatchSpeaker):
        return engine.speak_batch(requests)
    return [engine.speak(r.segment, r.voice, r.speed) for r in requests]
