"""Kokoro's decoder compiled, or replayed from CUDA graphs over bucketed frames, speaks what the eager one
speaks (``tts_node.kokoro_compile``), and hands over to it when it fails.

The compiled path is traced by torch's compiler (TorchDynamo) with its ``eager`` backend: the code voxlog
hands the compiler, its graph breaks and guards, run as traced. Inductor's code generation is torch's own and
costs minutes on 2 cores; ``python -m bench.gpu`` measures it where it runs in service.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

import tts_node.kokoro_torch
from tts_node import TtsNodeError, load_engine
from tts_node.engine import SpeechRequest, speak_batch
from tts_node.kokoro_batch import BatchItem, forward_batch, segment_seed
from tts_node.kokoro_compile import EAGER, CompiledDecoding, frame_bucket
from tts_node.kokoro_torch import WEIGHTS_NAME, load_kmodel
from tts_node.random_checkpoint import kokoro_config

pytestmark = pytest.mark.timeout(400)  # the model's forwards, made once in the module's fixtures
TOLERANCE = 1e-4  # of full scale per sample, as a batch against each item alone (tests/unit/test_kokoro_batch.py)
TEXTS = ("Hi there.", "A longer sentence, with a clause or two in it.", "Yes.")


@pytest.fixture(scope="module")
def model(random_kokoro):
    return load_kmodel(kokoro_config(), random_kokoro / WEIGHTS_NAME, torch.device("cpu"))


@pytest.fixture(scope="module")
def items(random_kokoro, random_kokoro_engine):
    """Three segments of mixed lengths: a batch with padding every layer must ignore."""
    pack = torch.load(random_kokoro / "voices" / "af_one.pt", weights_only=True).reshape(-1, 256)
    ids = [random_kokoro_engine.segment(text, "en-us")[0].token_ids for text in TEXTS]
    return [BatchItem(i, pack[len(i)], 1.0, segment_seed(i, "af_one", 1.0)) for i in ids]


@pytest.fixture(autouse=True)
def fresh_compiler():
    """Each test's compilations its own: the compiler keeps a few per function and then runs it uncompiled."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _forward(model, items, decoding):
    with torch.inference_mode():
        return forward_batch(model, items, decoding)


@pytest.fixture(scope="module")
def eager(model, items):
    return _forward(model, items, EAGER)


def _assert_same_speech(outputs, expected) -> None:
    for ours, theirs in zip(outputs, expected, strict=True):
        assert ours.durations == theirs.durations
        assert ours.audio.shape == theirs.audio.shape
        assert float(np.abs(ours.audio - theirs.audio).max()) < TOLERANCE


def test_a_compiled_decoder_speaks_what_the_eager_one_speaks_over_frames_padded_to_a_bucket(model, items, eager):
    """The graphs decoder is the compiled one over bucketed frames (CUDA graphs are inductor's, on CUDA): a
    batch of mixed lengths padded past its longest item, and a lone item, equal eager's."""
    longest = max(sum(output.durations) for output in eager)
    assert frame_bucket(longest) > longest, "the test's batch must be padded to show anything"
    decoding = CompiledDecoding(model.decoder, "graphs", backend="eager")
    assert decoding.frames_for(longest) == frame_bucket(longest)
    _assert_same_speech(_forward(model, items, decoding), eager)
    # A lone item: the compiled body masks a batch of one, where eager runs the library's own kernels.
    (alone,) = _forward(model, items[1:2], decoding)
    _assert_same_speech([alone], eager[1:2])
    assert decoding.failure is None
    assert decoding.mode == "graphs"
    # The compile decoder runs the batch's own frames, unpadded.
    assert CompiledDecoding(model.decoder, "compile", backend="eager").frames_for(longest) == longest


def test_a_compiled_decoder_that_fails_hands_every_forward_to_the_eager_one(model, items, eager, caplog):
    compilations = []

    def failing(graph, example_inputs):
        compilations.append(graph)
        raise RuntimeError("this backend cannot take it")

    decoding = CompiledDecoding(model.decoder, "graphs", backend=failing)
    with caplog.at_level(logging.WARNING, logger="tts_node.kokoro_compile"):
        outputs = _forward(model, items, decoding)
    assert compilations, "the compiler was asked"
    assert decoding.mode == "eager"
    assert "cannot take it" in (decoding.failure or "")
    assert "the graphs decoder failed; eager from now on" in caplog.text
    _assert_same_speech(outputs, eager)
    # From then on eager's own frames (no bucket), and the compiler is not asked again.
    assert decoding.frames_for(101) == 101
    asked = len(compilations)
    _assert_same_speech(_forward(model, items, decoding), eager)
    assert len(compilations) == asked


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


def test_warming_runs_each_batch_over_a_doubling_ladder_of_frames_up_to_the_longest(model):
    shapes: list[tuple[int, int]] = []
    decoding = CompiledDecoding(model.decoder, "graphs", backend="eager")
    run = decoding._run

    def seen(asr, *rest):
        shapes.append((asr.shape[0], asr.shape[-1]))
        return run(asr, *rest)

    decoding._run = seen  # type: ignore[method-assign]
    # Every range warmed is a graph of its own: more than torch's default 8, after which it stops compiling.
    assert torch._dynamo.config.recompile_limit >= 64
    with torch.inference_mode():
        assert decoding.warm(model.decoder, (2, 3), 37, torch.device("cpu")) == 8
    # Doubling from 8 frames, then the longest as a forward of this decoder pads it (graphs: to its bucket).
    assert shapes == [(b, t) for t in (8, 16, 32, frame_bucket(37)) for b in (2, 3)]
    assert frame_bucket(37) == 40
    assert decoding.failure is None


def test_a_decoder_that_fails_while_warming_stops_warming_and_runs_eager(model):
    def failing(graph, example_inputs):
        raise RuntimeError("this backend cannot take it")

    decoding = CompiledDecoding(model.decoder, "compile", backend=failing)
    with torch.inference_mode():
        assert decoding.warm(model.decoder, (1, 2), 64, torch.device("cpu")) == 1
    assert decoding.mode == "eager"
    assert "cannot take it" in (decoding.failure or "")


def test_the_engine_compiles_its_decoder_at_the_switch_not_under_a_request(random_kokoro_engine, monkeypatch):
    """Switching to a compiled decoder warms its shapes: the forward after it meets compiled code, and the
    engine speaks what it spoke eager."""
    inner = random_kokoro_engine.inner
    compiled: list[object] = []  # each graph the compiler was handed

    def counting(graph, example_inputs):
        compiled.append(graph)
        return graph.forward

    made = lambda decoder, mode: CompiledDecoding(decoder, mode, backend=counting)  # noqa: E731
    monkeypatch.setattr(tts_node.kokoro_torch, "decoding_for", made)
    monkeypatch.setattr(tts_node.kokoro_torch, "WARM_FRAMES", 64)  # the CPU's ladder, short: 8 to 64 frames
    request = SpeechRequest(random_kokoro_engine.segment(TEXTS[1], "en-us")[0], "af_one", 1.0)
    (before,) = speak_batch(random_kokoro_engine, [request])
    try:
        inner.use_decoder("compile")
        assert inner.decoder == "compile"
        warmed = list(compiled)
        assert warmed, "compiled at the switch"
        (after,) = speak_batch(random_kokoro_engine, [request])
        assert compiled == warmed, "no compilation under a request: the warm-up made it"
    finally:
        inner.use_decoder("eager")
        inner._decodings.pop("compile", None)
    assert inner.decoder == "eager"
    assert after.words == before.words
    assert after.audio.shape == before.audio.shape
    assert float(np.abs(after.audio - before.audio).max()) < TOLERANCE
