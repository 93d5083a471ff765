from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts import fingerprint, normalize_text

BASE = {
    "voice": "jf_alpha",
    "speed": 1.0,
    "lang": "en-us",
    "engine": "kokoro-onnx",
    "model_version": "6e742170d309",
    "audio_format": "wav",
    "sample_rate": 24000,
}


def fp(text: str, **overrides: object) -> str:
    return fingerprint(text=text, **{**BASE, **overrides})  # type: ignore[arg-type]


def duplicate_pairs(corpus) -> list[tuple[str, str]]:
    lines = (corpus / "duplicates.txt").read_text(encoding="utf-8").splitlines()
    return [tuple(line.split(" ||| ")) for line in lines if line.strip()]  # type: ignore[misc]


def test_corpus_duplicate_pairs_share_a_fingerprint(corpus):
    pairs = duplicate_pairs(corpus)
    assert len(pairs) >= 4
    for left, right in pairs:
        assert left != right
        assert fp(left) == fp(right), (left, right)


def test_distinct_corpus_lines_have_distinct_fingerprints(corpus):
    lines = []
    for name in ("short.txt", "paragraphs.txt", "normalization.txt", "unicode.txt"):
        lines += [line for line in (corpus / name).read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len({fp(line) for line in lines}) == len(set(map(normalize_text, lines)))


def test_invisible_characters_are_removed(corpus):
    line = next(line for line in (corpus / "unicode.txt").read_text(encoding="utf-8").splitlines() if "\u200b" in line)
    assert "\u200b" not in normalize_text(line)
    assert "\u00ad" not in normalize_text(line)
    assert fp(line) == fp(line.replace("\u200b", "").replace("\u00ad", ""))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("voice", "jm_kumo"),
        ("speed", 1.25),
        ("lang", "en-gb"),
        ("engine", "kokoro"),
        ("model_version", "ffff"),
        ("audio_format", "flac"),
        ("sample_rate", 16000),
    ],
)
def test_every_audio_field_changes_the_fingerprint(field, value):
    assert fp("Hello world.") != fp("Hello world.", **{field: value})


def test_equivalent_spellings_of_fields_agree():
    assert fp("Hi", speed=1) == fp("Hi", speed=1.0) == fp("Hi", speed=1.001)
    assert fp("Hi", lang=" EN-US ", audio_format="WAV", engine="Kokoro-ONNX") == fp("Hi")
    assert fp("Hi", speed=1.0) != fp("Hi", speed=1.01)


def test_case_and_punctuation_are_kept():
    assert fp("Hello world.") != fp("hello world.")
    assert fp("Hello world.") != fp("Hello world!")


_space = st.sampled_from([" ", "  ", "\t", "\n", "\u00a0", "\u2003", " \t "])
_word = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Zs", "Zl", "Zp", "Cc", "Cf")),
    min_size=1,
    max_size=8,
)


@given(words=st.lists(_word, min_size=1, max_size=8), seps=st.lists(_space, min_size=9, max_size=9))
def test_whitespace_and_composition_variants_share_a_fingerprint(words, seps):
    canonical = " ".join(words)
    variant = seps[0] + "".join(w + s for w, s in zip(words, seps[1:], strict=False))
    decomposed = unicodedata.normalize("NFD", variant)
    assert fp(canonical) == fp(variant) == fp(decomposed)


@given(a=st.text(max_size=40), b=st.text(max_size=40))
def test_equal_after_normalization_iff_equal_fingerprint(a, b):
    assert (normalize_text(a) == normalize_text(b)) == (fp(a) == fp(b))


@given(text=st.text(max_size=60))
def test_normalization_is_idempotent(text):
    once = normalize_text(text)
    assert normalize_text(once) == once
    assert once == once.strip()
    assert "  " not in once
