"""AAC in ADTS frames, encoded by FFmpeg's native AAC encoder as PyAV's wheels ship it.

libsndfile has no AAC, and voxlog does not assume an ``ffmpeg`` program: PyAV (``av`` on PyPI) bundles
FFmpeg's libraries, whose native ``aac`` encoder is LGPL and needs nothing else. ADTS is what OpenAI
serves as ``audio/aac``: every frame carries its own header (rate, channels, length), so a stream can be
cut anywhere between frames and the pieces joined, and a decoder can start on any frame.

One :class:`AacEncoder` encodes a whole stream, piece by piece: each piece's frames come out as soon as
the encoder has them, and the encoder's priming (1024 samples) is paid once for the whole stream, not
once a piece. Samples come in at the stream's rate (resampling is the caller's: ``foundation.audio_formats``).
"""

from __future__ import annotations

import io
from typing import Final

import numpy as np

from foundation.audio import Samples, blocks
from foundation.errors import FoundationError

try:
    import av
except ImportError:  # pragma: no cover - av is a main dependency; without it, aac is not offered
    av = None  # type: ignore[assignment]

BIT_RATE: Final = 64_000
"""Bits a second, mono: what OpenAI's own AAC answers use, and plenty for speech."""


class AacUnavailable(FoundationError):
    """PyAV, or its AAC encoder, is missing from this installation."""


def available() -> bool:
    """Whether this process can encode AAC (PyAV installed, with FFmpeg's ``aac`` encoder)."""
    return av is not None and "aac" in av.codecs_available and "adts" in av.formats_available


class _Sink(io.RawIOBase):
    """Where the muxer writes: it keeps what it is given until :meth:`take` hands it on. ADTS is written
    front to back, never rewritten, so nothing needs to seek."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]  # RawIOBase's signature is a buffer
        self._parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        data, self._parts = b"".join(self._parts), []
        return data


class AacEncoder:
    """An ADTS stream at ``rate`` Hz, mono: :meth:`write` returns the frames encoded so far (whole frames,
    possibly none), :meth:`close` the rest; every piece joined is one stream."""

    def __init__(self, rate: int) -> None:
        if not available():
            raise AacUnavailable("AAC needs PyAV (pip install av) with FFmpeg's aac encoder")
        self._rate = rate
        self._sink = _Sink()
        self._container = av.open(self._sink, "w", format="adts")
        self._stream = self._container.add_stream("aac", rate=rate, layout="mono")
        self._stream.bit_rate = BIT_RATE
        self._pts = 0
        self._closed = False

    def write(self, samples: Samples) -> bytes:
        mono = np.clip(np.asarray(samples, dtype=np.float32).reshape(-1), -1.0, 1.0)
        for block in blocks(mono):  # bounded frames a call, as every encoder here (foundation.audio)
            frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(block).reshape(1, -1), format="flt", layout="mono")
            frame.sample_rate, frame.pts = self._rate, self._pts
            self._pts += len(block)
            for packet in self._stream.encode(frame):
                self._container.mux(packet)
        return self._sink.take()

    def close(self) -> bytes:
        """The encoder's last frames (it holds up to two frames' worth of samples); the stream ends here."""
        if self._closed:
            return b""
        self._closed = True
        for packet in self._stream.encode(None):
            self._container.mux(packet)
        self._container.close()
        return self._sink.take()


def encode_aac(samples: Samples, rate: int) -> bytes:
    """Mono ``samples`` at ``rate`` as one whole ADTS stream."""
    encoder = AacEncoder(rate)
    return encoder.write(samples) + encoder.close()
