"""A job's audio in the format and rate its request asked for, assembled from the segment WAVs."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np

from contracts import AudioRef
from voxlog.audio import decode_audio
from voxlog.audio_formats import encode
from voxlog.blobs import BlobStore


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
