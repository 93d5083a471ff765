"""The decoder a worker keeps with ``VOXLOG_DECODER=auto`` (``tts_node.decoder_choice``; issue 37, item 4).

Measured on an engine whose forwards advance a fake clock (``tests.support.costed_engine``), each decoder
a factor faster or slower: every assertion is about what was measured and kept, not about time.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace

import pytest

from foundation.settings import EngineSettings
from tests.support.costed_engine import CostedEngine
from tts_node import load_engine
from tts_node.decoder_choice import GAIN, candidates, choose_decoder
from tts_node.engine import Speech, SpeechRequest
from tts_node.engine_thread import EngineThread
from tts_node.errors import EngineFailure
from tts_node.fifo import SynthesisQueue
from voxlog.composition import resources
from voxlog.composition.batch_sizes import choose_decoder_at_start

pytestmark = pytest.mark.unit


class DecoderEngine(CostedEngine):
    """A costed engine whose forward runs ``speedup[mode]`` times faster under each decoder; a decoder named in
    ``differs`` speaks other audio, one in ``falls_back`` hands over to eager at its first forward (as a
    compiler's failure does), one in ``fails`` cannot take a forward at all."""

    def __init__(
        self,
        speedup: dict[str, float],
        *,
        device: str = "cuda:0",
        differs: Sequence[str] = (),
        falls_back: Sequence[str] = (),
        fails: Sequence[str] = (),
    ) -> None:
        super().__init__(fixed=0.010, per_id=0.0001)
        self.info = replace(self.info, device=device)
        self.speedup, self.differs, self.falls_back, self.fails = speedup, differs, falls_back, fails
        self.mode = "eager"
        self.used: list[str] = []

    @property
    def decoder(self) -> str:
        return self.mode

    def use_decoder(self, mode: str) -> None:
        self.used.append(mode)
        self.mode = mode

    def speak_batch(self, requests: Sequence[SpeechRequest]) -> list[Speech]:
        if self.mode in self.fails:
            raise EngineFailure("CUDA out of memory")
        started = self.now
        speeches = super().speak_batch(requests)
        self.now = started + (self.now - started) / self.speedup[self.mode]
        if self.mode in self.differs:
            speeches = [Speech(s.audio + 0.01, s.words) for s in speeches]
        if self.mode in self.falls_back:
            self.mode = "eager"
        return speeches


def _choose(engine: DecoderEngine, modes: Sequence[str] | None = None):
    return choose_decoder(engine, modes, clock=lambda: engine.now)


def test_the_fastest_decoder_that_speaks_the_same_is_kept():
    engine = DecoderEngine({"eager": 1.0, "compile": 1.3, "graphs": 1.6})
    choice = _choose(engine)
    assert choice.mode == "graphs"
    assert [t.mode for t in choice.trials] == ["eager", "compile", "graphs"]
    eager, compiled, graphs = (t.audio_s_per_s for t in choice.trials)
    assert compiled == pytest.approx(1.3 * eager)
    assert graphs == pytest.approx(1.6 * eager)
    assert all(t.failure == "" and t.max_difference == 0.0 for t in choice.trials)
    assert (engine.used[-1], engine.decoder) == ("graphs", "graphs"), "the engine is left running it"


def test_a_gain_under_five_percent_keeps_eager():
    engine = DecoderEngine({"eager": 1.0, "compile": GAIN - 0.02, "graphs": 0.8})
    choice = _choose(engine)
    assert choice.mode == "eager"
    assert engine.decoder == "eager"


def test_a_cpu_measures_compile_alone_cuda_graphs_need_cuda():
    assert candidates("cpu") == ("compile",)
    assert candidates("cuda:1") == ("compile", "graphs")
    engine = DecoderEngine({"eager": 1.0, "compile": 1.2}, device="cpu")
    choice = _choose(engine)
    assert [t.mode for t in choice.trials] == ["eager", "compile"]
    assert choice.mode == "compile"
    # A CPU's forwards carry one segment: those are measured.
    assert {count for count, _ in engine.calls} == {1, 2}, "one segment a forward, and the two-length check"


def test_a_faster_decoder_that_speaks_otherwise_is_not_kept():
    engine = DecoderEngine({"eager": 1.0, "compile": 1.2, "graphs": 2.0}, differs=("graphs",))
    choice = _choose(engine)
    assert choice.mode == "compile"
    graphs = choice.trials[2]
    assert graphs.max_difference == pytest.approx(0.01)
    assert graphs.failure == "its audio differs from eager's by 0.01"


def test_a_decoder_that_falls_back_or_fails_is_not_kept_and_eager_stays():
    engine = DecoderEngine({"eager": 1.0, "compile": 3.0, "graphs": 3.0}, falls_back=("compile",), fails=("graphs",))
    choice = _choose(engine)
    assert choice.mode == "eager"
    compiled, graphs = choice.trials[1:]
    assert compiled.failure == "it failed and fell back to eager (logged)"
    assert graphs.failure == "a forward failed: CUDA out of memory"
    assert graphs.audio_s_per_s == 0.0
    assert engine.memory.released == 1, "the failed forward's memory is given back"
    assert engine.decoder == "eager"


def test_an_eager_decoder_that_fails_is_raised_not_measured_around():
    engine = DecoderEngine({"eager": 1.0, "compile": 2.0}, fails=("eager",))
    with pytest.raises(EngineFailure, match="out of memory"):
        _choose(engine)


def test_an_engine_with_one_way_to_run_keeps_eager_at_start():
    assert choose_decoder_at_start(load_engine("bench-sleep")) == "eager"


async def test_regression_auto_loads_the_engine_eager_then_measures_it_on_the_thread_that_serves_its_forwards(
    monkeypatch,
):
    """It measured on a start-up thread of its own and the FIFO ran the forwards on another: the CUDA graphs
    a ``graphs`` decoder recorded while it was chosen and warmed (the compiler's graph trees are per thread)
    were recorded again under the first requests."""
    loaded_on: list[int] = []
    measured: list[tuple[object, int]] = []

    def load(*args: object, **kwargs: object) -> object:
        loaded_on.append(threading.get_ident())
        return load_engine(*args, **kwargs)

    monkeypatch.setattr(resources, "load_engine", load)
    monkeypatch.setattr(
        resources, "choose_decoder_at_start", lambda engine: measured.append((engine, threading.get_ident())) or "eager"
    )
    thread = EngineThread()
    try:
        engine = await resources.load_configured_engine(EngineSettings(engine="bench-sleep", decoder="auto"), thread)
        fifo = SynthesisQueue(engine, thread)
        await fifo.start()
        served_on = await fifo.call(threading.get_ident)
        await fifo.stop(grace_s=5)
        assert not thread.closed, "the queue leaves the thread it was given to its owner"
        assert measured == [(engine, served_on)]
        assert loaded_on == [served_on]
        assert served_on != threading.get_ident(), "off the event loop"
        measured.clear()
        await resources.load_configured_engine(EngineSettings(engine="bench-sleep"), thread)
        assert measured == [], "eager, the default, measures nothing"
    finally:
        thread.close()
