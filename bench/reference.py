"""The engine with no service around it: the limit each system is measured against."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from bench.measure import summarize
from tts_node import Engine


class EngineLoop:
    """The same engine the workers load, called in a tight loop in this process."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.voice = engine.info.voices[0]
        self.lang = engine.info.languages[0]

    def saturation(self, texts: Sequence[str]) -> dict[str, Any]:
        """Every segment of every text back to back: busy fraction and audio seconds per wall second."""
        synthesis = audio = 0.0
        started = time.perf_counter()
        for text in texts:
            for segment in self.engine.segment(text, self.lang):
                t = time.perf_counter()
                samples = self.engine.synthesize(segment, self.voice, 1.0)
                synthesis += time.perf_counter() - t
                audio += len(samples) / self.engine.info.sample_rate
        wall = time.perf_counter() - started
        return {
            "jobs": len(texts),
            "wall_s": wall,
            "synthesis_s": synthesis,
            "audio_s": audio,
            "busy_fraction": synthesis / wall,
            "audio_s_per_wall_s": audio / wall,
        }

    def first_audio(self, text: str, runs: int) -> dict[str, Any]:
        """Seconds from the text to the first segment's samples: segmenting plus one model call."""
        firsts = []
        for _ in range(runs):
            started = time.perf_counter()
            first = self.engine.segment(text, self.lang)[0]
            self.engine.synthesize(first, self.voice, 1.0)
            firsts.append(time.perf_counter() - started)
        return {"first_audio": summarize(firsts)}
