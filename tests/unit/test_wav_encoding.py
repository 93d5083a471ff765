"""``encode_wav`` writes with numpy the very bytes libsndfile writes (issue 41): a segment's blob, and so its
hash, did not change when the worker stopped encoding through libsndfile."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from foundation.audio import WAV_HEADER_BYTES, encode_file, encode_wav, wav_seconds


def _libsndfile(samples: np.ndarray, rate: int) -> bytes:
    return encode_file(np.clip(samples, -1.0, 1.0), rate, container="WAV", subtype="PCM_16")


EDGES = np.array(
    [1.0, -1.0, 0.99999, -0.99999, 0.0, -0.0, 1 / 32768, -1 / 32768, 0.5 / 32768, -0.5 / 32768, 1.5 / 32767, 2.0, -3.0],
    dtype=np.float32,
)


@pytest.mark.parametrize("rate", [16_000, 22_050, 24_000, 48_000])
def test_the_bytes_equal_libsndfiles_on_noise_and_edges(rate: int) -> None:
    rng = np.random.default_rng(rate)
    samples = np.concatenate([rng.uniform(-1.2, 1.2, 200_003).astype(np.float32), EDGES])
    assert encode_wav(samples, rate) == _libsndfile(samples, rate)


@settings(max_examples=60, deadline=None)
@given(arrays(np.float32, st.integers(0, 3000), elements=st.floats(-1.5, 1.5, width=32)), st.integers(8_000, 96_000))
def test_the_bytes_equal_libsndfiles_for_any_samples(samples: np.ndarray, rate: int) -> None:
    assert encode_wav(samples, rate) == _libsndfile(samples, rate)


def test_a_column_of_frames_is_mono_and_more_channels_are_refused() -> None:
    samples = np.linspace(-1, 1, 101, dtype=np.float32)
    assert encode_wav(samples[:, None], 24_000) == encode_wav(samples, 24_000)
    with pytest.raises(ValueError, match="mono"):
        encode_wav(np.zeros((10, 2), dtype=np.float32), 24_000)


def test_not_a_number_is_silence_and_the_file_reads_back() -> None:
    samples = np.array([0.25, np.nan, -0.25], dtype=np.float32)
    data = encode_wav(samples, 24_000)
    decoded, rate = sf.read(io.BytesIO(data), dtype="int16")
    assert rate == 24_000
    assert decoded.tolist() == [8192, 0, -8192]
    assert len(data) == WAV_HEADER_BYTES + 2 * 3
    assert wav_seconds(len(data), 24_000) == pytest.approx(3 / 24_000)
