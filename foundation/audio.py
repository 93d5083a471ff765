"""Audio bytes shared by the worker (writes segments) and the API (serves jobs).

Segments are stored as mono 16-bit PCM WAV at the engine's sample rate; a
whole job is the concatenation of its segments' samples.
"""

from __future__ import annotations

import io
from typing import Final

import numpy as np
import numpy.typing as npt
import soundfile as sf

Samples = npt.NDArray[np.float32]
WAV_HEADER_BYTES: Final = 44  # what ``encode_wav``'s files hold before their 16-bit samples


def encode_wav(samples: Samples, sample_rate: int) -> bytes:
    """Float samples in [-1, 1] as a 16-bit PCM WAV file."""
    buffer = io.BytesIO()
    sf.write(buffer, np.clip(samples, -1.0, 1.0), sample_rate, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def wav_seconds(byte_length: int, sample_rate: int) -> float:
    """How long a segment file of ``encode_wav`` lasts, to the sample, from its size alone."""
    return (byte_length - WAV_HEADER_BYTES) / 2 / sample_rate


def decode_audio(data: bytes) -> tuple[Samples, int]:
    """Any format libsndfile reads, as float32 mono samples and their rate."""
    samples, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    return samples.mean(axis=1).astype(np.float32), int(rate)
