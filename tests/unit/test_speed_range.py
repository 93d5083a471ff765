"""Speeds 0.25 to 4.0: the model's own range, then pitch-preserving time-stretching (contracts.speed,
tts_node.time_stretch, tts_node.stretching)."""

from __future__ import annotations

import numpy as np
import pytest

from contracts.fingerprint import fingerprint, segment_key
from contracts.speed import NATIVE_SPEED_RANGE, SPEED_RANGE, split_speed, stretched
from tts_node import EngineInputError, load_engine
from tts_node.engine import Segment
from tts_node.time_stretch import time_stretch

RATE = 24000


def tone(hz: float, seconds: float) -> np.ndarray:
    return (0.5 * np.sin(2 * np.pi * hz * np.arange(int(RATE * seconds)) / RATE)).astype(np.float32)


def dominant_hz(samples: np.ndarray) -> float:
    middle = samples[len(samples) // 4 : 3 * len(samples) // 4]
    spectrum = np.abs(np.fft.rfft(middle * np.hanning(len(middle))))
    return float(np.fft.rfftfreq(len(middle), 1 / RATE)[int(np.argmax(spectrum))])


@pytest.mark.parametrize(
    ("speed", "model", "factor"),
    [(1.0, 1.0, 1.0), (0.25, 0.25, 1.0), (2.0, 2.0, 1.0), (4.0, 2.0, 2.0), (3.0, 2.0, 1.5), (0.2, 0.25, 0.8)],
)
def test_a_speed_is_the_models_up_to_its_range_and_stretched_beyond(speed, model, factor):
    assert split_speed(speed) == pytest.approx((model, factor))
    assert stretched(speed) == (factor != 1.0)
    assert SPEED_RANGE == (0.25, 4.0)
    assert NATIVE_SPEED_RANGE == (0.25, 2.0)


@pytest.mark.parametrize("factor", [0.5, 0.8, 1.5, 2.0])
def test_time_stretching_changes_the_length_and_keeps_the_pitch(factor):
    source = tone(220, 2.0)
    out = time_stretch(source, factor, RATE)
    assert len(out) == round(len(source) / factor)
    assert dominant_hz(out) == pytest.approx(220, abs=3), "the pitch is the speaker's, not resampled"
    assert np.sqrt(np.mean(out[RATE // 10 : -RATE // 10] ** 2)) == pytest.approx(0.5 / np.sqrt(2), rel=0.1)
    assert np.max(np.abs(out)) <= 0.55, "windows joined without doubling"


def test_audio_shorter_than_a_window_still_gets_its_length():
    assert len(time_stretch(np.ones(100, np.float32), 2.0, RATE)) == 50
    assert len(time_stretch(np.ones(0, np.float32), 0.5, RATE)) == 0


def test_only_stretched_speeds_change_fingerprints_and_segment_keys():
    base = dict(
        text="Hi.", voice="v", lang="en-us", engine="e", model_version="m", audio_format="wav", sample_rate=24000
    )
    # Recorded before time-stretching existed: speeds the model makes keep their fingerprints.
    assert fingerprint(**base, speed=1.0) == "f40d2ba5f822b1ad54cc0245b1644ef00da1eacc803f6d7e715167c6e1aa804e"
    assert fingerprint(**base, speed=2.0) != fingerprint(**base, speed=2.004)
    key = dict(engine="e", model_version="m", voice="v", ids=(1, 2))
    assert segment_key(**key, speed=2.0) != segment_key(**key, speed=2.004)


def test_the_engine_takes_every_speed_and_stretches_beyond_the_models():
    engine = load_engine("bench-sleep")
    segment = Segment(index=0, start=0, end=40, text="A sentence of forty characters, or so it", token_ids=(1,))
    native = engine.speak(segment, "bench_tone", 2.0)
    fast = engine.speak(segment, "bench_tone", 4.0)
    assert len(fast.audio) == round(len(native.audio) / 2)
    assert dominant_hz(fast.audio) == pytest.approx(dominant_hz(native.audio), abs=5)
    assert fast.words is not None
    assert native.words is not None
    assert [w.last for w in fast.words] == [min(len(fast.audio), round(w.last / 2)) for w in native.words]
    assert len(engine.synthesize(segment, "bench_tone", 4.0)) == len(fast.audio)
    for bad in (0.2, 4.5, float("nan")):
        with pytest.raises(EngineInputError, match=r"use 0\.25 to 4\.0"):
            engine.speak(segment, "bench_tone", bad)
