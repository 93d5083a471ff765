"""How a torch engine runs its decoder, chosen by measuring it on its device (``VOXLOG_DECODER=auto``).

Whether ``torch.compile`` or CUDA graphs beat the eager decoder depends on the
device, the batch and torch's version, so it is measured, not assumed: each way
runs the same batches (sentence-length and document-length segments, at the sizes a
worker on that device forms), its first forward of each shape untimed (that is
where it compiles), and it is kept only where it makes at least ``GAIN`` times
eager's audio a second and speaks what eager speaks within ``TOLERANCE``. The eager
decoder is the fallback: chosen where nothing wins, and what a compiled decoder
hands over to when it fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

import numpy as np

from tts_node.batch_sizing import DOCUMENT_IDS, PHONEMES, SENTENCE_IDS, MeasurableEngine, measure_point
from tts_node.engine import Segment, SpeechRequest
from tts_node.errors import TtsNodeError

GAIN: Final = 1.05  # a compiled decoder is kept where it makes at least 5% more audio a second than eager
TOLERANCE: Final = 1e-3  # of full scale per sample: another order of float32 sums, not another sound
GPU_SHAPES: Final = ((SENTENCE_IDS, 16), (DOCUMENT_IDS, 4))  # (ids, segments): what a GPU worker's forwards are
CPU_SHAPES: Final = ((SENTENCE_IDS, 1), (DOCUMENT_IDS, 1))  # a CPU's forward carries one segment


@runtime_checkable
class SwitchableEngine(MeasurableEngine, Protocol):
    """An engine whose decoder can run more than one way (``tts_node.kokoro_compile``)."""

    @property
    def decoder(self) -> str: ...

    def use_decoder(self, mode: str) -> None: ...


@dataclass(frozen=True)
class DecoderTrial:
    mode: str
    audio_s_per_s: float  # the shapes' harmonic mean: as if each made an audio second, timed together
    seconds: float  # the whole trial, its compilations included
    max_difference: float  # the largest sample difference from eager's audio of the same segments
    failure: str = ""  # why it cannot be kept (it failed and fell back, or it speaks otherwise)


@dataclass(frozen=True)
class DecoderChoice:
    mode: str
    trials: tuple[DecoderTrial, ...]


def candidates(device: str) -> tuple[str, ...]:
    """The compiled ways worth measuring on ``device``: CUDA graphs only where there is CUDA."""
    return ("compile", "graphs") if device.startswith("cuda") else ("compile",)


def choose_decoder(
    engine: SwitchableEngine,
    modes: Sequence[str] | None = None,
    *,
    shapes: Sequence[tuple[int, int]] | None = None,
    rounds: int = 3,
    clock: Callable[[], float] = time.perf_counter,
) -> DecoderChoice:
    """Measure eager and each of ``modes`` on ``engine`` and leave it running the one chosen. Blocking: on a
    GPU, a compilation or two (tens of seconds each) and a few seconds of forwards."""
    gpu = engine.info.device.startswith("cuda")
    modes = candidates(engine.info.device) if modes is None else modes
    shapes = shapes or (GPU_SHAPES if gpu else CPU_SHAPES)
    source = engine.phoneme_ids(PHONEMES)
    voice = engine.info.voices[0]
    lengths = [min(ids, engine.max_ids) for ids, _ in shapes]
    # Mixed lengths in one forward: the padding, the masks and the frame buckets are compared too.
    check = [SpeechRequest(Segment(k, 0, 0, "", _cycled(source, n)), voice, 1.0) for k, n in enumerate(lengths)]
    trials: list[DecoderTrial] = []
    reference: list[np.ndarray] = []
    for mode in ("eager", *modes):
        started = clock()
        try:
            engine.use_decoder(mode)
            heard = [speech.audio for speech in engine.speak_batch(check)]
            rates = [
                measure_point(engine, engine.device_memory(), _cycled(source, n), batch, rounds, clock).audio_s_per_s
                for (_, batch), n in zip(shapes, lengths, strict=True)
            ]
        except TtsNodeError as exc:
            if mode == "eager":
                raise
            engine.device_memory().release()
            trials.append(DecoderTrial(mode, 0.0, clock() - started, float("inf"), f"a forward failed: {exc}"))
            continue
        reference = reference or heard
        difference = max(_difference(a, b) for a, b in zip(heard, reference, strict=True))
        failure = ""
        if engine.decoder != mode:
            failure = "it failed and fell back to eager (logged)"
        elif difference > TOLERANCE:
            failure = f"its audio differs from eager's by {difference:.2g}"
        # The harmonic mean: an audio second of each shape, timed together.
        rate = len(rates) / sum(1 / r for r in rates) if all(r > 0 for r in rates) else 0.0
        trials.append(DecoderTrial(mode, rate, clock() - started, difference, failure))
    eager = trials[0]
    kept = [t for t in trials[1:] if not t.failure and t.audio_s_per_s >= GAIN * eager.audio_s_per_s]
    chosen = max(kept, key=lambda t: t.audio_s_per_s).mode if kept else "eager"
    engine.use_decoder(chosen)
    return DecoderChoice(chosen, tuple(trials))


def _cycled(source: tuple[int, ...], length: int) -> tuple[int, ...]:
    return tuple(source[k % len(source)] for k in range(length))


def _difference(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max()) if a.shape == b.shape else float("inf")
