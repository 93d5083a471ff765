"""A job's audio in the format and rate its request asked for, assembled from the segment WAVs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from contracts import TERMINAL_STATES, AudioRef, JobState
from foundation.audio import decode_audio
from foundation.audio_formats import encode
from foundation.blobs import BlobStore
from foundation.stream_encoders import stream_encoder


class Audible(Protocol):
    """A stored segment: its place in the job, where its audio is, and how long it lasts."""

    @property
    def segment_index(self) -> int: ...

    @property
    def audio(self) -> AudioRef: ...

    @property
    def duration_ms(self) -> int: ...


class Progress(Protocol):
    """What a stream reads of its job between its segments: the job's state and why it failed, if it did."""

    @property
    def state(self) -> JobState: ...

    @property
    def error_code(self) -> str | None: ...

    @property
    def error_message(self) -> str | None: ...


async def segment_samples(blobs: BlobStore, segment: Audible) -> tuple[np.ndarray, int]:
    data = await asyncio.to_thread(blobs.get, segment.audio)
    return await asyncio.to_thread(decode_audio, data)


async def render(blobs: BlobStore, segments: Sequence[Audible], fmt: str, rate: int) -> bytes:
    """All ``segments`` joined and encoded as ``fmt`` at ``rate`` (raises BlobNotFound when one is gone)."""
    parts = [await segment_samples(blobs, s) for s in segments]
    if not parts:
        raise ValueError("the job has no audio segments")
    source_rate = parts[0][1]
    samples = np.concatenate([p[0] for p in parts]).astype(np.float32)
    return await asyncio.to_thread(encode, samples, source_rate, fmt, rate)


@dataclass
class StreamEnd:
    """How a stream of segments ended: the job's final state (``timeout`` when it did not end in time)."""

    state: str | None = None
    error: str | None = None
    error_code: str | None = None

    @property
    def completed(self) -> bool:
        return self.state == JobState.COMPLETED.value


ReadSince = Callable[[int], Awaitable[tuple[Progress | None, Sequence[Audible]]]]
"""The job's progress and its segments from the given index on, read together (an unknown job: ``None``)."""


async def segments_as_they_appear(
    read_since: ReadSince,
    changed: Callable[[], Awaitable[None]],
    timeout_s: float,
    end: StreamEnd | None = None,
) -> AsyncIterator[Audible]:
    """Each segment of a job, once and in order, as rows appear; ends when the job ended and every segment
    was given, or after ``timeout_s``. ``end`` learns which it was. Each read asks only for the segments not
    given yet, so a long job costs reads in proportion to its segments, not their square. Between reads it
    awaits ``changed`` (a notification of the job's change, or a poll interval)."""
    end = end if end is not None else StreamEnd()
    sent = 0
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        progress, segments = await read_since(sent)
        given = 0
        for segment in segments:
            if segment.segment_index != sent:
                break  # a gap: the rest comes with a later read
            yield segment
            sent, given = sent + 1, given + 1
        if progress is not None and progress.state in TERMINAL_STATES and given == len(segments):
            end.state, end.error, end.error_code = progress.state.value, progress.error_message, progress.error_code
            return
        await changed()
    end.state, end.error = "timeout", f"the job did not finish within {timeout_s:.0f}s"


async def pcm_stream(blobs: BlobStore, segments: AsyncIterator[Audible], rate: int) -> AsyncIterator[bytes]:
    """Raw 16-bit pcm at ``rate``, one chunk per segment as ``segments`` yields them."""
    async for chunk in audio_stream(blobs, segments, "pcm", rate):
        yield chunk


async def audio_stream(blobs: BlobStore, segments: AsyncIterator[Audible], fmt: str, rate: int) -> AsyncIterator[bytes]:
    """A ``fmt`` stream at ``rate`` of ``segments``, made by one encoder (``foundation.stream_encoders``):
    a piece a segment as ``segments`` yields them (the first with the format's header, if it has one; a
    piece may be empty while the encoder holds a frame's worth), then the encoder's last piece. Joined, the
    pieces are one file as long as the segments (``fmt`` must be streamable)."""
    encoder = await asyncio.to_thread(stream_encoder, fmt, rate)
    async for segment in segments:
        samples, source_rate = await segment_samples(blobs, segment)
        yield await asyncio.to_thread(encoder.write, samples, source_rate)
    if rest := await asyncio.to_thread(encoder.close):
        yield rest
