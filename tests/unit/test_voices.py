"""Voice specs (contracts.voices), the VoiceBank that resolves them, and mixes through the real engine."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts.errors import InvalidRequest
from contracts.voices import canonical_voice, parse_voice_spec
from tts_node import EngineInputError, ModelUnavailable
from tts_node.kokoro_onnx import KokoroOnnxEngine
from tts_node.normalization import RULES_VERSION
from tts_node.voices import PACK_SHAPE, VoiceBank, model_version


def pack(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(PACK_SHAPE).astype(np.float32)


@pytest.fixture
def bank() -> VoiceBank:
    return VoiceBank({"aa": pack(1), "bb": pack(2), "cc": pack(3)})


# --- specs -----------------------------------------------------------------


def test_parse_keeps_written_order_and_defaults_weights_to_one():
    assert parse_voice_spec("jf_alpha") == (("jf_alpha", 1.0),)
    assert parse_voice_spec(" jf_alpha ( 2 ) + jm_kumo ") == (("jf_alpha", 2.0), ("jm_kumo", 1.0))
    assert parse_voice_spec("a(.5)+b(1.25)+a(3.)") == (("a", 0.5), ("b", 1.25), ("a", 3.0))


def test_plain_names_stay_as_they_are():
    assert canonical_voice("jf_alpha") == "jf_alpha"
    assert canonical_voice("  jm_kumo\t") == "jm_kumo"


def test_a_mix_is_sorted_normalized_and_written_with_four_decimals():
    assert canonical_voice("jm_kumo(1)+jf_alpha(2)") == "jf_alpha(0.6667)+jm_kumo(0.3333)"
    assert canonical_voice("a+b+c") == "a(0.3334)+b(0.3333)+c(0.3333)"


@pytest.mark.parametrize(
    "spelling",
    [
        "jf_alpha(2)+jm_kumo(1)",
        "jf_alpha(4)+jm_kumo(2)",
        "jm_kumo(1)+jf_alpha(2)",
        " jf_alpha ( 2 )+ jm_kumo",
        "jf_alpha+jm_kumo+jf_alpha",
        "jf_alpha(0.6667)+jm_kumo(0.3333)",
    ],
)
def test_equivalent_spellings_share_one_canonical_form(spelling):
    assert canonical_voice(spelling) == "jf_alpha(0.6667)+jm_kumo(0.3333)"


def test_different_mixes_differ():
    forms = {canonical_voice(s) for s in ("a(2)+b(1)", "a(1)+b(2)", "a+b", "a+c", "a(3)+b(1)")}
    assert len(forms) == 5


@pytest.mark.parametrize("spec", ["jf_alpha(3)", "jf_alpha(2)+jf_alpha(5)"])
def test_a_mix_of_one_voice_collapses_to_the_name(spec):
    assert canonical_voice(spec) == "jf_alpha"


@pytest.mark.parametrize(
    "spec",
    ["", "   ", "JF_alpha", "jf-alpha", "a+", "+a", "a++b", "a(0)+b", "a(-1)+b", "a()+b", "a(1e3)+b", "a(2", "a b"],
)
def test_bad_syntax_is_rejected_with_the_expected_syntax(spec):
    with pytest.raises(InvalidRequest, match=r"jf_alpha\(2\)\+jm_kumo\(1\)") as caught:
        canonical_voice(spec)
    assert "positive" in str(caught.value)


def test_a_voice_too_light_to_survive_rounding_is_rejected():
    with pytest.raises(InvalidRequest, match="b would get less than"):
        canonical_voice("a(100000)+b(1)")


# At most 1:7000 between weights, so no voice falls under the 0.0001 floor.
weights = st.decimals(min_value="1", max_value="1000", places=3, allow_nan=False, allow_infinity=False)
mixes = st.lists(st.tuples(st.sampled_from(["aa", "bb", "cc", "dd", "e_1"]), weights), min_size=1, max_size=8)


@given(mixes)
def test_canonical_is_idempotent_and_its_weights_sum_to_one(terms):
    spec = "+".join(f"{name}({weight})" for name, weight in terms)
    canonical = canonical_voice(spec)
    assert canonical_voice(canonical) == canonical
    parsed = parse_voice_spec(canonical)
    assert [name for name, _ in parsed] == sorted({name for name, _ in terms})
    assert math.isclose(math.fsum(w for _, w in parsed), 1.0, abs_tol=1e-9)
    # Reordering and rescaling the spelling does not change the form.
    shuffled = "+".join(f"{name}({weight * 3})" for name, weight in reversed(terms))
    assert canonical_voice(shuffled) == canonical


# --- VoiceBank -------------------------------------------------------------


def test_from_dir_reads_npy_pt_and_bin(tmp_path):
    torch = pytest.importorskip("torch")
    np.save(tmp_path / "v_npy.npy", pack(1))
    torch.save(torch.from_numpy(pack(2).reshape(510, 256)), tmp_path / "v_pt.pt")
    (tmp_path / "v_bin.bin").write_bytes(pack(3).astype("<f4").tobytes())
    (tmp_path / "README.txt").write_text("not a voice")
    loaded = VoiceBank.from_dir(tmp_path)
    assert loaded.names() == ("v_bin", "v_npy", "v_pt")
    for name, seed in (("v_npy", 1), ("v_pt", 2), ("v_bin", 3)):
        got = loaded.resolve(name)
        assert got.shape == PACK_SHAPE
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, pack(seed))


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("bad.npy", lambda p: np.save(p, np.zeros((510, 2, 256), np.float32))),
        ("short.bin", lambda p: p.write_bytes(b"\0" * 1024)),
        ("junk.npy", lambda p: p.write_bytes(b"not numpy")),
    ],
)
def test_a_malformed_file_is_refused_by_name(tmp_path, name, content):
    content(tmp_path / name)
    with pytest.raises(ModelUnavailable, match=name.replace(".", r"\.")):
        VoiceBank.from_dir(tmp_path)


def test_a_wrong_shaped_tensor_is_refused_by_name(tmp_path):
    torch = pytest.importorskip("torch")
    torch.save(torch.zeros(10, 256), tmp_path / "tiny.pt")
    with pytest.raises(ModelUnavailable, match=r"tiny\.pt.*\(10, 256\)"):
        VoiceBank.from_dir(tmp_path)


def test_a_two_dimensional_pack_is_reshaped():
    assert VoiceBank({"x": pack(1).reshape(510, 256)}).resolve("x").shape == PACK_SHAPE


def test_merge_joins_banks_but_refuses_to_shadow(bank):
    merged = bank.merge(VoiceBank({"dd": pack(4)}))
    assert merged.names() == ("aa", "bb", "cc", "dd")
    with pytest.raises(ModelUnavailable, match="bb"):
        bank.merge(VoiceBank({"bb": pack(9)}))


def test_unknown_voices_are_input_errors_listing_the_known_ones(bank):
    with pytest.raises(EngineInputError, match=r"unknown voice 'zz'; known voices: aa, bb, cc"):
        bank.resolve("aa(1)+zz(2)")
    with pytest.raises(EngineInputError, match="expected a voice name"):
        bank.resolve("aa(")
    assert "aa" in bank
    assert "aa(2)+cc" in bank
    assert "zz" not in bank
    assert "aa(" not in bank


def test_a_mix_is_the_weighted_average_of_its_voices(bank):
    mixed = bank.resolve("cc(1)+aa(2)")
    # The canonical weights (0.6667, 0.3333) are what every node uses.
    expected = (0.6667 * pack(1).astype(np.float64) + 0.3333 * pack(3).astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(mixed, expected, rtol=0, atol=1e-6)
    assert mixed.dtype == np.float32
    assert mixed.shape == PACK_SHAPE
    for single in ("aa", "cc"):
        assert not np.array_equal(mixed, bank.resolve(single))


def test_every_spelling_of_a_mix_resolves_to_the_same_bytes(bank):
    first = bank.resolve("aa(2)+bb(1)+cc(1)").tobytes()
    assert bank.resolve("aa(2)+bb(1)+cc(1)").tobytes() == first
    assert bank.resolve("cc + bb + aa(2)").tobytes() == first
    assert bank.resolve("aa(0.5)+bb(0.25)+cc(0.25)").tobytes() == first


# --- the real engine -------------------------------------------------------


@pytest.fixture(scope="module")
def models(kokoro_onnx_models):
    return kokoro_onnx_models


@pytest.fixture(scope="module")
def engine(kokoro_onnx):
    """The session's real model (tests/unit/conftest.py) without its speed range: the model alone."""
    assert isinstance(kokoro_onnx.inner, KokoroOnnxEngine)
    return kokoro_onnx.inner


def test_a_mix_sounds_different_from_its_voices_and_the_same_every_time(engine):
    segment = engine.segment("Hello.", "en-us")[0]
    mix = "jf_alpha(2)+jm_kumo(1)"
    mixed = engine.synthesize(segment, mix, 1.0)
    assert float(np.sqrt(np.mean(np.square(mixed, dtype=np.float64)))) > 0.01
    for voice in ("jf_alpha", "jm_kumo"):
        single = engine.synthesize(segment, voice, 1.0)
        assert single.shape != mixed.shape or not np.array_equal(single, mixed)
    assert engine.synthesize(segment, mix, 1.0).tobytes() == mixed.tobytes()
    assert "jf_alpha(2)+jm_kumo(1)" not in engine.info.voices


def test_the_engine_loads_extra_voices_from_a_directory(engine, models, tmp_path):
    np.save(tmp_path / "zz_custom.npy", pack(7))
    # The weights are already assembled in ``models`` by ``engine``: this load only verifies them.
    with_extras = KokoroOnnxEngine(cache_dir=models, threads=1, voices_dir=tmp_path)
    assert "zz_custom" in with_extras.info.voices
    assert "jf_alpha" in with_extras.info.voices
    weights = engine.info.model_version.removesuffix(f"+{RULES_VERSION}")
    assert with_extras.info.model_version.startswith(weights + "+v"), (
        "extra packs are part of the version: workers that sound alike share one, and one consumer group"
    )
    assert with_extras.info.model_version.endswith(f"+{RULES_VERSION}")


def test_the_model_version_names_the_extra_packs_by_their_numbers_not_their_names():
    weights = "ab" * 32
    assert model_version(weights, None) == weights[:16]
    assert model_version(weights, VoiceBank({})) == weights[:16]
    first, same, other = (VoiceBank({"zz_custom": pack(seed)}) for seed in (7, 7, 8))
    assert model_version(weights, first) == model_version(weights, same)
    assert model_version(weights, first) != model_version(weights, other), "same name, another voice"


@pytest.mark.parametrize("weight", ["1" * 5000, "0." + "1" * 5000, "1" * 10, "." + "5" * 10])
def test_a_weight_of_too_many_digits_is_invalid_syntax_not_a_crash(weight):
    with pytest.raises(InvalidRequest, match="at most 9 digits before and after the point"):
        canonical_voice(f"a({weight})+b")
