"""A document's audio: its parts' segments in reading order, with the pauses a listener expects between them.

After a part comes silence by its break (``DocumentSubmitted.breaks``): a
short one where a long paragraph was split (``s``), a longer one between
paragraphs (``p``), a long one between chapters (``c``). The whole document
and each chapter are streamed part by part in the document's format (wav,
mp3 or pcm), never held in memory whole: a book is hours of audio.

Chapter markers: the table of contents (``/toc``) gives each chapter's start
and length in milliseconds; a WAV file carries them as cue points with
labels (a ``cue `` chunk and a ``LIST``/``adtl`` chunk before the samples),
which audio editors show as markers, and an MP3 as ID3v2 chapter frames
(``CHAP`` and ``CTOC``), which podcast and audiobook players show.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import numpy as np

from contracts.pauses import PAUSE_MS
from foundation.audio_formats import Mp3Encoder, encode_chunk, stream_header
from foundation.blobs import BlobStore
from producers.audio_out import Audible, segment_samples

STREAMED_FORMATS: Final = ("wav", "mp3", "pcm")


@dataclass(frozen=True)
class ChapterSpan:
    index: int
    title: str
    first_part: int
    parts: int
    start_ms: int
    duration_ms: int


class Chapter(Protocol):
    @property
    def title(self) -> str: ...

    @property
    def parts(self) -> int: ...


def part_ms(segments: Sequence[Audible], brk: str) -> int:
    return sum(s.duration_ms for s in segments) + PAUSE_MS[brk]


def chapter_spans(
    chapters: Sequence[Chapter], breaks: str, segments: Mapping[int, Sequence[Audible]]
) -> list[ChapterSpan]:
    """Each chapter's place in the stitched audio (``segments``: each completed part's, by part index)."""
    spans, first, at_ms = [], 0, 0
    for index, chapter in enumerate(chapters):
        length = sum(part_ms(segments.get(p, []), breaks[p]) for p in range(first, first + chapter.parts))
        spans.append(ChapterSpan(index, chapter.title, first, chapter.parts, at_ms, length))
        first, at_ms = first + chapter.parts, at_ms + length
    return spans


def _chunk(tag: bytes, data: bytes) -> bytes:
    return tag + struct.pack("<I", len(data)) + data + (b"\0" if len(data) % 2 else b"")


def wav_header(rate: int, cues: Sequence[tuple[int, str]] = ()) -> bytes:
    """A streaming 16-bit mono WAV header (sizes "unknown", as ``stream_header``) with ``cues``
    (``(sample offset, label)``) as cue points before the samples."""
    plain = stream_header("wav", rate)
    if not cues:
        return plain
    points = b"".join(struct.pack("<II4sIII", n, 0, b"data", 0, 0, offset) for n, (offset, _) in enumerate(cues, 1))
    cue = _chunk(b"cue ", struct.pack("<I", len(cues)) + points)
    labels = b"".join(
        _chunk(b"labl", struct.pack("<I", n) + label.encode("utf-8") + b"\0") for n, (_, label) in enumerate(cues, 1)
    )
    adtl = _chunk(b"LIST", b"adtl" + labels)
    fmt_end = plain.index(b"data")
    return plain[:fmt_end] + cue + adtl + plain[fmt_end:]


def _syncsafe(n: int) -> bytes:
    return bytes(((n >> 21) & 0x7F, (n >> 14) & 0x7F, (n >> 7) & 0x7F, n & 0x7F))


def _frame(frame_id: bytes, data: bytes) -> bytes:
    return frame_id + _syncsafe(len(data)) + b"\0\0" + data


def id3_chapters(chapters: Sequence[tuple[int, int, str]]) -> bytes:
    """An ID3v2.4 tag with a ``CHAP`` frame per chapter (``(start ms, end ms, title)``, the title as its
    ``TIT2``) and a ``CTOC`` listing them in order, as podcast and audiobook players read chapters from an
    MP3 (the ID3v2 Chapter Frame Addendum). The table lists at most 255 chapters (its count is one byte)."""
    if not chapters:
        return b""
    frames, ids = [], []
    for n, (start, end, title) in enumerate(chapters):
        element = f"ch{n}".encode() + b"\0"
        ids.append(element)
        title_frame = _frame(b"TIT2", b"\x03" + title.encode("utf-8"))
        frames.append(_frame(b"CHAP", element + struct.pack(">IIII", start, end, 0xFFFFFFFF, 0xFFFFFFFF) + title_frame))
    listed = ids[:255]
    toc = _frame(b"CTOC", b"toc\0" + bytes((0x03, len(listed))) + b"".join(listed))
    body = toc + b"".join(frames)
    return b"ID3\x04\x00\x00" + _syncsafe(len(body)) + body


def opening(fmt: str, rate: int, chapters: Sequence[tuple[int, int, str]]) -> bytes:
    """What the stitched stream starts with: the format's header, with the chapters as markers where the
    format carries them (WAV cue points, MP3 ID3v2 chapter frames; raw pcm has nowhere to put them)."""
    if fmt == "wav":
        return wav_header(rate, [(round(start * rate / 1000), title) for start, _, title in chapters])
    if fmt == "mp3":
        return id3_chapters(chapters)
    return stream_header(fmt, rate)


async def stitched(
    blobs: BlobStore,
    parts: Sequence[tuple[Sequence[Audible], str]],
    fmt: str,
    rate: int,
    chapters: Sequence[tuple[int, int, str]] = (),
) -> AsyncIterator[bytes]:
    """``parts`` (each part's segments and its break) as one ``fmt`` stream at ``rate``, part by part, after
    :func:`opening` with ``chapters`` (``(start ms, end ms, title)`` from the stream's start)."""
    yield opening(fmt, rate, chapters)
    # One encoder for the whole MP3: per-part encodes would each add the encoder's delay and padding,
    # and over a book drift the audio away from its chapter marks.
    mp3 = await asyncio.to_thread(Mp3Encoder, rate) if fmt == "mp3" else None
    for segments, brk in parts:
        pieces = [await segment_samples(blobs, s) for s in segments]
        source_rate = pieces[0][1] if pieces else rate
        silence = np.zeros(round(source_rate * PAUSE_MS[brk] / 1000), dtype=np.float32)
        samples = np.concatenate([*(p[0] for p in pieces), silence]).astype(np.float32)
        if mp3 is not None:
            yield await asyncio.to_thread(mp3.write, samples, source_rate)
        else:
            yield await asyncio.to_thread(encode_chunk, samples, source_rate, fmt, rate)
    if mp3 is not None:
        yield await asyncio.to_thread(mp3.close)
