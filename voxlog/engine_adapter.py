"""Adapter: a ``tts_node`` engine as the worker's ``SpeechEngine`` port, errors converted at the edge."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from consumers.errors import InputRejected, TransientEngineError
from consumers.ports import EngineDescription, PlannedSegment
from foundation.metrics import AUDIO_SECONDS, REAL_TIME_FACTOR, SEGMENTS, SYNTHESIS_SECONDS
from tts_node import Engine, EngineFailure, EngineInputError, ModelUnavailable, Segment


class TtsNodeSpeechEngine:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        info = engine.info
        self._description = EngineDescription(
            name=info.name,
            model_version=info.model_version,
            sample_rate=info.sample_rate,
            voices=tuple(info.voices),
            languages=tuple(info.languages),
            device=info.device,
        )

    @property
    def description(self) -> EngineDescription:
        return self._description

    def plan(self, text: str, lang: str, normalize: bool = True) -> Sequence[PlannedSegment]:
        try:
            segments = self._engine.segment(text, lang, normalize=normalize)
        except EngineInputError as exc:
            raise InputRejected(str(exc)) from exc
        except (EngineFailure, ModelUnavailable) as exc:
            raise TransientEngineError(str(exc)) from exc
        return [PlannedSegment(s.index, s.start, s.end, s.text, s, s.token_ids) for s in segments]

    def render(self, segment: PlannedSegment, voice: str, speed: float) -> npt.NDArray[np.float32]:
        handle = segment.handle
        if not isinstance(handle, Segment):
            raise TypeError("segment was not planned by this engine")
        started = time.perf_counter()
        try:
            audio = self._engine.synthesize(handle, voice, speed)
        except EngineInputError as exc:
            raise InputRejected(str(exc)) from exc
        except (EngineFailure, ModelUnavailable) as exc:
            raise TransientEngineError(str(exc)) from exc
        finally:
            spent = time.perf_counter() - started
            SYNTHESIS_SECONDS.labels(self._description.name).inc(spent)
        audio_s = len(audio) / self._description.sample_rate
        AUDIO_SECONDS.labels(self._description.name).inc(audio_s)
        if audio_s > 0:
            REAL_TIME_FACTOR.labels(self._description.name).observe(spent / audio_s)
        SEGMENTS.labels(self._description.name).inc()
        return audio
