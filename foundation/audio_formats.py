"""Output formats and sample rates a client may ask for, and encoding to them.

Formats are offered only when this libsndfile can write them (mp3 needs a
libsndfile built with LAME/mpg123), and ``aac`` (ADTS, ``audio/aac``) when PyAV
is installed (``foundation.aac``: libsndfile has no AAC). ``pcm`` is raw signed 16-bit
little-endian mono with no header; it is served as
``application/octet-stream`` because ``audio/L16`` (RFC 2586) means
big-endian samples.

Opus only codes 8, 12, 16, 24 and 48 kHz, so ``opus`` at 22050 or 44100 Hz
is rejected rather than silently delivered at another rate: the rate is part
of the request's fingerprint, and a client that asked for 44100 Hz would get
a file that says 48000 Hz.

Ogg (Vorbis and Opus) bytes differ from call to call even for the same
samples: libsndfile gives every Ogg stream a random serial number.

Streaming (``STREAMABLE``): a job's audio can be sent segment by segment as
``stream_header(fmt, rate)`` followed by one ``encode_chunk`` per segment,
for ``pcm`` (the raw samples), ``wav`` (a header whose sizes say "unknown",
then raw samples), ``mp3`` (each segment's MPEG frames) and ``aac`` (ADTS
frames, each with its own header). A stream of one job is better encoded by
one encoder for the whole stream (``foundation.stream_encoders``): the
encoder's delay is then paid once, not once a segment.

A separately encoded MP3 starts with a Xing/Info frame (LAME's tag: this
file's frame count, encoder delay and padding; these encodes carry no ID3
tag). Concatenated, a decoder that trusts the first tag (libsndfile, through
mpg123) stops after the first segment; ffmpeg happens to read on. So
``encode_chunk`` sends only the audio frames (``mp3_audio_frames`` drops the
Xing/Info frame, and ID3 tags should there be any), and encodes at a constant
bitrate: without the tag, a decoder that
needs the length (libsndfile, players showing a duration) estimates it from
the first frame's bitrate, which is wrong for VBR (libsndfile then reads 0.35
s of a 1.5 s stream). The price is that decoders no longer trim LAME's delay
and padding: each segment gains about 50 to 100 ms of silence (1105 samples
at its start, under a frame at its end). Whole files (``encode``) stay VBR
with their tag.

Every encoder is handed at most ``foundation.audio.ENCODE_BLOCK_FRAMES`` frames a call, whole files
(``foundation.audio.encode_file``) as streams: libvorbis puts a call's frames on the thread's stack, and a
long Ogg Vorbis answer written in one call killed the process (issue 40).

``flac``, ``ogg`` and ``opus`` do not stream this way: each encode is a whole
stream with its own headers (FLAC: STREAMINFO, frame numbers from 0; Ogg: a
new logical stream, a "chain" that libsndfile, among other decoders, does not
read past), so they are served whole.
"""

from __future__ import annotations

import io
import struct
from types import MappingProxyType
from typing import Final

import numpy as np
import soundfile as sf
import soxr  # type: ignore[import-untyped]  # ships no type information

from foundation import aac
from foundation.audio import Samples, encode_file, write_blocks
from foundation.errors import FoundationError

SUPPORTED_RATES: Final = (16000, 22050, 24000, 44100, 48000)
OPUS_RATES: Final = (8000, 12000, 16000, 24000, 48000)

# format -> (libsndfile container, subtype, media type)
_CANDIDATES: Final = {
    "wav": ("WAV", "PCM_16", "audio/wav"),
    "flac": ("FLAC", "PCM_16", "audio/flac"),
    "ogg": ("OGG", "VORBIS", "audio/ogg"),
    # RFC 7845: Ogg Opus files are audio/ogg; the codecs parameter tells them apart from Vorbis.
    "opus": ("OGG", "OPUS", "audio/ogg; codecs=opus"),
    "mp3": ("MP3", "MPEG_LAYER_III", "audio/mpeg"),
    "pcm": ("RAW", "PCM_16", "application/octet-stream"),
}


def _endian(fmt: str) -> str:
    # Only headerless pcm needs an explicit byte order; compressed containers refuse one.
    return "LITTLE" if fmt == "pcm" else "FILE"


# Not libsndfile's: encoded by foundation.aac (PyAV), as ADTS frames.
_AAC: Final = ("ADTS", "AAC", "audio/aac")


def _available() -> MappingProxyType[str, tuple[str, str, str]]:
    # Probed once at import: libsndfile's and PyAV's abilities are fixed for the process.
    formats = {
        fmt: spec
        for fmt, spec in _CANDIDATES.items()
        if spec[1] in sf.available_subtypes(spec[0]) and sf.check_format(spec[0], spec[1], _endian(fmt))
    }
    if aac.available():
        formats["aac"] = _AAC
    return MappingProxyType(formats)


_FORMATS: Final = _available()

# libsndfile's compression level for streamed mp3, which is constant bitrate: 64 kbit/s at 16 to
# 24 kHz, 128 kbit/s at 44.1 and 48 kHz (libsndfile 1.2 rounds 0.62 to 0.65 to these).
_MP3_STREAM_LEVEL: Final = 0.63

# Formats whose per-segment encodes, after stream_header, concatenate into one playable stream.
STREAMABLE: Final = frozenset({"pcm", "wav", "mp3", "aac"} & set(_FORMATS))


class UnsupportedAudio(FoundationError):
    """A format or sample rate this service cannot produce; the message lists what it can."""


class UnsupportedFormat(UnsupportedAudio):
    """A format this service cannot produce (at any rate)."""


def supported_formats() -> tuple[str, ...]:
    """Format names this process can encode, in a stable order."""
    return tuple(_FORMATS)


def supported_rates(fmt: str) -> tuple[int, ...]:
    """Sample rates (Hz) offered for ``fmt``."""
    fmt = _check_format(fmt)
    return tuple(r for r in SUPPORTED_RATES if r in OPUS_RATES) if fmt == "opus" else SUPPORTED_RATES


def media_type(fmt: str, rate: int | None = None) -> str:
    """The Content-Type of audio in ``fmt`` (``rate``, when given, is validated; no type here needs it)."""
    fmt = check(fmt, rate)[0] if rate is not None else _check_format(fmt)
    return _FORMATS[fmt][2]


def check(fmt: str, rate: int) -> tuple[str, int]:
    """``(format, rate)`` normalized; ``UnsupportedAudio`` if this process cannot produce them."""
    fmt = _check_format(fmt)
    rates = supported_rates(fmt)
    if isinstance(rate, bool) or not isinstance(rate, int) or rate not in rates:
        raise UnsupportedAudio(
            f"unsupported sample rate {rate!r} for {fmt}; supported rates: {', '.join(map(str, rates))} Hz"
        )
    return fmt, rate


def resample(samples: Samples, src_rate: int, dst_rate: int) -> Samples:
    """Mono float32 ``samples`` from ``src_rate`` to ``dst_rate`` (soxr, high quality)."""
    if src_rate <= 0 or dst_rate <= 0:
        raise ValueError(f"sample rates must be positive, not {src_rate} and {dst_rate}")
    mono = np.asarray(samples, dtype=np.float32).reshape(-1)
    if src_rate == dst_rate or mono.size == 0:
        return mono
    return np.asarray(soxr.resample(mono, src_rate, dst_rate, quality="HQ"), dtype=np.float32)


def encode(samples: Samples, src_rate: int, fmt: str, rate: int) -> bytes:
    """Mono ``samples`` at ``src_rate`` as a ``fmt`` file (or raw stream) at ``rate``."""
    fmt, rate = check(fmt, rate)
    return _encode(samples, src_rate, fmt, rate)


def _encode(samples: Samples, src_rate: int, fmt: str, rate: int, *, constant_bitrate: bool = False) -> bytes:
    container, subtype, _ = _FORMATS[fmt]
    # Clip after resampling: the filter overshoots near full scale, and PCM would wrap.
    audio = np.clip(resample(samples, src_rate, rate), -1.0, 1.0)
    if fmt == "aac":
        return aac.encode_aac(audio, rate)
    # soundfile applies a bitrate mode only together with a compression level.
    mode, level = ("CONSTANT", _MP3_STREAM_LEVEL) if constant_bitrate else (None, None)
    return encode_file(
        audio,
        rate,
        container=container,
        subtype=subtype,
        endian=_endian(fmt),
        compression_level=level,
        bitrate_mode=mode,
    )


def streamable(fmt: str) -> bool:
    """Whether ``fmt`` can be sent segment by segment (``stream_header``, then ``encode_chunk`` each)."""
    return _check_format(fmt) in STREAMABLE


def stream_header(fmt: str, rate: int) -> bytes:
    """What a stream of ``fmt`` at ``rate`` starts with, before its first chunk: for ``wav`` a 16-bit
    mono header whose sizes say "unknown" (0xFFFFFFFF), as streaming players expect; else nothing."""
    fmt, rate = check(fmt, rate)
    if fmt != "wav":
        return b""
    unknown = 0xFFFFFFFF
    return (
        b"RIFF"
        + struct.pack("<I", unknown)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
        + b"data"
        + struct.pack("<I", unknown)
    )


def encode_chunk(samples: Samples, src_rate: int, fmt: str, rate: int) -> bytes:
    """Mono ``samples`` as one piece of a ``fmt`` stream at ``rate``: pieces concatenated after
    ``stream_header(fmt, rate)`` play as one file. ``UnsupportedAudio`` for a format that cannot stream."""
    fmt, rate = check(fmt, rate)
    if fmt not in STREAMABLE:
        streamable_ones = ", ".join(f for f in _FORMATS if f in STREAMABLE)
        raise UnsupportedAudio(f"{fmt} cannot be streamed segment by segment; streamable: {streamable_ones}")
    if fmt == "mp3":
        return mp3_audio_frames(_encode(samples, src_rate, "mp3", rate, constant_bitrate=True))
    if fmt == "aac":  # ADTS frames carry their own headers: whole streams join as one
        return _encode(samples, src_rate, "aac", rate)
    return _encode(samples, src_rate, "pcm", rate)  # wav's samples follow its header as raw pcm


# MPEG audio Layer III: kbit/s by bitrate index, and Hz by sample rate index, per MPEG version.
_MP3_KBPS: Final = {
    1: (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),
    2: (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
}
_MP3_HZ: Final = {3: (44100, 48000, 32000), 2: (22050, 24000, 16000), 0: (11025, 12000, 8000)}  # 0: MPEG 2.5


def _mp3_frame(data: bytes, at: int) -> tuple[int, int] | None:
    """``(length, offset of a Xing/Info tag)`` of the Layer III frame at ``at``, or None if none starts there."""
    if at + 4 > len(data) or data[at] != 0xFF or data[at + 1] & 0xE0 != 0xE0:
        return None
    version, layer = (data[at + 1] >> 3) & 3, (data[at + 1] >> 1) & 3
    bitrate_index, rate_index = data[at + 2] >> 4, (data[at + 2] >> 2) & 3
    if version == 1 or layer != 1 or bitrate_index in (0, 15) or rate_index == 3:
        return None  # reserved version, not Layer III, free or bad bitrate, reserved rate
    kbps = _MP3_KBPS[1 if version == 3 else 2][bitrate_index]
    hz = _MP3_HZ[version][rate_index]
    padding = (data[at + 2] >> 1) & 1
    length = (144 if version == 3 else 72) * kbps * 1000 // hz + padding
    mono = data[at + 3] >> 6 == 3
    side_info = (17 if mono else 32) if version == 3 else (9 if mono else 17)
    crc = 0 if data[at + 1] & 1 else 2
    return length, at + 4 + crc + side_info


def _id3v2_length(data: bytes, at: int) -> int:
    if data[at : at + 3] != b"ID3" or at + 10 > len(data):
        return 0
    size = 0
    for byte in data[at + 6 : at + 10]:  # "syncsafe": 7 bits a byte
        size = (size << 7) | (byte & 0x7F)
    footer = 10 if data[at + 5] & 0x10 else 0
    return 10 + size + footer


def mp3_audio_frames(data: bytes) -> bytes:
    """The audio frames of MP3 file ``data``, without its ID3 tags and its Xing/Info (or VBRI) frame:
    bytes that can follow or precede other such bytes in one stream. Bytes after the last frame that
    are not a tag are kept as they are (decoders skip what is not a frame)."""
    at = _id3v2_length(data, 0)
    frames: list[bytes] = []
    first = True
    while (frame := _mp3_frame(data, at)) is not None and at + frame[0] <= len(data):
        length, tag_at = frame
        is_info = data[tag_at : tag_at + 4] in (b"Xing", b"Info") or data[at + 36 : at + 40] == b"VBRI"
        if not (first and is_info):
            frames.append(data[at : at + length])
        first = False
        at += length
    rest = data[at:]
    id3v1 = len(rest) == 128 and rest[:3] == b"TAG"
    return b"".join(frames) + (b"" if id3v1 or _id3v2_length(rest, 0) == len(rest) else rest)


def _check_format(fmt: str) -> str:
    key = fmt.strip().lower()
    if key not in _FORMATS:
        raise UnsupportedFormat(f"unsupported audio format {fmt!r}; supported formats: {', '.join(_FORMATS)}")
    return key


class _Outlet:
    """A write-only file for libsndfile that hands on what is written instead of keeping it: ``take`` returns
    the bytes written since the last call. libsndfile may seek back at close to rewrite a header that was
    handed on already; such rewrites are dropped (the stream skips that header, see :class:`Mp3Encoder`)."""

    def __init__(self) -> None:
        self._pending: list[bytes] = []
        self._position = 0
        self._end = 0

    def write(self, data: bytes) -> int:
        if self._position >= self._end:  # a rewrite of what was handed on is dropped
            self._pending.append(bytes(data))
            self._end = self._position + len(data)
        self._position += len(data)
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._end}[whence]
        self._position = base + offset
        return self._position

    def tell(self) -> int:
        return self._position

    def read(self, size: int = -1) -> bytes:
        return b""

    def take(self) -> bytes:
        data, self._pending = b"".join(self._pending), []
        return data


class Mp3Encoder:
    """One MP3 encoder for a whole long stream (a document's audio), fed piece by piece.

    Encoding each piece on its own (``encode_chunk``) adds the encoder's delay and padding to every
    piece: tens of milliseconds each, which over a book's thousands of parts drift its audio from its
    chapter marks by minutes. One encoder adds them once. What ``write`` returns is whole MPEG frames,
    without the Xing/Info frame (its counts are only known at the end), so the pieces concatenate."""

    def __init__(self, rate: int) -> None:
        self._rate = check("mp3", rate)[1]
        self._outlet = _Outlet()
        self._file = sf.SoundFile(
            self._outlet,
            "w",
            self._rate,
            1,
            format="MP3",
            subtype="MPEG_LAYER_III",
            compression_level=_MP3_STREAM_LEVEL,
            bitrate_mode="CONSTANT",
        )
        self._held = b""  # bytes not yet known to be whole frames
        self._started = False

    def write(self, samples: Samples, src_rate: int) -> bytes:
        write_blocks(self._file, np.clip(resample(samples, src_rate, self._rate), -1.0, 1.0))
        return self._frames(self._outlet.take())

    def close(self) -> bytes:
        self._file.close()
        tail = self._outlet.take()
        data, self._held = self._held + tail, b""
        return mp3_audio_frames(data) if data else b""

    def _frames(self, data: bytes) -> bytes:
        data = self._held + data
        at = 0 if self._started else _id3v2_length(data, 0)
        out_from = at
        while (frame := _mp3_frame(data, at)) is not None and at + frame[0] <= len(data):
            length, tag_at = frame
            if not self._started:
                self._started = True
                if data[tag_at : tag_at + 4] in (b"Xing", b"Info"):
                    out_from = at + length  # the Info frame: its counts are rewritten at close, unseen
            at += length
        self._held = data[at:]
        return data[out_from:at]
