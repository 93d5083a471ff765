"""Audio bytes shared by the worker (writes segments) and the API (serves jobs).

Segments are stored as mono 16-bit PCM WAV at the engine's sample rate; a
whole job is the concatenation of its segments' samples.

Every encode hands its encoder at most ``ENCODE_BLOCK_FRAMES`` frames a call (``encode_file`` for whole
files, ``blocks`` for streaming encoders): what one call costs an encoder is then bounded by the block, not
by the length of the answer.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator
from typing import Final

import numpy as np
import numpy.typing as npt
import soundfile as sf

Samples = npt.NDArray[np.float32]
WAV_HEADER_BYTES: Final = 44  # what ``encode_wav``'s files hold before their 16-bit samples

# The most frames one call hands an encoder. libvorbis (under libsndfile's Ogg Vorbis) allocates the
# frames of a call on the calling thread's stack (alloca, when it first extrapolates the stream's
# start): one whole answer in one write overflowed a to_thread worker's 8 MiB stack at about 2.1 M frames
# (87 s at 24 kHz, 44 s at 48 kHz) and killed the API with SIGSEGV (issue 40). 64 Ki mono float32
# frames are 256 KiB, whatever the answer's length.
ENCODE_BLOCK_FRAMES: Final = 65_536


def blocks(samples: Samples) -> Iterator[Samples]:
    """``samples`` (frames first) in consecutive views of at most ``ENCODE_BLOCK_FRAMES`` frames (none if empty)."""
    for start in range(0, len(samples), ENCODE_BLOCK_FRAMES):
        yield samples[start : start + ENCODE_BLOCK_FRAMES]


def write_blocks(file: sf.SoundFile, samples: Samples) -> None:
    """``samples`` written to an open ``file`` in ``blocks``: never the whole array in one call."""
    for block in blocks(samples):
        file.write(block)


def encode_file(
    samples: Samples,
    sample_rate: int,
    *,
    container: str,
    subtype: str,
    endian: str = "FILE",
    compression_level: float | None = None,
    bitrate_mode: str | None = None,
) -> bytes:
    """``samples`` (frames first, as ``sf.write`` takes them) as one whole libsndfile file of ``container``
    and ``subtype``, written in bounded blocks.

    Every whole-file encode goes through here: ``sf.write`` with the whole array is what crashed on long
    Vorbis answers (see ``ENCODE_BLOCK_FRAMES``)."""
    frames = np.asarray(samples)
    buffer = io.BytesIO()
    with sf.SoundFile(
        buffer,
        "w",
        sample_rate,
        1 if frames.ndim == 1 else frames.shape[1],
        format=container,
        subtype=subtype,
        endian=endian,
        compression_level=compression_level,
        bitrate_mode=bitrate_mode,
    ) as file:
        write_blocks(file, frames)
    return buffer.getvalue()


def encode_wav(samples: Samples, sample_rate: int) -> bytes:
    """Float samples in [-1, 1] (mono) as a 16-bit PCM WAV file: the bytes libsndfile writes for them.

    Written with numpy, not through libsndfile: the worker encodes every segment it makes, and at a GPU's
    pace libsndfile's virtual I/O into a ``BytesIO`` was a fifth of the worker's pool threads' time
    (docs/profile.md, "At GPU pace"); this costs a third of that (0.24 → 0.09 ms for 2 s of audio). The
    samples are libsndfile's own: its float-to-16-bit conversion rounds to 32 bits and keeps the top 16
    (tests compare the two byte for byte), so a segment's blob, and its hash, did not change with the
    encoder. NaN is silence.
    """
    frames = np.asarray(samples, dtype=np.float32)
    if frames.ndim == 2 and frames.shape[1] == 1:
        frames = frames[:, 0]
    if frames.ndim != 1:
        raise ValueError(f"encode_wav writes mono samples, not an array of shape {frames.shape}")
    # libsndfile's conversion: each sample rounded to 32 bits, then its top 16 bits (an arithmetic shift,
    # so a floor). Scaling by powers of two is exact in float32, so it is done there, in place.
    scaled = np.clip(np.nan_to_num(frames, nan=0.0), -1.0, 1.0) * np.float32(2.0**31)
    np.rint(scaled, out=scaled)
    scaled *= np.float32(2.0**-16)
    np.floor(scaled, out=scaled)
    pcm = np.minimum(scaled, np.float32(32767.0), out=scaled).astype("<i2")  # 1.0 is 32767, as there
    data = pcm.tobytes()
    return _wav_header(len(data), sample_rate) + data


def _wav_header(data_bytes: int, sample_rate: int) -> bytes:
    """The canonical 44-byte RIFF header of mono 16-bit PCM (``WAV_HEADER_BYTES``)."""
    fmt = struct.pack("<HHIIHH", 1, 1, sample_rate, sample_rate * 2, 2, 16)  # PCM, mono, rate, bytes/s, align, bits
    return (
        b"RIFF"
        + struct.pack("<I", 36 + data_bytes)
        + b"WAVEfmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + (b"data" + struct.pack("<I", data_bytes))
    )


def wav_seconds(byte_length: int, sample_rate: int) -> float:
    """How long a segment file of ``encode_wav`` lasts, to the sample, from its size alone."""
    return (byte_length - WAV_HEADER_BYTES) / 2 / sample_rate


def decode_audio(data: bytes) -> tuple[Samples, int]:
    """Any format libsndfile reads, as float32 mono samples and their rate."""
    samples, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    return samples.mean(axis=1).astype(np.float32), int(rate)
