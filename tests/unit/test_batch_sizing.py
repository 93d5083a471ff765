"""Forward sizes from the device's measured curve (``tts_node.batch_sizing``; issue 37, item 3).

The choice is tested on curves written out (one is the issue's own H200 table), the measuring on an engine
whose forwards advance a fake clock by a cost model (so every assertion is about what was measured and when
it stopped, not about time), and once on the random Kokoro checkpoint on the CPU.
"""

from __future__ import annotations

import pytest

from contracts.engine_info import BatchLimits
from tests.support.costed_engine import GIB, CostedEngine
from tts_node.batch_sizing import (
    BatchCurve,
    CurvePoint,
    choose_limits,
    measurable,
    measure_curve,
)

pytestmark = pytest.mark.unit


def curve(rows: dict[int, dict[int, float]], *, peak_per_id: int | None = None, free: int | None = None) -> BatchCurve:
    points = tuple(
        CurvePoint(batch, ids, rate, None if peak_per_id is None else 10**9 + peak_per_id * batch * ids)
        for ids, by_batch in rows.items()
        for batch, rate in by_batch.items()
    )
    return BatchCurve(points, free, None if peak_per_id is None else 10**9)


# The table, one H200, audio seconds a second: sentences batched by length, document parts.
H200 = {40: {1: 60.0, 8: 273.0, 32: 621.0, 64: 554.0, 128: 561.0}, 267: {1: 177.0, 16: 786.0, 32: 829.0, 48: 861.0}}


def test_the_h200_curve_gives_the_sentence_knee_in_segments_and_the_document_knee_in_padded_ids():
    limits = choose_limits(curve(H200))
    assert limits == BatchLimits(32, 32 * 267)  # documents: 829 is within 5% of 861, and 16's 786 is not
    assert limits.fits(32, 40)
    assert not limits.fits(33, 40)
    assert limits.fits(32, 267)
    assert not limits.fits(32, 300)  # 32 parts of 300 ids are more padded ids than the knee's


def test_the_memory_free_at_start_bounds_the_padded_ids():
    # 1 MiB a padded id beyond the model; 4 GiB free: 80% of it holds 3,276 padded ids.
    limits = choose_limits(curve(H200, peak_per_id=2**20, free=4 * GIB))
    assert limits.padded_ids == int(0.8 * 4 * GIB / 2**20)
    assert limits.segments == 32  # 32 sentences of 40 ids are 1,280 padded ids: within it
    tight = choose_limits(curve(H200, peak_per_id=2**20, free=GIB // 2))
    assert tight.padded_ids == int(0.8 * GIB / 2 / 2**20)
    assert tight.segments == tight.padded_ids // 40


def test_a_curve_that_gains_less_than_ten_percent_keeps_one_segment_a_forward():
    # Measured on this machine's 2 cores (random Kokoro): batching the model was slower.
    cpu = {40: {1: 3.05, 2: 2.61, 4: 2.73}, 267: {1: 2.21, 2: 2.12}}
    assert choose_limits(curve(cpu)) == BatchLimits(1)
    assert choose_limits(BatchCurve((), None, None)) == BatchLimits(1)
    slight = {40: {1: 10.0, 2: 10.9}}
    assert choose_limits(curve(slight)) == BatchLimits(1)


def test_one_measured_length_bounds_both_by_its_knee():
    assert choose_limits(curve({40: {1: 10.0, 2: 19.0, 4: 30.0, 8: 31.0}})) == BatchLimits(4, 160)


def test_a_forward_always_takes_its_first_segment():
    assert BatchLimits(4, 100).fits(1, 510)
    assert BatchLimits(1).fits(1, 10)
    assert not BatchLimits(1).fits(2, 10)
    assert BatchLimits(8).fits(8, 10_000)  # no padded-id bound


def test_measuring_doubles_the_batch_until_the_gain_stops():
    # 10 ms a forward and 0.1 ms a padded id: 40-id segments make 2,857 ids a second alone, then 4,444, 6,154,
    # 7,619, 8,649, 9,275 (+7%), 9,624 (+3.8%: flat), 9,808 (+1.9%: flat twice, the end).
    engine = CostedEngine(fixed=0.010, per_id=0.0001)
    measured = measure_curve(engine, lengths=(40,), clock=lambda: engine.now)
    assert [p.batch for p in measured.points] == [1, 2, 4, 8, 16, 32, 64, 128]
    assert [round(p.audio_s_per_s) for p in measured.points][-2:] == [9624, 9808]
    assert (measured.free_bytes, measured.base_bytes, measured.stopped) == (80 * GIB, 10**9, "")
    # The knee: 64 makes 98% of 128's; 32 makes 94.6%.
    assert choose_limits(measured) == BatchLimits(64, 64 * 40)
    # Each size is warmed once (untimed) and timed twice.
    assert engine.calls[:4] == [(1, 40), (1, 40), (1, 40), (2, 40)]


def test_a_forward_that_fails_ends_its_length_s_curve_and_gives_memory_back():
    engine = CostedEngine(fixed=0.050, per_id=0.00001, fails_at=16)
    measured = measure_curve(engine, lengths=(40, 267), clock=lambda: engine.now)
    assert [p.batch for p in measured.at(40)] == [1, 2, 4, 8]
    assert [p.batch for p in measured.at(267)] == [1, 2, 4, 8]
    assert engine.memory.released == 2
    assert "a batch of 16 x 40 ids failed: CUDA out of memory" in measured.stopped
    assert choose_limits(measured).segments == 8


def test_each_length_gets_its_share_of_the_time_and_lengths_are_cut_to_the_model_s():
    engine = CostedEngine(fixed=1.0, per_id=0.001, max_ids=100)
    measured = measure_curve(engine, lengths=(40, 267), budget_s=40.0, clock=lambda: engine.now)
    assert {p.ids for p in measured.points} == {40, 100}, "267 ids are more than the model takes"
    assert measured.at(100), "the longer length was measured too"
    assert "the time given was spent" in measured.stopped


def test_only_an_engine_that_tells_its_device_is_measured(random_kokoro_engine):
    assert measurable(random_kokoro_engine) is random_kokoro_engine.inner  # under SpeedRange
    assert measurable(object()) is None


@pytest.mark.timeout(400)
def test_the_torch_engine_is_measured_on_the_cpu(random_kokoro_engine):
    engine = measurable(random_kokoro_engine)
    assert engine is not None
    measured = measure_curve(engine, batches=(1, 2), lengths=(4, 8), rounds=1)
    assert [(p.ids, p.batch) for p in measured.points] == [(4, 1), (4, 2), (8, 1), (8, 2)]
    assert all(p.audio_s_per_s > 0 and p.peak_bytes is None for p in measured.points)
    assert measured.free_bytes is None
    assert not measured.stopped
    assert choose_limits(measured).segments in (1, 2)
