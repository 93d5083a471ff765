"""``bench-sleep``: a BENCHMARK-ONLY engine that sleeps instead of running a model.

It stands in for a model of known speed (zero: pure orchestration cost; 200
ms: a GPU node) so benchmarks measure what surrounds synthesis. It is never a
default: it runs only when ``VOXLOG_ENGINE=bench-sleep`` is set on purpose.
Its audio is a quiet tone whose pitch depends on the text, so that segments
differ and the blob store writes each one, as it would for speech. Text is
split into sentences, one segment each, as the real engines split it.

For fault tests only, ``fault`` makes a segment misbehave: ``hang:TEXT``
never returns from a segment containing TEXT (a hung engine), ``fail:TEXT``
raises a transient failure for one (an engine error a retry may cure).
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
import time

import numpy as np

from tts_node.engine import Audio, EngineInfo, Segment
from tts_node.errors import EngineFailure, EngineInputError

NAME = "bench-sleep"
SAMPLE_RATE = 24_000
AUDIO_S = 1.0
LANGUAGES = ("en-us", "en-gb")
VOICES = ("bench_tone",)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_FAULTS = ("hang", "fail")


class BenchSleepEngine:
    """One segment per sentence; ``synthesize`` sleeps ``synth_ms`` and returns one second of tone."""

    def __init__(self, synth_ms: float = 0.0, device: str = "cpu", fault: str = "") -> None:
        if not (math.isfinite(synth_ms) and synth_ms >= 0):
            raise ValueError("synth_ms must be a finite number >= 0")
        kind, _, marker = fault.partition(":")
        if fault and (kind not in _FAULTS or not marker):
            raise ValueError(f"fault must be hang:TEXT or fail:TEXT, not {fault!r}")
        self._fault = (kind, marker) if fault else None
        self.hung = threading.Event()  # set once a call hangs (so a test knows without waiting)
        self._unhang = threading.Event()  # nothing sets it but release_hung: a hung call stays hung
        self._synth_s = synth_ms / 1000
        self._info = EngineInfo(
            name=NAME,
            model_version=f"sleep-{synth_ms:g}ms",
            sample_rate=SAMPLE_RATE,
            voices=VOICES,
            languages=LANGUAGES,
            device=device,
        )
        self._t = np.arange(int(SAMPLE_RATE * AUDIO_S), dtype=np.float32) / SAMPLE_RATE

    def release_hung(self) -> None:
        """Let hung calls return (tests clean up with it; nothing in a process calls it)."""
        self._unhang.set()

    @property
    def info(self) -> EngineInfo:
        return self._info

    def segment(self, text: str, lang: str) -> list[Segment]:
        if lang not in LANGUAGES:
            raise EngineInputError(f"lang {lang!r} is not supported; use one of: {', '.join(LANGUAGES)}")
        if not text.strip():
            raise EngineInputError("the text has nothing to speak")
        segments: list[Segment] = []
        start = 0
        for sentence in _SENTENCE_END.split(text):
            start = text.index(sentence, start)
            segments.append(Segment(len(segments), start, start + len(sentence), sentence, ()))
            start += len(sentence)
        return segments

    def synthesize(self, segment: Segment, voice: str, speed: float) -> Audio:
        if voice not in VOICES:
            raise EngineInputError(f"voice {voice!r} is unknown; known voices: {', '.join(VOICES)}")
        if self._fault is not None and self._fault[1] in segment.text:
            if self._fault[0] == "hang":
                self.hung.set()
                self._unhang.wait()  # what a wedged driver call looks like
                raise EngineFailure("released from a hang")
            raise EngineFailure(f"bench-sleep fault on {segment.text!r}")
        if self._synth_s:
            time.sleep(self._synth_s)
        digest = hashlib.blake2b(segment.text.encode(), digest_size=4).digest()
        pitch = 200.0 + int.from_bytes(digest, "big") % 400 + speed
        return (0.1 * np.sin(2 * np.pi * pitch * self._t)).astype(np.float32)
