"""One MP3 encoder for a long stream: pieces concatenate, and the whole lasts as long as its samples."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf

from foundation.audio_formats import Mp3Encoder, encode_chunk, streamable

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(not streamable("mp3"), reason="this libsndfile cannot write MP3"),
]
RATE = 24000


def tone(seconds: float, pitch: float) -> np.ndarray:
    t = np.arange(int(RATE * seconds)) / RATE
    return (0.3 * np.sin(2 * np.pi * pitch * t)).astype(np.float32)


def decoded_seconds(data: bytes) -> float:
    samples, rate = sf.read(io.BytesIO(data), dtype="float32")
    return len(samples) / rate


def test_pieces_through_one_encoder_last_as_long_as_their_samples_where_separate_encodes_drift():
    pieces = [tone(0.7, 200 + 20 * i) for i in range(30)]  # 21 s, in 30 parts
    encoder = Mp3Encoder(RATE)
    stream = b"".join(encoder.write(piece, RATE) for piece in pieces) + encoder.close()
    separate = b"".join(encode_chunk(piece, RATE, "mp3", RATE) for piece in pieces)
    expected = sum(len(p) for p in pieces) / RATE
    assert abs(decoded_seconds(stream) - expected) < 0.1  # one encoder delay and padding, once
    assert decoded_seconds(separate) - expected > 0.3  # the same added 30 times: what the encoder is for


def test_the_stream_has_no_info_frame_and_starts_with_an_audio_frame():
    encoder = Mp3Encoder(RATE)
    first = encoder.write(tone(2.0, 440), RATE)
    rest = encoder.close()
    assert first[:2] == b"\xff\xf3" or first[0] == 0xFF  # an MPEG frame sync, no ID3 tag
    assert b"Xing" not in first[:200]
    assert b"Info" not in first[:200]
    assert b"TAG" not in rest[-128:-125]  # no ID3v1 tag at the end either
