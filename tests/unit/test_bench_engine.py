"""The benchmark engine and the engine counters the benchmarks read."""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from bench.paced import BenchEngineSettings, install
from consumers.errors import InputRejected
from foundation.metrics import AUDIO_SECONDS, SEGMENTS, SYNTHESIS_SECONDS, parse_totals
from foundation.settings import EngineSettings, WorkerSettings
from tts_node import EngineFailure, EngineInputError, TtsNodeError, bench_sleep, load_engine
from tts_node.bench_sleep import MIN_AUDIO_S, SAMPLE_RATE, BenchSleepEngine, audio_seconds, char_ids
from tts_node.segmenter import MAX_TOKENS, segment_text, sentence_spans
from voxlog.engine_adapter import TtsNodeSpeechEngine

LONG_SENTENCE = " ".join(f"Word{i}" for i in range(300)) + "."  # ~2,300 characters, no clause to cut at


@pytest.fixture
def slept(monkeypatch) -> list[float]:
    """The durations bench-sleep asks ``time.sleep`` for; nothing actually sleeps."""
    requested: list[float] = []
    monkeypatch.setattr(bench_sleep.time, "sleep", requested.append)
    return requested


def samples(seconds: float) -> int:
    return round(SAMPLE_RATE * seconds)


@pytest.fixture
def paced() -> Iterator[Callable[..., None]]:
    """Paces this process's benchmark engine as bench.paced does (the maker put back after the test)."""
    makers: list[bench_sleep.Maker] = []
    yield lambda **pace: makers.append(install(BenchEngineSettings(**pace)))
    if makers:
        bench_sleep.make_with(makers[0])


def test_bench_sleep_is_never_the_default_engine_and_its_pace_no_setting(monkeypatch):
    monkeypatch.delenv("VOXLOG_ENGINE", raising=False)
    assert EngineSettings().engine == "kokoro-onnx"
    # Issue 38, item 3: the pace and fault are bench.paced's to read, not voxlog's settings.
    monkeypatch.setenv("VOXLOG_BENCH_SYNTH_MS", "50")
    monkeypatch.setenv("VOXLOG_BENCH_FAULT", "fail:doomed")
    assert not {name for name in WorkerSettings.model_fields if name.startswith("bench")}
    assert load_engine("bench-sleep").info.model_version == "sleep-0ms"  # `voxlog worker` ignores them


def test_bench_sleep_sleeps_its_configured_time_and_returns_tone_as_long_as_the_text(slept, paced):
    paced(synth_ms=50)
    engine = load_engine("bench-sleep")
    assert engine.info.name == "bench-sleep"
    assert engine.info.model_version == "sleep-50ms"
    segment, second = engine.segment("One sentence. And another.", "en-us")
    assert (segment.start, segment.end, segment.text) == (0, 13, "One sentence.")
    assert (second.index, second.start, second.end, second.text) == (1, 14, 26, "And another.")
    audio = engine.synthesize(segment, "bench_tone", 1.0)
    assert slept == [pytest.approx(0.05)]
    assert audio.dtype == np.float32
    assert len(audio) == samples(len("One sentence.") / 15)
    assert 0.05 < float(np.abs(audio).max()) <= 0.1 + 1e-6


def test_the_per_character_cost_is_configured_and_named_in_the_model_version_only_when_set(monkeypatch, paced):
    monkeypatch.setenv("VOXLOG_BENCH_MS_PER_CHAR", "2.5")
    assert BenchEngineSettings().ms_per_char == 2.5
    paced(**BenchEngineSettings().model_dump())  # what bench.paced installs from the environment
    engine = load_engine("bench-sleep")
    assert engine.info.model_version == "sleep-0ms-2.5mspc"
    assert BenchSleepEngine(synth_ms=200, ms_per_char=0).info.model_version == "sleep-200ms"
    assert BenchSleepEngine().info.model_version == "sleep-0ms"  # what benchmarks and fingerprints used so far
    with pytest.raises(ValueError, match="ms_per_char"):
        BenchSleepEngine(ms_per_char=-1)
    with pytest.raises(ValueError, match="ms_per_char"):
        BenchSleepEngine(ms_per_char=float("nan"))


def test_a_long_text_splits_as_the_segmenter_splits_it(corpus):
    paragraphs = [line for line in (corpus / "paragraphs.txt").read_text(encoding="utf-8").splitlines() if line]
    text = "\n".join([*paragraphs, LONG_SENTENCE, *paragraphs])
    segments = BenchSleepEngine().segment(text, "en-us")
    expected = segment_text(text, lambda piece: [0] * len(piece), MAX_TOKENS, quick_start=True)
    assert [(s.start, s.end) for s in segments] == [(s.start, s.end) for s in expected]
    assert len(segments) >= len(sentence_spans(text)) + 3  # a segment per sentence, the long one in four or more
    assert all(1 <= len(s.token_ids) == len(s.text) <= MAX_TOKENS for s in segments)
    start = text.index(LONG_SENTENCE)
    packed = [s for s in segments if start <= s.start and s.end <= start + len(LONG_SENTENCE)]
    assert len(packed) >= math.ceil(len(LONG_SENTENCE) / MAX_TOKENS) > 1
    assert all(len(s.text) > MAX_TOKENS - len(" Word299") for s in packed[:-1]), "packed as full as words allow"


def test_segments_cover_the_text_in_order():
    text = "  Dr. Smith arrived at 3.30 p.m. today!  " + LONG_SENTENCE + "\nAnd then, quietly, he left...  "
    segments = BenchSleepEngine().segment(text, "en-us")
    assert [s.index for s in segments] == list(range(len(segments)))
    position = 0
    for s in segments:
        assert s.text == text[s.start : s.end]
        assert not text[position : s.start].strip(), "nothing speakable falls between segments"
        position = s.end
    assert not text[position:].strip()
    assert segments[0].text == "Dr. Smith arrived at 3.30 p.m. today!"  # no cut after a title, a number or a.m.


def test_the_first_segment_is_the_quick_start_clause():
    text = "The quick brown fox jumps over the lazy dog, and then it runs away. It sleeps."
    segments = BenchSleepEngine().segment(text, "en-us")
    assert [s.text for s in segments] == [
        "The quick brown fox jumps over the lazy dog,",
        "and then it runs away.",
        "It sleeps.",
    ]
    short = BenchSleepEngine().segment("Short, then more words here. Done.", "en-us")
    assert [s.text for s in short] == ["Short, then more words here.", "Done."]  # under four words: no cut


def test_symbols_alone_have_nothing_to_speak_as_in_the_real_engines():
    engine = BenchSleepEngine()
    for text in ("🎉🚀", "... !!", "  "):
        with pytest.raises(EngineInputError, match="nothing to speak"):
            engine.segment(text, "en-us")
    assert [s.text for s in engine.segment("Yes. ... No.", "en-us")] == ["Yes.", "No."]
    assert char_ids("…") == []
    assert char_ids("a!") == [ord("a"), ord("!")]


def test_sleep_is_a_fixed_cost_plus_one_per_character(slept):
    engine = BenchSleepEngine(synth_ms=10, ms_per_char=2)
    segments = engine.segment("Hi. " + LONG_SENTENCE, "en-us")
    for segment in segments:
        engine.synthesize(segment, "bench_tone", 1.0)
    assert slept == [pytest.approx(0.010 + 0.002 * len(s.text)) for s in segments]
    assert slept[-2] > 10 * slept[0]  # a full 510-character segment against "Hi."

    slept.clear()
    free = BenchSleepEngine()
    free.synthesize(free.segment(LONG_SENTENCE, "en-us")[0], "bench_tone", 1.0)
    assert slept == [], "no cost configured: no sleep at all"


def test_audio_length_grows_with_the_text_and_shrinks_with_speed():
    engine = BenchSleepEngine()
    [hi] = engine.segment("Hi.", "en-us")
    [longer] = engine.segment("The meeting starts in five minutes.", "en-us")
    full = engine.segment(LONG_SENTENCE, "en-us")[0]
    assert len(full.text) > MAX_TOKENS - len(" Word299")
    lengths = [len(engine.synthesize(s, "bench_tone", 1.0)) for s in (hi, longer, full)]
    assert lengths == [samples(MIN_AUDIO_S), samples(35 / 15), samples(len(full.text) / 15)]
    assert len(engine.synthesize(longer, "bench_tone", 2.0)) == samples(audio_seconds(longer.text, 2.0))
    assert audio_seconds(longer.text, 2.0) == pytest.approx(audio_seconds(longer.text) / 2)
    with pytest.raises(EngineInputError, match="speed"):
        engine.synthesize(longer, "bench_tone", 0.0)


def test_bench_sleep_audio_differs_by_text_so_blobs_differ():
    engine = BenchSleepEngine()
    a, b = (engine.synthesize(engine.segment(t, "en-us")[0], "bench_tone", 1.0) for t in ("first", "second"))
    assert not np.array_equal(a, b)


def test_regression_two_texts_of_one_length_made_the_same_tone_and_so_one_blob():
    """The pitch was one of 400 steps: "Distinct request number 03," and "... 12," (one length) drew the same, so
    their results shared one blob, and test_bounded_cache saw job 3 outlive the jobs after it."""
    engine = BenchSleepEngine()
    texts = [f"Distinct request number {i:02d}," for i in range(16)]
    tones = [engine.synthesize(engine.segment(t, "en-us")[0], "bench_tone", 1.0).tobytes() for t in texts]
    assert len(set(tones)) == len(texts)


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
    assert audio == pytest.approx(audio_seconds("Count me."))
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
    assert len(failing.synthesize(fine, "bench_tone", 1.0)) == samples(audio_seconds("Fine words."))
    with pytest.raises(EngineFailure, match="poison"):
        failing.synthesize(poisoned, "bench_tone", 1.0)

    hanging = BenchSleepEngine(fault="hang:wedge")
    [wedged] = hanging.segment("A wedge.", "en-us")
    raised: list[BaseException] = []

    def synthesize() -> None:
        try:
            hanging.synthesize(wedged, "bench_tone", 1.0)
        except EngineFailure as exc:
            raised.append(exc)

    worker = threading.Thread(target=synthesize, daemon=True)
    worker.start()
    assert hanging.hung.wait(10), "the call reached the hang"
    assert worker.is_alive(), "and only release_hung, which nothing in a process calls, lets it go"
    hanging.release_hung()
    worker.join(10)
    assert not worker.is_alive()
    assert [str(e) for e in raised] == ["released from a hang"]
    with pytest.raises(ValueError, match="hang:TEXT, fail:TEXT or gate:TEXT@PATH"):
        BenchSleepEngine(fault="explode:now")
    with pytest.raises(ValueError, match="a named pipe"):
        BenchSleepEngine(fault="gate:nowhere")


def test_a_gate_holds_the_first_marked_segment_until_the_test_opens_and_closes_its_pipe(tmp_path):
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    engine = BenchSleepEngine(fault=f"gate:Held@{gate}")
    held, after = engine.segment("Held here. Held again.", "en-us")
    done = threading.Event()
    worker = threading.Thread(target=lambda: (engine.synthesize(held, "bench_tone", 1.0), done.set()), daemon=True)
    worker.start()
    assert worker.is_alive()
    with open(gate, "wb"):  # blocks until the engine's reader opened it: the segment is at the gate
        assert not done.is_set(), "the segment waits while the pipe is open"
    worker.join(10)
    assert done.is_set(), "closed: the segment went on"
    assert len(engine.synthesize(after, "bench_tone", 1.0)) > 0, "only the first marked segment waits"


def test_the_adapter_gives_each_words_characters_and_milliseconds_in_its_segment():
    adapter = TtsNodeSpeechEngine(BenchSleepEngine(synth_ms=0))
    text = "Lead in. Two words"
    segment = adapter.plan(text, "en-us")[-1]
    rendered = adapter.render(segment, "bench_tone", 1.0)
    words = rendered.words or ()
    assert [text[w.start : w.end] for w in words] == ["Two", "words"], "characters of the request text"
    length_ms = 1000 * rendered.samples.size / 24000
    assert words[0].start_ms == 0
    assert words[-1].end_ms == round(length_ms)
