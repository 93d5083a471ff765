"""Every speed a request may ask for (``contracts.speed``): the model's own, then time-stretching.

:class:`SpeedRange` wraps a loaded engine. A speed inside the model's native range goes to it unchanged
(and its audio is what it always was); one beyond it goes to the model at the nearest native speed, and the
audio is then time-stretched by the rest, pitch preserved (:mod:`tts_node.time_stretch`), with its words'
times scaled alike so that captions stay on the words.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from contracts.speed import SPEED_RANGE, split_speed
from tts_node.engine import Audio, Engine, EngineInfo, Segment, Speech, SpeechRequest, speak_batch
from tts_node.errors import EngineInputError
from tts_node.time_stretch import time_stretch


class SpeedRange:
    """``engine`` taking every speed of ``SPEED_RANGE`` (an ``Engine`` itself)."""

    def __init__(self, engine: Engine) -> None:
        self.inner = engine

    @property
    def info(self) -> EngineInfo:
        return self.inner.info

    def segment(self, text: str, lang: str, *, normalize: bool = True) -> list[Segment]:
        return self.inner.segment(text, lang, normalize=normalize)

    def phoneme_ids(self, phonemes: str) -> tuple[int, ...]:
        return self.inner.phoneme_ids(phonemes)

    def synthesize(self, segment: Segment, voice: str, speed: float) -> Audio:
        model_speed, factor = self._split(speed)
        audio = self.inner.synthesize(segment, voice, model_speed)
        return audio if factor == 1.0 else time_stretch(audio, factor, self.info.sample_rate)

    def speak(self, segment: Segment, voice: str, speed: float) -> Speech:
        model_speed, factor = self._split(speed)
        return self._stretched(self.inner.speak(segment, voice, model_speed), factor)

    def speak_batch(self, requests: Sequence[SpeechRequest]) -> list[Speech]:
        """One call of the inner engine for the batch (where it batches), each item stretched as ``speak`` does."""
        splits = [self._split(r.speed) for r in requests]
        inner = [replace(r, speed=model_speed) for r, (model_speed, _) in zip(requests, splits, strict=True)]
        spoken = speak_batch(self.inner, inner)
        return [self._stretched(s, factor) for s, (_, factor) in zip(spoken, splits, strict=True)]

    def _stretched(self, speech: Speech, factor: float) -> Speech:
        if factor == 1.0:
            return speech
        audio = time_stretch(speech.audio, factor, self.info.sample_rate)
        end = len(audio)
        words = (
            tuple(
                replace(w, first=min(end, round(w.first / factor)), last=min(end, round(w.last / factor)))
                for w in speech.words
            )
            if speech.words is not None
            else None
        )
        return Speech(audio, words)

    @staticmethod
    def _split(speed: float) -> tuple[float, float]:
        low, high = SPEED_RANGE
        if not (math.isfinite(speed) and low <= speed <= high):
            raise EngineInputError(f"speed {speed} is out of range; use {low} to {high}")
        return split_speed(speed)
