"""One encoder for a whole streamed answer (foundation.stream_encoders): its pieces joined are the whole job."""

from __future__ import annotations

import io

import av
import numpy as np
import pytest
import soundfile as sf

from foundation.aac import AacEncoder, encode_aac
from foundation.audio_formats import STREAMABLE, UnsupportedAudio, encode, media_type, supported_rates
from foundation.stream_encoders import stream_encoder

SRC_RATE = 24000
# A 10.1 s job in three segments, the first 3.7 s long: the job of the bug the regression test names.
SEGMENTS = [
    (0.4 * np.sin(2 * np.pi * hz * np.arange(int(SRC_RATE * seconds)) / SRC_RATE)).astype(np.float32)
    for hz, seconds in ((440, 3.7), (550, 3.2), (660, 3.2))
]
TOTAL_S = sum(len(s) for s in SEGMENTS) / SRC_RATE


def decoded_seconds(data: bytes, fmt: str, rate: int) -> float:
    if fmt == "pcm":
        return len(data) / 2 / rate
    if fmt in ("wav", "mp3"):
        samples, decoded_rate = sf.read(io.BytesIO(data), dtype="float32")
        return len(samples) / decoded_rate
    with av.open(io.BytesIO(data)) as container:
        frames = list(container.decode(audio=0))
    assert {f.sample_rate for f in frames} == {rate}
    return sum(f.samples for f in frames) / rate


def streamed(fmt: str, rate: int) -> list[bytes]:
    encoder = stream_encoder(fmt, rate)
    return [encoder.write(s, SRC_RATE) for s in SEGMENTS] + [encoder.close()]


def test_aac_streams_and_is_served_as_openai_serves_it():
    assert {"pcm", "wav", "mp3", "aac"} == STREAMABLE
    assert media_type("aac") == "audio/aac"
    assert supported_rates("aac") == (16000, 22050, 24000, 44100, 48000)


@pytest.mark.parametrize("rate", [16000, 24000, 44100, 48000])
@pytest.mark.parametrize("fmt", sorted(STREAMABLE))
def test_a_stream_of_one_encoder_decodes_to_the_whole_job(fmt, rate):
    pieces = streamed(fmt, rate)
    assert all(pieces[:-1]), "every segment's write gives audio at once, none waits for the end"
    # One encoder delay for the whole stream, not one a segment: LAME's 1105 samples and its padding (under
    # two frames of 1152), or AAC's 1024 priming samples and its padding (under two frames of 1024).
    slack = {"mp3": (1105 + 2 * 1152) / rate, "aac": 3 * 1024 / rate}.get(fmt, 0.0)
    assert TOTAL_S - 0.001 <= decoded_seconds(b"".join(pieces), fmt, rate) <= TOTAL_S + slack + 0.001


def test_regression_sse_deltas_joined_decoded_to_3_7_s_of_a_10_1_s_job():
    """Each delta of an MP3 SSE stream was a whole file of one segment, Info frame and all: joined, a
    decoder that trusts the first Info frame's count (libsndfile, through mpg123) stopped after 3.7 s."""
    separate_files = b"".join(encode(s, SRC_RATE, "mp3", SRC_RATE) for s in SEGMENTS)
    assert decoded_seconds(separate_files, "mp3", SRC_RATE) == pytest.approx(3.7, abs=0.05)
    assert decoded_seconds(b"".join(streamed("mp3", SRC_RATE)), "mp3", SRC_RATE) == pytest.approx(TOTAL_S, abs=0.1)


def test_an_aac_stream_is_adts_frames_from_its_first_byte_and_cut_between_frames():
    for piece in streamed("aac", SRC_RATE)[:-1]:
        assert piece[:2] in (b"\xff\xf1", b"\xff\xf9"), "each piece starts on an ADTS sync word"
        at = 0
        while at < len(piece):  # every piece is whole frames: each header's 13-bit length lands on the next
            assert piece[at] == 0xFF
            assert piece[at + 1] & 0xF0 == 0xF0
            at += ((piece[at + 3] & 0x03) << 11) | (piece[at + 4] << 3) | (piece[at + 5] >> 5)
        assert at == len(piece)


def test_a_whole_aac_file_is_one_encode_and_an_empty_write_gives_nothing():
    whole = encode(SEGMENTS[0], SRC_RATE, "aac", 24000)
    assert decoded_seconds(whole, "aac", 24000) == pytest.approx(3.7, abs=3 * 1024 / 24000)
    encoder = AacEncoder(24000)
    assert encoder.write(np.zeros(0, dtype=np.float32)) == b""
    assert encoder.close() == b""
    assert encoder.close() == b"", "closing twice is harmless"
    assert encode_aac(SEGMENTS[0], 24000)[:2] in (b"\xff\xf1", b"\xff\xf9")


def test_formats_that_cannot_stream_are_refused_by_name():
    for fmt in ("flac", "opus"):
        with pytest.raises(UnsupportedAudio, match=f"{fmt} cannot be streamed; streamable: aac, mp3, pcm, wav"):
            stream_encoder(fmt, 24000)


def test_a_wav_stream_of_no_samples_is_still_its_header():
    encoder = stream_encoder("wav", 24000)
    assert encoder.close()[:4] == b"RIFF"
