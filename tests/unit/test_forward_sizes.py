"""A worker's forward sizes (``voxlog.composition.batch_sizes``): set, measured at start-up, or the device's."""

from __future__ import annotations

import pytest

from contracts.engine_info import BatchLimits
from foundation.settings import WorkerSettings
from tests.unit.test_batch_sizing import CostedEngine
from voxlog.composition.batch_sizes import CPU_HELD_CLAIMS, GPU_BATCH, ForwardSizes, forward_sizes, measure_forwards
from voxlog.composition.configs import worker_config

pytestmark = pytest.mark.unit


def settings(**values: object) -> WorkerSettings:
    return WorkerSettings(**values)  # type: ignore[arg-type]


def test_where_nothing_is_measured_the_device_decides():
    assert forward_sizes(settings(), "cpu") == ForwardSizes(1, 0, CPU_HELD_CLAIMS)
    assert forward_sizes(settings(), "cuda:0") == ForwardSizes(GPU_BATCH, 0, 2 * GPU_BATCH)


def test_measured_sizes_are_used_and_a_size_set_is_kept():
    measured = BatchLimits(48, 9000)
    assert forward_sizes(settings(), "cuda:0", measured) == ForwardSizes(48, 9000, 96)
    assert forward_sizes(settings(batch_segments=16), "cuda:0", measured) == ForwardSizes(16, 9000, 32)
    assert forward_sizes(settings(batch_ids=4000, held_claims=7), "cuda:0", measured) == ForwardSizes(48, 4000, 7)
    # A CPU measured to gain from batches holds at least as many claims as a forward carries.
    assert forward_sizes(settings(), "cpu", BatchLimits(8, 320)) == ForwardSizes(8, 320, 8)


def test_the_worker_s_config_carries_the_sizes():
    config = worker_config(settings(), None, ForwardSizes(24, 5000, 48))
    assert (config.batch, config.batch_padded_ids, config.held_claims) == (24, 5000, 48)


class Model(CostedEngine):
    def __init__(self, device: str) -> None:
        super().__init__(fixed=0.010, per_id=0.0001)
        self.info = self.info.__class__(**{**self.info.__dict__, "device": device})


def test_a_gpu_engine_that_tells_its_memory_is_measured_by_default():
    model = Model("cuda:0")
    limits = measure_forwards(settings(), model, lambda: model.now)  # type: ignore[arg-type]
    # Sentences: the knee at 64 (tests/unit/test_batch_sizing.py); documents at 8 (9,553 of 9,771 ids a
    # second), 2,136 padded ids: fewer than 64 sentences take.
    assert limits == BatchLimits(64, 64 * 40)
    assert model.calls, "the engine's forward was measured"


def test_a_cpu_is_not_measured_and_nothing_is_measured_when_both_sizes_are_set():
    cpu = Model("cpu")
    assert measure_forwards(settings(), cpu) is None  # type: ignore[arg-type]
    gpu = Model("cuda:0")
    assert measure_forwards(settings(batch_segments=8, batch_ids=800), gpu) is None  # type: ignore[arg-type]
    assert not cpu.calls
    assert not gpu.calls
    assert measure_forwards(settings(batch_segments=8), gpu, lambda: gpu.now) is not None  # type: ignore[arg-type]


def test_an_engine_that_cannot_tell_its_device_is_not_measured():
    from tts_node.bench_sleep import BenchSleepEngine

    engine = BenchSleepEngine(device="cuda:0")
    assert measure_forwards(settings(), engine) is None  # type: ignore[arg-type]
