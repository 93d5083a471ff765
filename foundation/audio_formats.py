"""Output formats and sample rates a client may ask for, and encoding to them.

Formats are offered only when this libsndfile can write them (mp3 needs a
libsndfile built with LAME/mpg123). ``pcm`` is raw signed 16-bit
little-endian mono with no header; it is served as
``application/octet-stream`` because ``audio/L16`` (RFC 2586) means
big-endian samples.

Opus only codes 8, 12, 16, 24 and 48 kHz, so ``opus`` at 22050 or 44100 Hz
is rejected rather than silently delivered at another rate: the rate is part
of the request's fingerprint, and a client that asked for 44100 Hz would get
a file that says 48000 Hz.

Ogg (Vorbis and Opus) bytes differ from call to call even for the same
samples: libsndfile gives every Ogg stream a random serial number.
"""

from __future__ import annotations

import io
from types import MappingProxyType
from typing import Final

import numpy as np
import soundfile as sf
import soxr  # type: ignore[import-untyped]  # ships no type information

from foundation.audio import Samples
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


def _available() -> MappingProxyType[str, tuple[str, str, str]]:
    # Probed once at import: libsndfile's abilities are fixed for the process.
    return MappingProxyType(
        {
            fmt: spec
            for fmt, spec in _CANDIDATES.items()
            if spec[1] in sf.available_subtypes(spec[0]) and sf.check_format(spec[0], spec[1], _endian(fmt))
        }
    )


_FORMATS: Final = _available()


class UnsupportedAudio(FoundationError):
    """A format or sample rate this service cannot produce; the message lists what it can."""


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
    container, subtype, _ = _FORMATS[fmt]
    # Clip after resampling: the filter overshoots near full scale, and PCM would wrap.
    audio = np.clip(resample(samples, src_rate, rate), -1.0, 1.0)
    buffer = io.BytesIO()
    sf.write(buffer, audio, rate, format=container, subtype=subtype, endian=_endian(fmt))
    return buffer.getvalue()


def _check_format(fmt: str) -> str:
    key = fmt.strip().lower()
    if key not in _FORMATS:
        raise UnsupportedAudio(f"unsupported audio format {fmt!r}; supported formats: {', '.join(_FORMATS)}")
    return key
