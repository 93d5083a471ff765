"""The benchmark engine and the engine counters the benchmarks read."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from consumers.errors import InputRejected
from foundation.metrics import AUDIO_SECONDS, SEGMENTS, SYNTHESIS_SECONDS, parse_totals
from foundation.settings import EngineSettings, WorkerSettings
from tts_node import EngineFailure, EngineInputError, TtsNodeError, load_engine
from tts_node.bench_sleep import AUDIO_S, SAMPLE_RATE, BenchSleepEngine
from voxlog.engine_adapter import TtsNodeSpeechEngine


def test_bench_sleep_is_never_the_default_engine(monkeypatch):
    monkeypatch.delenv("VOXLOG_ENGINE", raising=False)
    assert EngineSettings().engine == "kokoro-onnx"
    assert WorkerSettings().bench_synth_ms == 0.0


def test_bench_sleep_sleeps_its_configured_time_and_returns_a_second_of_tone():
    engine = load_engine("bench-sleep", bench_synth_ms=50)
    assert engine.info.name == "bench-sleep"
    assert engine.info.model_version == "sleep-50ms"
    segment, second = engine.segment("One sentence. And another.", "en-us")
    assert (segment.start, segment.end, segment.text) == (0, 13, "One sentence.")
    assert (second.index, second.start, second.end, second.text) == (1, 14, 26, "And another.")
    started = time.perf_counter()
    audio = engine.synthesize(segment, "bench_tone", 1.0)
    assert time.perf_counter() - started >= 0.05
    assert audio.dtype == np.float32
    assert len(audio) == int(SAMPLE_RATE * AUDIO_S)
    assert 0.05 < float(np.abs(audio).max()) <= 0.1 + 1e-6


def test_bench_sleep_audio_differs_by_text_so_blobs_differ():
    engine = BenchSleepEngine()
    a, b = (engine.synthesize(engine.segment(t, "en-us")[0], "bench_tone", 1.0) for t in ("first", "second"))
    assert not np.array_equal(a, b)


@pytest.mark.parametrize(
    ("text", "lang", "voice"),
    [("  ", "en-us", "bench_tone"), ("hello", "fr-fr", "bench_tone"), ("hello", "en-us", "af_heart")],
)
def test_bench_sleep_rejects_what_it_cannot_speak(text, lang, voice):
    engine = BenchSleepEngine()
    with pytest.raises(EngineInputError):
        engine.synthesize(engine.segment(text, lang)[0], voice, 1.0)


def test_bench_sleep_accepts_cuda_devices_and_refuses_others():
    assert load_engine("bench-sleep", device="cuda:1").info.device == "cuda:1"
    with pytest.raises(TtsNodeError, match="runs on"):
        load_engine("bench-sleep", device="tpu")
    with pytest.raises(ValueError, match="synth_ms"):
        BenchSleepEngine(synth_ms=-1)


def test_the_adapter_counts_engine_time_audio_and_segments():
    adapter = TtsNodeSpeechEngine(BenchSleepEngine(synth_ms=20))
    labels = ("bench-sleep",)
    before = [m.labels(*labels)._value.get() for m in (SYNTHESIS_SECONDS, AUDIO_SECONDS, SEGMENTS)]
    [segment] = adapter.plan("Count me.", "en-us")
    adapter.render(segment, "bench_tone", 1.0)
    with pytest.raises(InputRejected):
        adapter.render(segment, "nobody", 1.0)
    after = [m.labels(*labels)._value.get() for m in (SYNTHESIS_SECONDS, AUDIO_SECONDS, SEGMENTS)]
    synthesis, audio, segments = (a - b for a, b in zip(after, before, strict=True))
    assert synthesis >= 0.02
    assert audio == pytest.approx(AUDIO_S)
    assert segments == 1  # a refused call is engine time, not a rendered segment


def test_parse_totals_sums_labels_and_skips_comments():
    text = (
        "# HELP voxlog_segments_rendered_total Segments\n"
        "# TYPE voxlog_segments_rendered_total counter\n"
        'voxlog_segments_rendered_total{engine="a"} 3.0\n'
        'voxlog_segments_rendered_total{engine="b"} 4.0\n'
        "process_cpu_seconds_total 1.5e+00\n"
    )
    assert parse_totals(text) == {"voxlog_segments_rendered_total": 7.0, "process_cpu_seconds_total": 1.5}


def test_fault_modes_hang_or_fail_only_the_marked_segments():
    failing = BenchSleepEngine(fault="fail:poison")
    fine, poisoned = failing.segment("Fine words. A poison pill.", "en-us")
    assert len(failing.synthesize(fine, "bench_tone", 1.0)) == int(SAMPLE_RATE * AUDIO_S)
    with pytest.raises(EngineFailure, match="poison"):
        failing.synthesize(poisoned, "bench_tone", 1.0)

    hanging = BenchSleepEngine(fault="hang:wedge")
    [wedged] = hanging.segment("A wedge.", "en-us")
    outcome: list[BaseException] = []

    def synthesize() -> None:
        try:
            hanging.synthesize(wedged, "bench_tone", 1.0)
        except EngineFailure as exc:
            outcome.append(exc)

    worker = threading.Thread(target=synthesize, daemon=True)
    worker.start()
    assert hanging.hung.wait(10), "the call reached the hang"
    assert worker.is_alive(), "and only release_hung, which nothing in a process calls, lets it go"
    hanging.release_hung()
    worker.join(10)
    assert not worker.is_alive()
    assert [str(e) for e in outcome] == ["released from a hang"]
    with pytest.raises(ValueError, match="hang:TEXT or fail:TEXT"):
        BenchSleepEngine(fault="explode:now")
