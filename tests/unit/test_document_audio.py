"""A document's chapter layout and its markers in the stitched file: WAV cue points, MP3 ID3v2 chapters."""

from __future__ import annotations

import struct

import pytest

from contracts.pauses import PAUSE_MS
from producers.document_audio import chapter_spans, id3_chapters, opening, wav_header
from projections.reads.rows import ChapterRow
from tests.support.api_fakes import segment

pytestmark = pytest.mark.unit


def test_chapters_start_where_the_previous_one_ends_with_each_parts_pause_counted():
    segments = {
        0: [segment(0, duration_ms=1000)],
        1: [segment(0, duration_ms=500), segment(1, duration_ms=250)],
        2: [segment(0, duration_ms=2000)],
    }
    spans = chapter_spans([ChapterRow("One", 2), ChapterRow("Two", 1)], "pcc", segments)
    assert [(s.title, s.first_part, s.start_ms) for s in spans] == [("One", 0, 0), ("Two", 2, 1000 + 700 + 750 + 2000)]
    assert spans[0].duration_ms == 1000 + PAUSE_MS["p"] + 750 + PAUSE_MS["c"]
    assert spans[1].duration_ms == 2000 + PAUSE_MS["c"]


def riff(header: bytes) -> dict[bytes, bytes]:
    chunks, at = {}, 12
    while at + 8 <= len(header):
        tag, size = header[at : at + 4], struct.unpack("<I", header[at + 4 : at + 8])[0]
        if tag == b"data":
            chunks[tag] = b""
            break
        chunks[tag] = header[at + 8 : at + 8 + size]
        at += 8 + size + size % 2
    return chunks


def test_a_wav_header_carries_a_labelled_cue_point_per_chapter_before_the_samples():
    chunks = riff(wav_header(24000, [(0, "Start"), (48000, "Chapter Two")]))
    assert list(chunks) == [b"fmt ", b"cue ", b"LIST", b"data"]
    count, *_ = struct.unpack("<I", chunks[b"cue "][:4])
    offsets = [struct.unpack("<II4sIII", chunks[b"cue "][4 + 24 * i : 28 + 24 * i])[5] for i in range(count)]
    assert offsets == [0, 48000]
    assert chunks[b"LIST"].startswith(b"adtl")
    assert b"Start\0" in chunks[b"LIST"]
    assert b"Chapter Two\0" in chunks[b"LIST"]
    assert opening("wav", 24000, [(0, 1000, "Start"), (2000, 3000, "Chapter Two")]) == wav_header(
        24000, [(0, "Start"), (48000, "Chapter Two")]
    )


def _unsync(b: bytes) -> int:
    return (b[0] << 21) | (b[1] << 14) | (b[2] << 7) | b[3]


def frames(tag: bytes) -> list[tuple[bytes, bytes]]:
    found, at = [], 0
    while at < len(tag):
        frame_id, size = tag[at : at + 4], _unsync(tag[at + 4 : at + 8])
        found.append((frame_id, tag[at + 10 : at + 10 + size]))
        at += 10 + size
    return found


def test_an_mp3_starts_with_an_id3v2_tag_of_chapters_in_order_with_their_times_and_titles():
    tag = opening("mp3", 24000, [(0, 1500, "Prologue"), (1500, 4200, "Глава 1")])
    assert tag[:5] == b"ID3\x04\x00"
    assert _unsync(tag[6:10]) == len(tag) - 10
    (toc_id, toc), *chaps = frames(tag[10:])
    assert toc_id == b"CTOC"
    assert toc == b"toc\0" + bytes((0x03, 2)) + b"ch0\0ch1\0"
    parsed = []
    for frame_id, body in chaps:
        assert frame_id == b"CHAP"
        element, rest = body.split(b"\0", 1)
        start, end, _, _ = struct.unpack(">IIII", rest[:16])
        (sub_id, title), *_ = frames(rest[16:])
        assert sub_id == b"TIT2"
        parsed.append((element, start, end, title[1:].decode()))
    assert parsed == [(b"ch0", 0, 1500, "Prologue"), (b"ch1", 1500, 4200, "Глава 1")]


def test_no_chapters_no_tag_and_raw_pcm_has_no_markers():
    assert id3_chapters([]) == b""
    assert opening("pcm", 24000, [(0, 1000, "One")]) == b""
