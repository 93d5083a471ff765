"""``bench-sleep``: a BENCHMARK-ONLY engine that sleeps instead of running a model.

It stands in for a model of known speed (zero: pure orchestration cost; 200
ms: a GPU node) so benchmarks measure what surrounds synthesis. It is never a
default: it runs only when ``VOXLOG_ENGINE=bench-sleep`` is set on purpose.
Its pace and fault are no settings of voxlog's (issue 38, item 3): a process
makes it with :func:`made`, which gives an engine that takes no time and has no
fault unless the process's entry point installed another maker
(:func:`make_with`): ``python -m bench.paced``, what the benchmarks, the fault
campaigns and the tests run instead of ``voxlog``, installs one from its
``VOXLOG_BENCH_*`` variables.

Text is split as the real engines split it, by ``tts_node.segmenter`` (the
same sentences, the same quick-start first clause, the same packing into
segments of at most ``MAX_TOKENS`` ids), except that one character stands in
for one phoneme id: a piece with no letter or digit has no ids and is dropped,
as a real engine drops punctuation or emoji. Segment sizes therefore match the
real engine's only up to that approximation (English runs roughly one phoneme
id per character), but a long document becomes many segments as it would there.

``synthesize`` sleeps ``synth_ms`` per segment (a fixed cost per model call)
plus ``ms_per_char`` per character of the segment (the cost that grows with
the text), and returns a quiet tone about as long as the segment would take to
say (``CHARS_PER_AUDIO_S`` characters a second at speed 1, at least
``MIN_AUDIO_S``). The tone's pitch depends on the text, so that segments
differ and the blob store writes each one, as it would for speech.

The *batched pace* (``batch_ms``, ``ms_per_id``: a GPU's, issue 41) replaces that per-segment
one: a forward of up to ``max_batch`` segments (:data:`BATCHED_MAX`, 32, unless said) costs
``batch_ms`` plus ``ms_per_id`` per phoneme id of all its segments (:func:`forward_seconds`), and
``speak_batch`` makes one forward per ``max_batch`` requests in order. A worker forms batches of an
engine by its device (``voxlog.composition.configs.batch_and_claims``: 32 segments a forward on a
``cuda:N`` device, the batched pace's default), so the batched pace runs on ``cuda:N``. Whatever the
pace, the engine counts its forwards, their segments and the seconds it spent in them (``busy_s``:
what a benchmark divides by the wall time for the engine's busy share).

For fault tests only, ``fault`` makes a segment misbehave: ``hang:TEXT``
never returns from a segment containing TEXT (a hung engine), ``fail:TEXT``
raises a transient failure for one (an engine error a retry may cure), and
``gate:TEXT@PATH`` holds the first such segment until a test opens the named
pipe at PATH for writing and closes it (a gate the test holds: the engine is
busy with a known segment for exactly as long as the test wants).
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from tts_node.engine import Audio, EngineInfo, Segment, Speech, SpeechRequest, WordTime
from tts_node.errors import EngineFailure, EngineInputError
from tts_node.segmenter import MAX_TOKENS, segment_text

NAME = "bench-sleep"
SAMPLE_RATE = 24_000
CHARS_PER_AUDIO_S = 15.0  # about how fast English is read aloud, in characters a second
MIN_AUDIO_S = 0.25
LANGUAGES = ("en-us", "en-gb")
VOICES = ("bench_tone",)
_FAULTS = ("hang", "fail", "gate")
BATCHED_MAX = 32  # segments a forward takes at the batched pace unless said: the GPU batch of configs.GPU_BATCH


def char_ids(piece: str) -> list[int]:
    """The stand-in phonemizer: one id per character, none for a piece with no letter or digit."""
    if not any(c.isalnum() for c in piece):
        return []
    return [ord(c) for c in piece]


def forward_seconds(batch_ms: float, ms_per_id: float, ids: int) -> float:
    """One forward's seconds at the batched pace: ``batch_ms`` plus ``ms_per_id`` per phoneme id of the batch."""
    return (batch_ms + ms_per_id * ids) / 1000


def audio_seconds(text: str, speed: float = 1.0) -> float:
    """How long the tone for ``text`` lasts: about as long as reading it aloud at ``speed``."""
    return max(MIN_AUDIO_S, len(text) / CHARS_PER_AUDIO_S / speed)


class BenchSleepEngine:
    """Segments like the real engines; ``synthesize`` sleeps ``synth_ms + ms_per_char * len(text)``."""

    def __init__(
        self,
        synth_ms: float = 0.0,
        device: str = "cpu",
        fault: str = "",
        *,
        ms_per_char: float = 0.0,
        batch_ms: float = 0.0,
        ms_per_id: float = 0.0,
        max_batch: int = 0,
    ) -> None:
        for name, value in (
            ("synth_ms", synth_ms),
            ("ms_per_char", ms_per_char),
            ("batch_ms", batch_ms),
            ("ms_per_id", ms_per_id),
        ):
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0")
        self.batched = bool(batch_ms or ms_per_id)
        if self.batched and (synth_ms or ms_per_char):
            raise ValueError("a pace is per segment (synth_ms, ms_per_char) or batched (batch_ms, ms_per_id), not both")
        if max_batch < 0 or (max_batch and not self.batched):
            raise ValueError("max_batch is the batched pace's, a number >= 1 (0: 32)")
        kind, _, marker = fault.partition(":")
        if fault and (kind not in _FAULTS or not marker):
            raise ValueError(f"fault must be hang:TEXT, fail:TEXT or gate:TEXT@PATH, not {fault!r}")
        if kind == "gate":
            marker, _, self._gate_path = marker.partition("@")
            if not marker or not self._gate_path:
                raise ValueError(f"a gate is gate:TEXT@PATH (a named pipe), not {fault!r}")
        self._gate_passed = False
        self._fault = (kind, marker) if fault else None
        self.hung = threading.Event()  # set once a call hangs (so a test knows without waiting)
        self._unhang = threading.Event()  # nothing sets it but release_hung: a hung call stays hung
        self._synth_s = synth_ms / 1000
        self._s_per_char = ms_per_char / 1000
        self._batch_ms, self._ms_per_id = batch_ms, ms_per_id
        # The most segments one forward takes: at the batched pace, max_batch (32 unless said); else any number,
        # in one sleep as long as the longest item's (None).
        self.max_batch: int | None = (max_batch or BATCHED_MAX) if self.batched else None
        self.busy_s = 0.0  # seconds spent in forwards (asked of the clock), whatever the pace
        self.forwards = 0
        self.forward_segments = 0
        # Without a per-character cost the version is what it always was, so that existing
        # fingerprints, consumer groups and benchmark results keep meaning the same engine.
        if self.batched:
            version = f"sleep-batch-{batch_ms:g}ms-{ms_per_id:g}msid-x{self.max_batch}"
        else:
            version = f"sleep-{synth_ms:g}ms" + (f"-{ms_per_char:g}mspc" if ms_per_char else "")
        self._info = EngineInfo(
            name=NAME,
            model_version=version,
            sample_rate=SAMPLE_RATE,
            voices=VOICES,
            languages=LANGUAGES,
            device=device,
        )

    def release_hung(self) -> None:
        """Let hung calls return (tests clean up with it; nothing in a process calls it)."""
        self._unhang.set()

    @property
    def info(self) -> EngineInfo:
        return self._info

    def segment(self, text: str, lang: str, *, normalize: bool = True) -> list[Segment]:
        """Segments of ``text`` as ``tts_node.segmenter`` cuts them, one id per character (it says no words,
        so there is nothing to normalize: ``normalize`` changes nothing)."""
        if lang not in LANGUAGES:
            raise EngineInputError(f"lang {lang!r} is not supported; use one of: {', '.join(LANGUAGES)}")
        segments = segment_text(text, char_ids, MAX_TOKENS)
        if not segments:
            raise EngineInputError("the text has nothing to speak: it needs at least one word, not only symbols")
        return segments

    def phoneme_ids(self, phonemes: str) -> tuple[int, ...]:
        """One id per phoneme character, as its text gets one per character."""
        return tuple(ord(c) for c in phonemes)

    def seconds_for(self, segment: Segment) -> float:
        """How long ``synthesize`` sleeps for ``segment`` (at the batched pace: a forward of it alone)."""
        if self.batched:
            return forward_seconds(self._batch_ms, self._ms_per_id, len(segment.token_ids))
        return self._synth_s + self._s_per_char * len(segment.text)

    def forwards_for(self, segments: Sequence[Segment]) -> list[float]:
        """The seconds of each forward ``speak_batch`` makes for ``segments``: at the batched pace, one per
        ``max_batch`` of them in order, each ``batch_ms + ms_per_id * (its phoneme ids)``; else one, as long as
        the longest segment's alone."""
        if not segments:
            return []
        if self.max_batch is None:
            return [max(self.seconds_for(s) for s in segments)]
        chunks = (segments[i : i + self.max_batch] for i in range(0, len(segments), self.max_batch))
        return [forward_seconds(self._batch_ms, self._ms_per_id, sum(len(s.token_ids) for s in c)) for c in chunks]

    def _forward(self, seconds: float, segments: int) -> None:
        """One forward of ``segments`` that takes ``seconds``: slept, and counted."""
        if seconds > 0:
            time.sleep(seconds)
        self.busy_s += seconds
        self.forwards += 1
        self.forward_segments += segments

    def synthesize(self, segment: Segment, voice: str, speed: float) -> Audio:
        self._misbehave(segment, voice, speed)
        self._forward(self.seconds_for(segment), 1)
        return _tone(segment, speed)

    def speak(self, segment: Segment, voice: str, speed: float) -> Speech:
        """The tone, and each word of the text placed in it by its characters: the tone's length is
        proportional to them (no model predicts anything here)."""
        return _speech(segment, self.synthesize(segment, voice, speed))

    def speak_batch(self, requests: Sequence[SpeechRequest]) -> list[Speech]:
        """Each item as ``speak`` gives it, from the forwards :meth:`forwards_for` says: at the batched pace,
        one per ``max_batch`` items, each costing its fixed time plus its phoneme ids'; else one sleep as long
        as the longest item's alone (a GPU's batched forward over segments of similar length costs about what
        one of them does)."""
        for request in requests:
            self._misbehave(request.segment, request.voice, request.speed)
        seconds = self.forwards_for([r.segment for r in requests])
        size = self.max_batch or len(requests)
        for index, forward in enumerate(seconds):
            self._forward(forward, min(size, len(requests) - index * size))
        return [_speech(r.segment, _tone(r.segment, r.speed)) for r in requests]

    def _misbehave(self, segment: Segment, voice: str, speed: float) -> None:
        """Refuse what a model would refuse, and play the fault this engine was given, if ``segment`` has it."""
        if voice not in VOICES:
            raise EngineInputError(f"voice {voice!r} is unknown; known voices: {', '.join(VOICES)}")
        if not (math.isfinite(speed) and speed > 0):
            raise EngineInputError(f"speed must be a finite number > 0, not {speed!r}")
        if self._fault is not None and self._fault[1] in segment.text and not self._gate_passed:
            if self._fault[0] == "gate":
                with open(self._gate_path, "rb") as gate:  # blocks until the test opens it for writing
                    gate.read()  # and until it closes it
                self._gate_passed = True
            elif self._fault[0] == "hang":
                self.hung.set()
                self._unhang.wait()  # what a wedged driver call looks like
                raise EngineFailure("released from a hang")
            else:
                raise EngineFailure(f"bench-sleep fault on {segment.text!r}")


Maker = Callable[[str], BenchSleepEngine]
"""Makes this process's benchmark engine for a device."""


def _untimed(device: str) -> BenchSleepEngine:
    return BenchSleepEngine(device=device)


_maker: list[Maker] = [_untimed]


def make_with(maker: Maker) -> Maker:
    """From now on, this process's benchmark engine is ``maker``'s (an entry point's: bench.paced); returns
    the maker it replaces."""
    previous, _maker[0] = _maker[0], maker
    return previous


def made(device: str) -> BenchSleepEngine:
    """This process's benchmark engine on ``device``: untimed and faultless, unless an entry point said how."""
    return _maker[0](device)


def _tone(segment: Segment, speed: float) -> Audio:
    digest = hashlib.blake2b(segment.text.encode(), digest_size=4).digest()
    # Continuous, not one of 400 steps: two texts of one length with one pitch made the same bytes, and so
    # one blob for two results (test_bounded_cache found "Distinct request number 03," and "... 12,").
    pitch = 200.0 + 400.0 * int.from_bytes(digest, "big") / 2**32 + speed
    t = np.arange(round(SAMPLE_RATE * audio_seconds(segment.text, speed)), dtype=np.float32) / SAMPLE_RATE
    return (0.1 * np.sin(2 * np.pi * pitch * t)).astype(np.float32)


def _speech(segment: Segment, audio: Audio) -> Speech:
    per_char = audio.size / max(1, len(segment.text))
    at = segment.start
    words = tuple(
        WordTime(at + m.start(), at + m.end(), round(m.start() * per_char), round(m.end() * per_char))
        for m in re.finditer(r"\S+", segment.text)
    )
    return Speech(audio, words)
