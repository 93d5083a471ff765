"""Audio sent segment by segment (foundation.audio_formats.encode_chunk): joined, the pieces play as one file."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf

from foundation.audio_formats import (
    STREAMABLE,
    UnsupportedAudio,
    _mp3_frame,
    encode,
    encode_chunk,
    mp3_audio_frames,
    stream_header,
    streamable,
    supported_formats,
    supported_rates,
)

SRC_RATE = 24000
# Three tones of different lengths and pitches, as three segments of one job.
SEGMENTS = [
    (0.5 * np.sin(2 * np.pi * hz * np.arange(int(SRC_RATE * seconds)) / SRC_RATE)).astype(np.float32)
    for hz, seconds in ((440, 0.5), (660, 0.7), (880, 0.3))
]
TOTAL_S = sum(len(s) for s in SEGMENTS) / SRC_RATE
HAS_MP3 = "mp3" in supported_formats()
needs_mp3 = pytest.mark.skipif(not HAS_MP3, reason="this libsndfile cannot write mp3")
MP3_RATES = supported_rates("mp3") if HAS_MP3 else ()


def seconds(data: bytes) -> float:
    samples, rate = sf.read(io.BytesIO(data), dtype="float32")
    return len(samples) / rate


def streamed(fmt: str, rate: int) -> bytes:
    return stream_header(fmt, rate) + b"".join(encode_chunk(s, SRC_RATE, fmt, rate) for s in SEGMENTS)


def test_pcm_wav_and_mp3_stream_and_the_others_do_not():
    assert {"pcm", "wav"} <= STREAMABLE
    assert ("mp3" in STREAMABLE) == HAS_MP3
    for fmt in ("flac", "ogg", "opus"):
        assert not streamable(fmt)
        with pytest.raises(UnsupportedAudio, match=f"{fmt} cannot be streamed segment by segment; streamable: wav"):
            encode_chunk(SEGMENTS[0], SRC_RATE, fmt, 24000)
    assert streamable(" WAV ")


@pytest.mark.parametrize("rate", supported_rates("wav"))
def test_a_wav_stream_is_a_header_of_unknown_length_then_every_sample(rate):
    data = streamed("wav", rate)
    header = stream_header("wav", rate)
    assert len(header) == 44
    assert header[4:8] == header[40:44] == b"\xff\xff\xff\xff"
    samples, decoded_rate = sf.read(io.BytesIO(data), dtype="float32")
    assert decoded_rate == rate
    assert len(samples) == sum(round(len(s) * rate / SRC_RATE) for s in SEGMENTS)


def test_a_pcm_stream_is_the_segments_raw_samples_one_after_the_other():
    assert stream_header("pcm", 24000) == b""
    assert streamed("pcm", 24000) == b"".join(encode(s, SRC_RATE, "pcm", 24000) for s in SEGMENTS)


@needs_mp3
def test_regression_mp3_files_joined_decode_as_their_first_segment_only():
    """What the streamed mp3 avoids: each encode's Xing/Info frame gives that file's frame count, so a
    decoder that reads it (libsndfile, through mpg123) stops after the first segment."""
    files = [encode(s, SRC_RATE, "mp3", 24000) for s in SEGMENTS]
    assert all(b"Xing" in f[:64] or b"Info" in f[:64] for f in files)
    assert seconds(b"".join(files)) == pytest.approx(len(SEGMENTS[0]) / SRC_RATE, abs=0.05)


@needs_mp3
def test_regression_vbr_frames_without_their_tag_decode_short():
    """Why the stream is constant bitrate: without a tag, the length is estimated from the first frame's
    bitrate, and a variable bitrate makes that estimate wrong (here well short of the audio)."""
    frames = b"".join(mp3_audio_frames(encode(s, SRC_RATE, "mp3", 24000)) for s in SEGMENTS)
    assert seconds(frames) < 0.5 * TOTAL_S


@needs_mp3
@pytest.mark.parametrize("rate", MP3_RATES)
def test_an_mp3_stream_decodes_to_every_segment(rate):
    data = streamed("mp3", rate)
    assert stream_header("mp3", rate) == b""
    frame = 1152 if rate > 24000 else 576  # MPEG-1 or MPEG-2 Layer III samples per frame
    # Decoders no longer trim LAME's delay (1105 samples) and its padding (under a frame): each segment
    # gains that much silence, and nothing is lost.
    slack = len(SEGMENTS) * (1105 + frame) / rate
    assert TOTAL_S <= seconds(data) <= TOTAL_S + slack
    samples, decoded_rate = sf.read(io.BytesIO(data), dtype="float32")
    assert decoded_rate == rate
    tail = samples[-int(0.2 * rate) :]  # the last tone, 880 Hz, is heard: the stream was read to its end
    spectrum = np.abs(np.fft.rfft(tail * np.hanning(len(tail))))
    assert float(np.fft.rfftfreq(len(tail), 1 / rate)[int(np.argmax(spectrum))]) == pytest.approx(880, abs=10)


@needs_mp3
def test_every_mp3_chunk_is_bare_frames_of_one_constant_bitrate():
    for segment in SEGMENTS:
        chunk = encode_chunk(segment, SRC_RATE, "mp3", 24000)
        assert chunk[:2] == b"\xff\xf3"  # an MPEG-2 Layer III frame, not ID3 or anything else
        assert b"Xing" not in chunk[:64]
        assert b"Info" not in chunk[:64]
        assert mp3_audio_frames(chunk) == chunk, "nothing left to strip"
        bitrates, at = set(), 0
        while (frame := _mp3_frame(chunk, at)) is not None:
            bitrates.add(chunk[at + 2] >> 4)
            at += frame[0]
        assert at == len(chunk), "the chunk is whole frames"
        assert bitrates == {8}  # MPEG-2 bitrate index 8: 64 kbit/s


@needs_mp3
def test_id3_tags_and_the_info_frame_are_dropped_and_the_frames_kept():
    whole = encode(SEGMENTS[0], SRC_RATE, "mp3", 24000)
    frames = mp3_audio_frames(whole)
    assert whole.endswith(frames)
    assert 0 < len(whole) - len(frames) <= 1024, "only the first (Xing/Info) frame went"
    id3v2 = b"ID3\x04\x00\x00" + bytes([0, 0, 1, 2]) + bytes(130)  # syncsafe size 0x82 = 130
    id3v1 = b"TAG" + bytes(125)
    assert mp3_audio_frames(id3v2 + whole + id3v1) == frames
    junk = b"not a frame"
    assert mp3_audio_frames(whole + junk) == frames + junk, "what is neither frame nor tag is kept"
