"""Every offered format at every offered rate round-trips (through libsndfile; aac through PyAV)."""

from __future__ import annotations

import io

import av
import numpy as np
import pytest
import soundfile as sf

from foundation.audio_formats import (
    OPUS_RATES,
    SUPPORTED_RATES,
    UnsupportedAudio,
    check,
    encode,
    media_type,
    resample,
    supported_formats,
    supported_rates,
)
from foundation.errors import FoundationError

SRC_RATE = 24000
SECONDS = 0.5
TONE = (0.5 * np.sin(2 * np.pi * 440 * np.arange(int(SRC_RATE * SECONDS)) / SRC_RATE)).astype(np.float32)
LOSSY = {"ogg", "opus", "mp3", "aac"}
CASES = [(fmt, rate) for fmt in supported_formats() for rate in supported_rates(fmt)]


def decode(data: bytes, fmt: str, rate: int) -> tuple[np.ndarray, int]:
    if fmt == "pcm":
        raw = sf.read(io.BytesIO(data), format="RAW", subtype="PCM_16", samplerate=rate, channels=1, dtype="float32")
        return raw[0], raw[1]
    if fmt == "aac":  # libsndfile has no AAC; and ADTS carries no encoder delay, so none is trimmed
        with av.open(io.BytesIO(data)) as container:
            frames = [f.to_ndarray().reshape(-1) for f in container.decode(audio=0)]
            return np.concatenate(frames)[1024:], container.streams.audio[0].sample_rate
    return sf.read(io.BytesIO(data), dtype="float32")


def peak_hz(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    return float(np.fft.rfftfreq(len(samples), 1 / rate)[int(np.argmax(spectrum))])


def test_the_always_available_formats_are_offered():
    offered = supported_formats()
    assert {"wav", "flac", "ogg", "opus", "pcm", "aac"} <= set(offered)
    assert ("mp3" in offered) == ("MPEG_LAYER_III" in sf.available_subtypes("MP3"))


@pytest.mark.parametrize(("fmt", "rate"), CASES, ids=[f"{f}-{r}" for f, r in CASES])
def test_a_tone_round_trips_at_the_requested_rate(fmt, rate):
    data = encode(TONE, SRC_RATE, fmt, rate)
    samples, decoded_rate = decode(data, fmt, rate)
    assert decoded_rate == rate
    assert samples.ndim == 1
    # This libsndfile reads the encoder delay/padding of mp3 (LAME tag) and
    # Opus (pre-skip) and trims it, so lossy formats keep the length as well;
    # 5% still leaves room for a build that does not.
    assert abs(len(samples) / rate - SECONDS) <= 0.05 * SECONDS
    if fmt not in LOSSY:
        assert len(samples) == round(SECONDS * rate)
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64))))
    assert rms == pytest.approx(0.5 / np.sqrt(2), rel=0.05)
    # A rate written into the header but not applied to the samples would shift the pitch.
    assert peak_hz(samples, rate) == pytest.approx(440, abs=5)


def test_pcm_is_headerless_little_endian_16_bit():
    data = encode(TONE, SRC_RATE, "pcm", SRC_RATE)
    assert len(data) == 2 * len(TONE)
    ints = np.frombuffer(data, dtype="<i2")
    np.testing.assert_allclose(ints / 32768, TONE, atol=1 / 16384)


def test_opus_offers_only_the_rates_opus_codes():
    assert supported_rates("opus") == tuple(r for r in SUPPORTED_RATES if r in OPUS_RATES) == (16000, 24000, 48000)
    for rate in (22050, 44100):
        with pytest.raises(UnsupportedAudio, match="supported rates: 16000, 24000, 48000 Hz"):
            encode(TONE, SRC_RATE, "opus", rate)


def test_samples_beyond_full_scale_are_clipped_not_wrapped():
    loud = np.full(2400, 1.5, dtype=np.float32)
    ints = np.frombuffer(encode(loud, SRC_RATE, "pcm", SRC_RATE), dtype="<i2")
    assert ints.min() > 30000


def test_check_normalizes_the_format_name():
    assert check(" WAV ", 22050) == ("wav", 22050)
    assert media_type("Opus") == "audio/ogg; codecs=opus"
    assert media_type("pcm", 16000) == "application/octet-stream"
    with pytest.raises(UnsupportedAudio, match="16000, 24000, 48000"):
        media_type("opus", 44100)


def test_media_types():
    expected = {
        "wav": "audio/wav",
        "flac": "audio/flac",
        "ogg": "audio/ogg",
        "opus": "audio/ogg; codecs=opus",
        "mp3": "audio/mpeg",
        "pcm": "application/octet-stream",
        "aac": "audio/aac",
    }
    assert {fmt: media_type(fmt) for fmt in supported_formats()} == {f: expected[f] for f in supported_formats()}


@pytest.mark.parametrize("fmt", ["m4a", "", "WAVEX"])
def test_an_unsupported_format_lists_the_supported_ones(fmt):
    with pytest.raises(UnsupportedAudio, match="supported formats: " + ", ".join(supported_formats())):
        check(fmt, 24000)
    with pytest.raises(UnsupportedAudio):
        media_type(fmt)


@pytest.mark.parametrize("rate", [8000, 11025, 96000, 0, -24000, True, 24000.0])
def test_an_unsupported_rate_lists_the_supported_ones(rate):
    with pytest.raises(UnsupportedAudio, match="supported rates: 16000, 22050, 24000, 44100, 48000 Hz") as caught:
        check("wav", rate)
    assert isinstance(caught.value, FoundationError)


def test_resample_changes_the_length_and_keeps_the_pitch():
    out = resample(TONE, SRC_RATE, 16000)
    assert out.dtype == np.float32
    assert len(out) == 8000
    assert peak_hz(out, 16000) == pytest.approx(440, abs=5)
    np.testing.assert_array_equal(resample(TONE, SRC_RATE, SRC_RATE), TONE)
    assert len(resample(np.zeros(0, np.float32), SRC_RATE, 48000)) == 0
    with pytest.raises(ValueError, match="positive"):
        resample(TONE, 0, 16000)
