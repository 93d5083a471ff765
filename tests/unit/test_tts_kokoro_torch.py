"""The torch Kokoro engine on a random-initialized checkpoint (real architecture, noise for sound).

The checkpoint and its engine are the session's (tests/unit/conftest.py: written and loaded once for the
modules that read them). Nothing may reach the Hugging Face hub: it is switched off and its download
function made to fail the test.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np
import pytest

from tests.unit.conftest import RANDOM_KOKORO, hub_offline
from tts_node import EngineInputError, ModelUnavailable, TtsNodeError, load_engine
from tts_node.kokoro_torch import hf_snapshot_dir
from tts_node.normalization import RULES_VERSION
from tts_node.random_checkpoint import WEIGHTS_NAME, write_random_checkpoint


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module", autouse=True)
def offline(tmp_path_factory):
    with hub_offline(tmp_path_factory.mktemp("hf_home")):
        yield


@pytest.fixture(scope="module")
def checkpoint(random_kokoro):
    return random_kokoro


@pytest.fixture(scope="module")
def engine(random_kokoro_engine):
    return random_kokoro_engine


def partial_copy(source: Path, target: Path, names: tuple[str, ...]) -> Path:
    """``target`` holding links to only ``names`` of ``source``: no 300 MB copies."""
    target.mkdir()
    for name in names:
        (target / name).symlink_to(source / name)
    return target


def test_info_describes_the_loaded_checkpoint(engine, checkpoint):
    info = engine.info
    assert info.name == "kokoro"
    assert info.sample_rate == 24000
    assert info.voices == ("af_one", "am_two")
    assert info.languages == ("en-us", "en-gb")
    assert info.device == "cpu"
    assert info.model_version == f"{sha256(checkpoint / WEIGHTS_NAME)[:16]}+{RULES_VERSION}"


@pytest.fixture(scope="module")
def hi_there(engine):
    """One rendering, shared."""
    segments = engine.segment("Hi there.", "en-us")
    assert [s.text for s in segments] == ["Hi there."]
    return segments[0], engine.speak(segments[0], "af_one", 1.0)


def test_a_short_phrase_gives_finite_audible_float32_audio(hi_there):
    _, speech = hi_there
    audio = speech.audio
    assert audio.dtype == np.float32
    assert audio.ndim == 1
    assert audio.size > 0
    assert np.isfinite(audio).all()
    assert float(np.sqrt(np.mean(np.square(audio, dtype=np.float64)))) > 1e-3


def test_the_same_seed_writes_the_same_checkpoint(checkpoint, tmp_path):
    again = write_random_checkpoint(tmp_path / "again", **RANDOM_KOKORO)
    for name in ("config.json", WEIGHTS_NAME, "voices/af_one.pt", "voices/am_two.pt"):
        assert sha256(again / name) == sha256(checkpoint / name), name


def test_a_missing_config_is_named(checkpoint, tmp_path):
    directory = partial_copy(checkpoint, tmp_path / "m", (WEIGHTS_NAME, "voices"))
    with pytest.raises(ModelUnavailable, match=re.escape(str(directory / "config.json"))):
        load_engine("kokoro", model_dir=directory)


def test_missing_weights_are_named(checkpoint, tmp_path):
    directory = partial_copy(checkpoint, tmp_path / "m", ("config.json", "voices"))
    with pytest.raises(ModelUnavailable, match=re.escape(str(directory / WEIGHTS_NAME))):
        load_engine("kokoro", model_dir=directory)


def test_missing_voice_packs_are_named(checkpoint, tmp_path):
    directory = partial_copy(checkpoint, tmp_path / "m", ("config.json", WEIGHTS_NAME))
    with pytest.raises(ModelUnavailable, match=re.escape(f"no voice packs in {directory / 'voices'}")):
        load_engine("kokoro", model_dir=directory)


def test_an_empty_hugging_face_cache_is_unavailable_not_downloaded():
    expected = Path(os.environ["HF_HOME"]) / "hub" / "models--hexgrad--Kokoro-82M" / "snapshots"
    with pytest.raises(ModelUnavailable, match=re.escape(str(expected))):
        load_engine("kokoro", model_dir=None)


def test_the_hugging_face_snapshot_is_found_through_refs_main(monkeypatch, tmp_path):
    repo = tmp_path / "hub" / "models--hexgrad--Kokoro-82M"
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    (repo / "snapshots" / "zzz999").mkdir()
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123\n")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    assert hf_snapshot_dir() == repo / "snapshots" / "abc123"


def test_an_unknown_voice_is_an_input_error_naming_the_known_voices(engine):
    segment = engine.segment("Hi.", "en-us")[0]
    with pytest.raises(EngineInputError, match="af_one"):
        engine.synthesize(segment, "af_heart", 1.0)


@pytest.mark.parametrize("device", ["cuda", "gpu", "cuda:x", "cuda:0 "])
def test_malformed_devices_are_refused(checkpoint, device):
    with pytest.raises(TtsNodeError, match="cuda:N"):
        load_engine("kokoro", device=device, model_dir=checkpoint)


def test_cuda_without_cuda_is_a_clear_error(checkpoint, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on this CPU-only machine
    with pytest.raises(TtsNodeError, match="CUDA is not available"):
        load_engine("kokoro", device="cuda:0", model_dir=checkpoint)


def test_the_onnx_engine_still_refuses_cuda():
    with pytest.raises(TtsNodeError, match="cpu"):
        load_engine("kokoro-onnx", device="cuda:0")


def test_voice_mixes_are_accepted_and_every_spelling_speaks_alike(engine):
    # Kokoro's torch decoder adds random excitation noise, so samples differ from call to call even
    # for one voice; the mix's pack itself is checked bit for bit in test_voices.py. What the pack
    # decides here is the durations, and those must not depend on how the mix is written.
    (segment,) = engine.segment("Hi.", "en-us")
    mixed = engine.synthesize(segment, "af_one(1)+am_two(1)", 1.0)
    again = engine.synthesize(segment, "am_two(2) + af_one(2)", 1.0)
    assert mixed.shape == again.shape
    assert np.isfinite(mixed).all()
    assert float(np.abs(mixed).max()) > 0
    with pytest.raises(EngineInputError, match="af_one"):
        engine.synthesize(segment, "af_one(1)+nobody(1)", 1.0)


def test_the_torch_engine_places_words_by_kmodels_predicted_durations(hi_there):
    segment, speech = hi_there
    words = speech.words or ()
    assert [segment.text[w.start - segment.start : w.end - segment.start] for w in words] == ["Hi", "there."]
    assert 0 <= words[0].first < words[0].last <= words[1].first < words[1].last <= speech.audio.size
