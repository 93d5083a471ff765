"""A job's audio in the format and rate its request asked for, assembled from the segment WAVs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from contracts import AudioRef
from foundation.audio import decode_audio
from foundation.audio_formats import encode, encode_chunk
from foundation.blobs import BlobStore


async def segment_samples(blobs: BlobStore, segment: dict[str, Any]) -> tuple[np.ndarray, int]:
    ref = AudioRef(sha256=segment["audio_sha256"], uri=segment["audio_uri"])
    data = await asyncio.to_thread(blobs.get, ref)
    return await asyncio.to_thread(decode_audio, data)


async def render(blobs: BlobStore, segments: Sequence[dict[str, Any]], fmt: str, rate: int) -> bytes:
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
        return self.state == "completed"


async def segments_as_they_appear(
    read_job: Callable[[], Awaitable[dict[str, Any] | None]],
    changed: Callable[[], Awaitable[None]],
    timeout_s: float,
    end: StreamEnd | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """Each segment of the job ``read_job`` returns, once and in order, as rows appear; ends when
    the job is completed or failed and every segment was given, or after ``timeout_s``. ``end``
    learns which it was. Between reads it awaits ``changed`` (a notification of the job's change,
    or a poll interval)."""
    end = end if end is not None else StreamEnd()
    sent = 0
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = await read_job()
        segments = job["segments"] if job is not None else []
        while sent < len(segments) and segments[sent]["segment_index"] == sent:
            yield segments[sent]
            sent += 1
        if job is not None and job["state"] in {"completed", "failed", "cancelled"} and sent >= len(segments):
            end.state, end.error, end.error_code = job["state"], job.get("error_message"), job.get("error_code")
            return
        await changed()
    end.state, end.error = "timeout", f"the job did not finish within {timeout_s:.0f}s"


async def pcm_stream(blobs: BlobStore, segments: AsyncIterator[dict[str, Any]], rate: int) -> AsyncIterator[bytes]:
    """Raw 16-bit pcm at ``rate``, one chunk per segment as ``segments`` yields them."""
    async for chunk in audio_stream(blobs, segments, "pcm", rate):
        yield chunk


async def audio_stream(
    blobs: BlobStore, segments: AsyncIterator[dict[str, Any]], fmt: str, rate: int
) -> AsyncIterator[bytes]:
    """One piece of a ``fmt`` stream at ``rate`` per segment, as ``segments`` yields them; after
    ``stream_header(fmt, rate)`` they play as one file (``fmt`` must be streamable, see
    foundation.audio_formats)."""
    async for segment in segments:
        samples, source_rate = await segment_samples(blobs, segment)
        yield await asyncio.to_thread(encode_chunk, samples, source_rate, fmt, rate)
