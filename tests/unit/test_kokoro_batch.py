"""A batched Kokoro forward equals each segment alone (``tts_node.kokoro_batch``), on the random checkpoint.

The checkpoint (the session's, tests/unit/conftest.py) has its duration head set to about 3.3 frames a
phoneme, as in speech, so items of mixed lengths make audio of mixed lengths (the padding every layer must
ignore) at the cost of a real sentence.
Tolerance: 1e-4 of full scale per sample (float32 sums in another order; measured about 3e-6 on CPU).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tts_node import EngineInputError
from tts_node.engine import SpeechRequest, speak_batch
from tts_node.kokoro_batch import BatchItem, forward_batch, segment_seed
from tts_node.kokoro_compile import CompiledDecoding, frame_bucket
from tts_node.kokoro_torch import WEIGHTS_NAME, load_kmodel
from tts_node.random_checkpoint import kokoro_config

# The file's forwards are made in its first test's setup (module fixtures): minutes where this runs at a low
# priority beside two other sessions, longest files first (it came first and passed the unit timeout, 120 s).
pytestmark = pytest.mark.timeout(400)
TOLERANCE = 1e-4
TEXTS = ("Hi there.", "A longer sentence, with a clause or two in it.", "Yes.", "Numbers like forty-two stay.")


@pytest.fixture(scope="module")
def checkpoint(random_kokoro):
    return random_kokoro


@pytest.fixture(scope="module")
def engine(random_kokoro_engine):
    return random_kokoro_engine


@pytest.fixture(scope="module")
def requests(engine):
    """Four segments of mixed lengths, two voices, three speeds (one beyond the model's: time-stretched)."""
    voices, speeds = ("af_one", "am_two", "af_one", "am_two"), (1.0, 1.3, 0.8, 1.0)
    found = [engine.segment(text, "en-us")[0] for text in TEXTS]
    return [SpeechRequest(s, v, x) for s, v, x in zip(found, voices, speeds, strict=True)]


@pytest.fixture(scope="module")
def alone(engine, requests):
    """Each request spoken on its own (the forwards the tests compare with are made once: a forward of the
    82M model on the CPU is the cost of this file)."""
    return [engine.speak(r.segment, r.voice, r.speed) for r in requests]


@pytest.fixture(scope="module")
def together(engine, requests):
    return speak_batch(engine, requests)


def test_a_batch_of_mixed_lengths_equals_each_segment_alone(requests, alone, together):
    lengths = set()
    for one, batched in zip(alone, together, strict=True):
        lengths.add(one.audio.size)
        assert batched.audio.size == one.audio.size
        assert float(np.abs(batched.audio - one.audio).max()) < TOLERANCE
        assert batched.words == one.words  # from the same predicted durations
    assert len(lengths) == len(requests)  # the items really were padded to one another


def test_a_compiled_decoder_speaks_what_the_eager_one_speaks_over_frames_padded_to_a_bucket(engine, requests, together):
    """``tts_node.kokoro_compile``: the decoder's body traced by torch's compiler (TorchDynamo, with its ``eager``
    backend: the code voxlog hands the compiler, its graph breaks and guards, run as traced; inductor's code
    generation is torch's own and takes minutes on 2 cores) over frames padded to a bucket, as the graphs decoder
    runs it. The four segments equal eager's."""
    inner = engine.inner
    decoding = CompiledDecoding(inner._model.decoder, "graphs", backend="eager")
    asked: list[int] = []
    bucketed = decoding.frames_for
    decoding.frames_for = lambda longest: asked.append(longest) or bucketed(longest)  # type: ignore[method-assign]
    torch._dynamo.reset()
    inner._decoding = decoding  # the graphs decoder needs CUDA to be asked for; its frames and body do not
    try:
        compiled = speak_batch(engine, requests)
    finally:
        inner.use_decoder("eager")
        torch._dynamo.reset()
    assert decoding.failure is None, decoding.failure
    assert len(asked) == 1
    assert frame_bucket(asked[0]) > asked[0], "the batch was padded past its longest segment"
    for ours, theirs in zip(compiled, together, strict=True):
        assert ours.audio.size == theirs.audio.size
        assert float(np.abs(ours.audio - theirs.audio).max()) < TOLERANCE
        assert ours.words == theirs.words


def test_a_segment_is_the_same_audio_whatever_rides_beside_it(engine, requests, together):
    """The first segment beside the three others, and beside the shortest alone (the batch padded to another
    length): the same samples within the tolerance."""
    again = speak_batch(engine, [requests[0], requests[2]])[0]
    assert float(np.abs(together[0].audio - again.audio).max()) < TOLERANCE


def test_a_segment_is_a_function_of_its_inputs(engine, requests, alone):
    """Seeded noise: the same segment, voice and speed give the same samples on every call (a retry, a replay),
    and another voice or speed gives other audio."""
    request = requests[0]
    again = engine.speak(request.segment, request.voice, request.speed).audio
    assert again.tobytes() == alone[0].audio.tobytes()
    other_voice = engine.speak(request.segment, "am_two", request.speed).audio
    assert other_voice.size != again.size or not np.array_equal(other_voice, again)
    other_speed = engine.speak(request.segment, request.voice, 1.1).audio
    assert other_speed.size != again.size or not np.array_equal(other_speed, again)


def test_an_item_alone_equals_the_library_forward_under_the_same_seed(checkpoint, requests):
    """The masked forward is Kokoro's own: one item equals ``KModel.forward_with_tokens`` when the library's
    global generator is seeded with the item's seed (it draws the same numbers in the same order)."""
    model = load_kmodel(kokoro_config(), checkpoint / WEIGHTS_NAME, torch.device("cpu"))
    pack = torch.load(checkpoint / "voices" / "af_one.pt", weights_only=True).reshape(-1, 256)
    ids = requests[3].segment.token_ids
    item = BatchItem(ids, pack[len(ids)], 1.2, segment_seed(ids, "af_one", 1.2))
    with torch.inference_mode():
        (ours,) = forward_batch(model, [item])
        torch.manual_seed(item.seed)
        audio, durations = model.forward_with_tokens(torch.tensor([[0, *ids, 0]]), item.style.unsqueeze(0), 1.2)
    assert ours.durations == durations.tolist()
    assert ours.audio.size == audio.numel()
    assert float(np.abs(ours.audio - audio.numpy()).max()) < TOLERANCE


def test_a_bad_item_is_named_before_any_forward(engine, requests):
    bad = SpeechRequest(requests[0].segment, "af_one", float("nan"))
    with pytest.raises(EngineInputError, match="speed nan is out of range"):
        speak_batch(engine, [requests[1], bad])


def test_an_engine_without_a_batched_forward_speaks_one_at_a_time(requests):
    class OneAtATime:
        def __init__(self) -> None:
            self.calls: list[str] = []

        def speak(self, segment, voice, speed):
            self.calls.append(segment.text)
            return (segment.text, voice, speed)

    engine = OneAtATime()
    spoken = speak_batch(engine, requests)  # type: ignore[arg-type]
    assert engine.calls == [r.segment.text for r in requests]
    assert spoken == [(r.segment.text, r.voice, r.speed) for r in requests]
