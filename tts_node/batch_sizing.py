"""How large a forward a device takes: measured at start-up, not guessed (a GPU's curve, ADR 0002's batches).

A batched forward's throughput rises with its size while the device has idle units, then flattens while its
memory and each segment's wait keep growing. :func:`measure_curve` runs the engine's own batched forward at
doubling sizes, for sentence-length segments (a request's) and document-length ones (a document's parts),
until the gain stops, a forward fails (out of memory) or the time given is spent. :func:`choose_limits` takes
the knee of each: the smallest batch within ``KNEE`` of the best throughput measured. A batch is padded to
its longest segment, and its frames (what the decoder, most of a forward, works on) follow its ids, so a
forward is bounded twice: in segments (the sentence knee) and in padded ids, its count times its longest
(the document knee), both under what the device's free memory holds at the measured bytes a padded id.
Where batching gains less than ``MIN_GAIN`` (a CPU: on 2 cores the batched model was slower) a forward
carries one segment.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from contracts.engine_info import BatchLimits, EngineInfo
from tts_node.engine import Segment, Speech, SpeechRequest
from tts_node.errors import TtsNodeError

KNEE = 0.95  # a batch within 5% of the best measured throughput is as good, and smaller (memory, waits)
MIN_GAIN = 1.10  # batching is used where it makes at least 10% more audio a second than one segment at a time
MEMORY_FRACTION = 0.8  # of the device's memory free at start-up, the most forwards may take (the rest: the
# allocator's fragments, the blobs' host copies, another process's context)
FLAT_STEPS = 2  # doublings without a gain after which a curve is deemed flat
SENTENCE_IDS = 40  # the corpus's median segment (bench/gpu_segments.json): what one-sentence requests are
DOCUMENT_IDS = 267  # the median document part of 240 to 350 ids
# "Call me Ishmael. Some years ago..." in the model's alphabet (voxlog's G2P, en-us): real speech's mix of
# phonemes, stresses and pauses, cycled to each measured length. Written out: measuring runs no G2P.
PHONEMES = (
    "kˈɔːl mˌiː ˈɪʃmAl. sˌʌm jˈɪɹz ɐɡˈO, nˈɛvɚ mˈInd hˌW lˈɔŋ pɹɪsˈIsli, hˌævɪŋ lˈɪɾəl ɔːɹ nˈO mˈʌni ɪn mI "  # noqa: RUF001
    "pˈɜːs, ænd nˈʌθɪŋ pɚtˈɪkjʊlɚ tʊ ˈɪntɹɛst mˌiː ˌɔn ʃˈɔːɹ, I θˈɔːt I wʊd sˈAl ɐbˌWt ɐ lˈɪɾəl ænd sˈiː ðə "  # noqa: RUF001
    "wˈɔːɾɚɹi pˈɑːɹt ʌvðə wˈɜːld. "  # noqa: RUF001
)


@dataclass(frozen=True)
class CurvePoint:
    batch: int
    ids: int  # every segment of the batch this long
    audio_s_per_s: float
    peak_bytes: int | None  # the device's peak allocation during the batch (None: not told, a CPU)


@dataclass(frozen=True)
class BatchCurve:
    points: tuple[CurvePoint, ...]
    free_bytes: int | None  # device memory free before measuring
    base_bytes: int | None  # allocated before measuring (the model)
    stopped: str = ""  # why a curve ended early (a failed forward, the time given)

    def at(self, ids: int) -> list[CurvePoint]:
        return [p for p in self.points if p.ids == ids]


class DeviceMemory(Protocol):
    """What measuring needs of the device beside the engine: its memory, and a wait for its queued work."""

    def synchronize(self) -> None: ...

    def reset_peak(self) -> None: ...

    def peak_bytes(self) -> int | None: ...

    def free_bytes(self) -> int | None: ...

    def allocated_bytes(self) -> int | None: ...

    def release(self) -> None:
        """Give cached blocks back (after a forward that failed for want of memory)."""


@runtime_checkable
class MeasurableEngine(Protocol):
    """An engine whose batched forward can be measured on its device."""

    @property
    def info(self) -> EngineInfo: ...

    def phoneme_ids(self, phonemes: str) -> tuple[int, ...]: ...

    def speak_batch(self, requests: Sequence[SpeechRequest]) -> list[Speech]: ...

    def device_memory(self) -> DeviceMemory: ...

    @property
    def max_ids(self) -> int: ...


def measurable(engine: object) -> MeasurableEngine | None:
    """``engine``'s model, where its batched forward can be measured (under ``SpeedRange``: its inner engine)."""
    inner = getattr(engine, "inner", engine)
    return inner if isinstance(inner, MeasurableEngine) else None


def measure_curve(
    engine: MeasurableEngine,
    *,
    batches: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256),
    lengths: Sequence[int] = (SENTENCE_IDS, DOCUMENT_IDS),
    rounds: int = 2,
    budget_s: float = 60.0,
    clock: Callable[[], float] = time.perf_counter,
) -> BatchCurve:
    """Audio seconds a second of ``engine``'s forward at each of ``batches`` (in order, stopping where the
    curve is flat, a forward fails or ``budget_s`` is spent) for segments of each of ``lengths`` ids."""
    memory = engine.device_memory()
    memory.synchronize()
    free, base = memory.free_bytes(), memory.allocated_bytes()
    source = engine.phoneme_ids(PHONEMES)
    points: list[CurvePoint] = []
    stopped: list[str] = []
    measured = list(dict.fromkeys(min(n, engine.max_ids) for n in lengths))
    for length in measured:
        deadline = clock() + budget_s / len(measured)  # each length its share: the documents are measured too
        ids = tuple(source[k % len(source)] for k in range(length))
        best, flat = 0.0, 0
        for batch in batches:
            if clock() > deadline:
                stopped.append(f"the time given was spent before a batch of {batch} x {length} ids")
                break
            try:
                point = measure_point(engine, memory, ids, batch, rounds, clock)
            except TtsNodeError as exc:  # out of memory, or any other reason it cannot take the batch
                memory.release()
                stopped.append(f"a batch of {batch} x {length} ids failed: {exc}")
                break
            points.append(point)
            if point.audio_s_per_s > best * (1 + (1 - KNEE)):
                best, flat = max(best, point.audio_s_per_s), 0
            else:
                best, flat = max(best, point.audio_s_per_s), flat + 1
                if flat >= FLAT_STEPS:
                    break
    return BatchCurve(tuple(points), free, base, "; ".join(stopped))


def measure_point(
    engine: MeasurableEngine,
    memory: DeviceMemory,
    ids: tuple[int, ...],
    batch: int,
    rounds: int,
    clock: Callable[[], float],
) -> CurvePoint:
    """``engine``'s audio seconds a second on batches of ``batch`` segments of ``ids``: one forward not timed
    (the shape's kernels and allocations: its compilation, where the decoder is compiled), then ``rounds``."""
    voices = engine.info.voices

    def requests(round_: int) -> list[SpeechRequest]:
        # Another voice and speed per item: no batch is one repeated computation (the noise is seeded).
        return [
            SpeechRequest(Segment(k, 0, 0, "", ids), voices[(round_ + k) % len(voices)], 1.0 + 0.01 * (k % 7))
            for k in range(batch)
        ]

    engine.speak_batch(requests(0))  # the shape's kernels and allocations, not timed
    memory.synchronize()
    memory.reset_peak()
    audio, spent = 0.0, 0.0
    for round_ in range(1, rounds + 1):
        started = clock()
        speeches = engine.speak_batch(requests(round_))
        memory.synchronize()
        spent += clock() - started
        audio += sum(s.audio.size for s in speeches) / engine.info.sample_rate
    return CurvePoint(batch, len(ids), audio / spent if spent > 0 else 0.0, memory.peak_bytes())


def choose_limits(curve: BatchCurve, memory_fraction: float = MEMORY_FRACTION) -> BatchLimits:
    """The knee of the curve: segments from its shortest segments' points, padded ids from its longest's, both
    under the memory the device had free (at the most bytes a padded id took); one segment where batching
    gained less than ``MIN_GAIN``."""
    lengths = sorted({p.ids for p in curve.points})
    if not lengths:
        return BatchLimits(1)
    short, long_ = curve.at(lengths[0]), curve.at(lengths[-1])
    by_short = _knee(short) if _gains(short) else 1
    by_long = _knee(long_) if _gains(long_) else 1
    segments = max(by_short, by_long)
    if segments == 1:
        return BatchLimits(1)
    padded = max(by_short * lengths[0], by_long * lengths[-1])
    per_id = _bytes_per_id(curve)
    if per_id and curve.free_bytes:
        room = int(memory_fraction * curve.free_bytes / per_id)
        padded = min(padded, room)
        segments = max(1, min(segments, room // lengths[0]))
    return BatchLimits(segments, padded)


def _gains(points: list[CurvePoint]) -> bool:
    alone = next((p.audio_s_per_s for p in points if p.batch == 1), 0.0)
    best = max((p.audio_s_per_s for p in points), default=0.0)
    return alone > 0 and best >= MIN_GAIN * alone


def _knee(points: list[CurvePoint]) -> int:
    best = max(p.audio_s_per_s for p in points)
    return min(p.batch for p in points if p.audio_s_per_s >= KNEE * best)


def _bytes_per_id(curve: BatchCurve) -> float | None:
    """The most device memory a padded id of a forward took beyond the model's own (None: not told)."""
    base = curve.base_bytes or 0
    rates = [(p.peak_bytes - base) / (p.batch * p.ids) for p in curve.points if p.peak_bytes is not None]
    return max(rates) if rates else None
