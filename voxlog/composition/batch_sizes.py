"""A worker's forward sizes and its decoder: as set, or measured on its device at start-up
(:mod:`tts_node.batch_sizing`, :mod:`tts_node.decoder_choice`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import structlog

from contracts.engine_info import BatchLimits
from foundation.metrics import FORWARD_LIMIT
from foundation.settings import WorkerSettings
from tts_node import Engine
from tts_node.batch_sizing import choose_limits, measurable, measure_curve
from tts_node.decoder_choice import SwitchableEngine, choose_decoder

log = structlog.get_logger("voxlog")

GPU_BATCH: Final = 32  # a GPU's forward where it is not measured: the best sentence batch measured on one H200
CPU_HELD_CLAIMS: Final = 4  # ADR 0002: a short job waits at most about a segment of each of the others
MEASURE_BUDGET_S: Final = 60.0  # the most start-up time measuring may take (both lengths together)


@dataclass(frozen=True)
class ForwardSizes:
    """What one forward carries at most (segments, and padded ids: 0 unbounded) and the claims a worker holds."""

    segments: int
    padded_ids: int
    held: int


def forward_sizes(settings: WorkerSettings, device: str, measured: BatchLimits | None = None) -> ForwardSizes:
    """The sizes set, else those ``measured`` (:func:`measure_forwards`), else the device's: one segment on a
    CPU and ``GPU_BATCH`` on a GPU. Claims held: twice the segments on a GPU (the next forward fills while the
    last one's audio is stored), ``CPU_HELD_CLAIMS`` on a CPU."""
    gpu = device.startswith("cuda")
    fallback = BatchLimits(GPU_BATCH if gpu else 1)
    limits = measured or fallback
    segments = settings.batch_segments or limits.segments
    padded = settings.batch_ids or limits.padded_ids
    held = settings.held_claims or (2 * segments if gpu else max(CPU_HELD_CLAIMS, segments))
    return ForwardSizes(segments, padded, held)


def measure_forwards(
    settings: WorkerSettings, engine: Engine, clock: Callable[[], float] = time.perf_counter
) -> BatchLimits | None:
    """The knee of ``engine``'s throughput curve on its GPU, where a size is left to measure (None: not measured;
    a CPU keeps one segment a forward: on 2 cores batching the model was slower, tests/unit/test_batch_sizing.py).
    Blocking: seconds to a minute of the engine's time."""
    model = measurable(engine)
    gpu = engine.info.device.startswith("cuda")
    if model is None or not gpu or (settings.batch_segments and settings.batch_ids):
        return None
    curve = measure_curve(model, budget_s=MEASURE_BUDGET_S, clock=clock)
    limits = choose_limits(curve)
    log.info(
        "forward sizes measured",
        device=engine.info.device,
        segments=limits.segments,
        padded_ids=limits.padded_ids,
        curve=[(p.ids, p.batch, round(p.audio_s_per_s, 1), p.peak_bytes) for p in curve.points],
        free_bytes=curve.free_bytes,
        stopped=curve.stopped or None,
    )
    return limits


def choose_decoder_at_start(engine: Engine) -> str:
    """``VOXLOG_DECODER=auto``: eager and each compiled decoder measured on ``engine``'s device, the winner kept
    and logged with every trial (an engine with one way to run, eager). Blocking: compilations, on a GPU tens
    of seconds each."""
    inner = getattr(engine, "inner", engine)
    if not isinstance(inner, SwitchableEngine):
        return "eager"
    choice = choose_decoder(inner)
    log.info(
        "decoder chosen",
        device=inner.info.device,
        decoder=choice.mode,
        trials=[(t.mode, round(t.audio_s_per_s, 2), round(t.seconds, 1), t.failure or None) for t in choice.trials],
    )
    return choice.mode


def publish(sizes: ForwardSizes) -> None:
    """The sizes a worker runs with, on its /metrics."""
    FORWARD_LIMIT.labels("segments").set(sizes.segments)
    FORWARD_LIMIT.labels("padded_ids").set(sizes.padded_ids)
    FORWARD_LIMIT.labels("held_claims").set(sizes.held)
