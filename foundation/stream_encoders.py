"""One encoder for a whole streamed answer, fed segment by segment.

A job's audio streams as its segments are made. Encoding each segment on its own and joining the results
(``audio_formats.encode_chunk``) gives a playable stream for pcm, wav, mp3 and aac, but a compressed one
pays the encoder's delay and padding once a segment: silences of 50 to 100 ms inside the speech, that add
up over a long job. And a segment encoded as a whole file (what the speech route's server-sent events once
carried, MP3 Info frame and all) is worse: the deltas of a 10.1 s job, joined, decoded to 3.7 s, a
decoder trusting the first Info frame's count. A :class:`StreamEncoder` keeps one encoder for the whole
answer instead: what each :meth:`~StreamEncoder.write` returns, joined in order with :meth:`~StreamEncoder.close`'s
bytes, is one file of the format, whose length is the job's (plus one encoder delay, at its start).

Every format in ``audio_formats.STREAMABLE`` has one: ``pcm`` (the samples), ``wav`` (a header whose sizes
say "unknown", then the samples), ``mp3`` (``audio_formats.Mp3Encoder``: constant-bitrate frames, no
Info frame) and ``aac`` (``foundation.aac``: ADTS frames).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from foundation import aac
from foundation.audio import Samples
from foundation.audio_formats import STREAMABLE, Mp3Encoder, UnsupportedAudio, check, encode, resample, stream_header


class StreamEncoder(Protocol):
    """Samples in, bytes of one stream out: :meth:`write`'s pieces, then :meth:`close`'s, in order."""

    def write(self, samples: Samples, src_rate: int) -> bytes: ...

    def close(self) -> bytes: ...


class _Raw:
    """pcm, and wav after its header: the samples as 16-bit little-endian, nothing held back."""

    def __init__(self, fmt: str, rate: int) -> None:
        self._rate = rate
        self._header = stream_header(fmt, rate)

    def write(self, samples: Samples, src_rate: int) -> bytes:
        header, self._header = self._header, b""
        return header + encode(samples, src_rate, "pcm", self._rate)

    def close(self) -> bytes:
        header, self._header = self._header, b""  # a stream of no samples is still a (wav) file
        return header


class _Aac:
    def __init__(self, rate: int) -> None:
        self._rate = rate
        self._encoder = aac.AacEncoder(rate)

    def write(self, samples: Samples, src_rate: int) -> bytes:
        return self._encoder.write(np.clip(resample(samples, src_rate, self._rate), -1.0, 1.0))

    def close(self) -> bytes:
        return self._encoder.close()


def stream_encoder(fmt: str, rate: int) -> StreamEncoder:
    """A new encoder of one ``fmt`` stream at ``rate`` (``UnsupportedAudio`` for a format that cannot stream)."""
    fmt, rate = check(fmt, rate)
    if fmt not in STREAMABLE:
        raise UnsupportedAudio(f"{fmt} cannot be streamed; streamable: {', '.join(sorted(STREAMABLE))}")
    if fmt == "mp3":
        return Mp3Encoder(rate)
    if fmt == "aac":
        return _Aac(rate)
    return _Raw(fmt, rate)
