"""Adapter: a ``tts_node`` engine as the worker's ``SpeechEngine`` port, errors converted at the edge."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import numpy as np

from consumers.errors import InputRejected, TransientEngineError
from consumers.ports import PlannedSegment, Rendering
from contracts import WordTiming
from contracts.engine_info import EngineInfo
from foundation.metrics import AUDIO_SECONDS, REAL_TIME_FACTOR, SEGMENTS, SYNTHESIS_SECONDS
from tts_node import Engine, EngineFailure, EngineInputError, ModelUnavailable, Segment, WordTime
from tts_node.engine import SpeechRequest, speak_batch
from tts_node.ssml import request_segments


class TtsNodeSpeechEngine:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._description = engine.info

    @property
    def description(self) -> EngineInfo:
        return self._description

    def plan(
        self,
        text: str,
        lang: str,
        normalize: bool = True,
        input_format: str = "text",
        pronunciations: Mapping[str, str] | None = None,
    ) -> Sequence[PlannedSegment]:
        try:
            ssml = input_format == "ssml"
            segments = request_segments(
                self._engine, text, lang, normalize=normalize, ssml=ssml, pronunciations=pronunciations
            )
        except EngineInputError as exc:
            raise InputRejected(str(exc)) from exc
        except (EngineFailure, ModelUnavailable) as exc:
            raise TransientEngineError(str(exc)) from exc
        return [PlannedSegment(s.index, s.start, s.end, s.text, s, s.token_ids, s.rate) for s in segments]

    def render(self, segment: PlannedSegment, voice: str, speed: float) -> Rendering:
        return self.render_batch([(segment, voice, speed)])[0]

    def render_batch(self, items: Sequence[tuple[PlannedSegment, str, float]]) -> list[Rendering]:
        """Every item's rendering from one call of the engine (``tts_node.engine.speak_batch``: one forward where
        the engine batches); an SSML pause is its silence, with no model call."""
        handles = [_handle(segment) for segment, _, _ in items]
        spoken = [
            (index, SpeechRequest(handle, voice, speed))
            for index, (handle, (_, voice, speed)) in enumerate(zip(handles, items, strict=True))
            if not handle.silence
        ]
        renderings = [Rendering(np.zeros(h.silence, dtype=np.float32), ()) for h in handles]
        if not spoken:
            return renderings
        started = time.perf_counter()
        try:
            speeches = speak_batch(self._engine, [request for _, request in spoken])
        except EngineInputError as exc:
            raise InputRejected(str(exc)) from exc
        except (EngineFailure, ModelUnavailable) as exc:
            raise TransientEngineError(str(exc)) from exc
        finally:
            spent = time.perf_counter() - started
            SYNTHESIS_SECONDS.labels(self._description.name).inc(spent)
        audio_s = sum(len(speech.audio) for speech in speeches) / self._description.sample_rate
        AUDIO_SECONDS.labels(self._description.name).inc(audio_s)
        if audio_s > 0:
            REAL_TIME_FACTOR.labels(self._description.name).observe(spent / audio_s)
        SEGMENTS.labels(self._description.name).inc(len(spoken))
        for (index, _), speech in zip(spoken, speeches, strict=True):
            words = None if speech.words is None else tuple(self._timing(w) for w in speech.words)
            renderings[index] = Rendering(speech.audio, words)
        return renderings

    def _timing(self, word: WordTime) -> WordTiming:
        rate = self._description.sample_rate
        start_ms = round(1000 * word.first / rate)
        end_ms = max(start_ms, round(1000 * word.last / rate))
        return WordTiming(start=word.start, end=word.end, start_ms=start_ms, end_ms=end_ms)


def _handle(segment: PlannedSegment) -> Segment:
    if not isinstance(segment.handle, Segment):
        raise TypeError("segment was not planned by this engine")
    return segment.handle
