"""Kokoro's decoder compiled or replayed from CUDA graphs (``tts_node.kokoro_compile``): its frame buckets, its
warm-up at start-up, and its fallback to the eager decoder.

That a compiled decoder speaks what the eager one speaks is tested beside the batch it runs
(tests/unit/test_kokoro_batch.py: one trace by torch's compiler, the costly part). Here nothing is traced:
the compiled callable is replaced where a test needs it to fail, and watched where it needs its shapes.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

import tts_node.kokoro_torch
from tts_node import TtsNodeError, load_engine
from tts_node.kokoro_batch import BatchItem, forward_batch, segment_seed
from tts_node.kokoro_compile import EAGER, CompiledDecoding, frame_bucket

pytestmark = pytest.mark.timeout(400)  # two forwards of the model, made once in the module's fixtures
TOLERANCE = 1e-4  # of full scale per sample, as a batch against each item alone (tests/unit/test_kokoro_batch.py)


@pytest.fixture(scope="module")
def model(random_kokoro_engine):
    return random_kokoro_engine.inner._model


@pytest.fixture(scope="module")
def items(random_kokoro, random_kokoro_engine):
    """Two segments of other lengths: a batch with padding."""
    pack = torch.load(random_kokoro / "voices" / "af_one.pt", weights_only=True).reshape(-1, 256)
    ids = [random_kokoro_engine.segment(text, "en-us")[0].token_ids for text in ("Hi there.", "Yes.")]
    return [BatchItem(i, pack[len(i)], 1.0, segment_seed(i, "af_one", 1.0)) for i in ids]


def _forward(model, items, decoding):
    with torch.inference_mode():
        return forward_batch(model, items, decoding)


def _failing(*args, **kwargs):
    raise RuntimeError("this backend cannot take it")


def test_a_compiled_decoder_that_fails_hands_every_forward_to_the_eager_one(model, items, caplog):
    decoding = CompiledDecoding(model.decoder, "graphs", backend="eager")
    decoding._compiled = _failing  # what torch raises from a compilation it cannot make (BackendCompilerFailed)
    with caplog.at_level(logging.WARNING, logger="tts_node.kokoro_compile"):
        outputs = _forward(model, items, decoding)
    assert decoding.mode == "eager"
    assert "cannot take it" in (decoding.failure or "")
    assert "the graphs decoder failed; eager from now on" in caplog.text
    for ours, theirs in zip(outputs, _forward(model, items, EAGER), strict=True):
        assert ours.durations == theirs.durations
        assert float(np.abs(ours.audio - theirs.audio).max()) < TOLERANCE
    # From then on eager's own frames (no bucket), and the compiled callable is not called again.
    assert decoding.frames_for(101) == 101
    decoding._compiled = None  # calling it now would raise a TypeError, not a logged failure
    _forward(model, items[:1], decoding)


def test_warming_runs_each_batch_over_a_doubling_ladder_of_frames_up_to_the_longest(model):
    shapes: list[tuple[int, int]] = []
    decoding = CompiledDecoding(model.decoder, "graphs", backend="eager")

    def watched(asr, *rest):
        shapes.append((asr.shape[0], asr.shape[-1]))
        return torch.zeros(1), torch.zeros(1)

    decoding._compiled = watched
    # Every range warmed is a graph of its own: more than torch's default 8, after which it stops compiling.
    assert torch._dynamo.config.recompile_limit >= 64
    with torch.inference_mode():
        assert decoding.warm(model.decoder, (2, 3), 37, torch.device("cpu")) == 8
    # Doubling from 8 frames, then the longest as a forward of this decoder pads it (graphs: to its bucket).
    assert shapes == [(b, t) for t in (8, 16, 32, frame_bucket(37)) for b in (2, 3)]
    assert frame_bucket(37) == 40
    assert decoding.failure is None


def test_a_decoder_that_fails_while_warming_stops_warming_and_runs_eager(model):
    decoding = CompiledDecoding(model.decoder, "compile", backend="eager")
    decoding._compiled = _failing
    with torch.inference_mode():
        assert decoding.warm(model.decoder, (1, 2), 64, torch.device("cpu")) == 1
    assert decoding.mode == "eager"
    assert "cannot take it" in (decoding.failure or "")


def test_the_engine_warms_a_compiled_decoder_at_the_switch(random_kokoro_engine, monkeypatch):
    """Compiled at start-up, not under a request: the switch warms the decoder's shapes (on a CPU one segment a
    forward, up to the longest segment's frames) before the first forward meets it."""
    inner = random_kokoro_engine.inner
    warmed: list[tuple[tuple[int, ...], int]] = []

    def warm(self, decoder, batches, most_frames, device):
        warmed.append((tuple(batches), most_frames))
        return 0

    monkeypatch.setattr(CompiledDecoding, "warm", warm)
    try:
        inner.use_decoder("compile")
        assert inner.decoder == "compile"
        assert warmed == [((1,), tts_node.kokoro_torch.WARM_FRAMES)]
        inner.use_decoder("eager")
        inner.use_decoder("compile")
        assert len(warmed) == 1, "compiled once, whatever switches back"
    finally:
        inner.use_decoder("eager")
        inner._decodings.pop("compile", None)
    assert inner.decoder == "eager"


def test_frames_are_padded_by_an_eighth_at_most_to_a_few_dozen_sizes():
    sizes = set()
    for frames in range(1, 3_000):
        bucket = frame_bucket(frames)
        assert bucket >= frames
        assert bucket <= frames + max(1, frames // 8)
        assert frame_bucket(bucket) == bucket
        sizes.add(bucket)
    # From a word (about 10 frames) to a document part (about 1,000): what a worker meets.
    assert len({frame_bucket(n) for n in range(10, 1_200)}) < 70
    assert len(sizes) < 110


def test_graphs_need_cuda_and_other_engines_take_eager_only(random_kokoro):
    with pytest.raises(TtsNodeError, match=r"graphs decoder .* cuda:N device only"):
        load_engine("kokoro", model_dir=random_kokoro, decoder="graphs")
    with pytest.raises(TtsNodeError, match=r"decoder 'compile' is the kokoro \(torch\) engine's"):
        load_engine("kokoro-onnx", decoder="compile")
    with pytest.raises(TtsNodeError, match="decoder must be one of eager, compile, graphs, not 'fast'"):
        load_engine("kokoro", model_dir=random_kokoro, decoder="fast")
