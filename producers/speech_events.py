"""``stream_format: "sse"``: a job's audio as OpenAI's server-sent events, and its usage.

Events, as OpenAI's published document has them (``CreateSpeechResponseStreamEvent``):

* ``{"type": "speech.audio.delta", "audio": <base64>}``: a piece of one file of the asked format. For the
  formats that stream (``pcm``, ``wav``, ``mp3``, ``aac``) one encoder makes the whole answer
  (``foundation.stream_encoders``), a delta a segment as the projection shows them: the deltas' audio
  joined is one file, as long as the job. ``flac``, ``opus`` and ``ogg`` are not cut that way and come as one
  delta, the whole file, once the job completed.
* ``{"type": "speech.audio.done", "usage": {"input_tokens", "output_tokens", "total_tokens"}}``, only when
  the job completed. Kokoro counts no tokens of OpenAI's kind; voxlog's (:func:`usage`): an input token is a
  character of the input as sent, an output token 25 ms of audio (one of Kokoro's duration frames, 600
  samples at 24 kHz), rounded up.
* ``{"type": "error", "error": {"message", "type", "code"}}`` instead of ``done`` when the job failed or
  did not finish in time, after whatever audio came (OpenAI's streams end with such an event too).
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import uuid
from collections.abc import AsyncIterator
from typing import Final

import numpy as np

from foundation.audio_formats import encode, streamable
from foundation.blobs import BlobStore
from foundation.stream_encoders import stream_encoder
from producers.audio_out import Audible, StreamEnd, segment_samples

OUTPUT_TOKEN_S: Final = 0.025


def usage(text: str, audio_s: float) -> dict[str, int]:
    """OpenAI's usage of a speech request, as voxlog counts it (see the module docstring)."""
    output = math.ceil(round(audio_s / OUTPUT_TOKEN_S, 6))
    return {"input_tokens": len(text), "output_tokens": output, "total_tokens": len(text) + output}


def _delta(audio: bytes) -> str:
    return json.dumps({"type": "speech.audio.delta", "audio": base64.b64encode(audio).decode()})


async def speech_events(
    blobs: BlobStore,
    segments: AsyncIterator[Audible],
    end: StreamEnd,
    job_id: uuid.UUID,
    fmt: str,
    rate: int,
    text: str,
) -> AsyncIterator[str]:
    """The events of job ``job_id``'s ``segments`` (until ``end`` says how they ended) as ``fmt`` at ``rate``."""
    encoder = await asyncio.to_thread(stream_encoder, fmt, rate) if streamable(fmt) else None
    held: list[np.ndarray] = []  # the whole file's samples, for a format that cannot stream
    held_rate, audio_s = rate, 0.0
    async for segment in segments:
        samples, held_rate = await segment_samples(blobs, segment)
        audio_s += len(samples) / held_rate
        if encoder is None:
            held.append(samples)
        elif piece := await asyncio.to_thread(encoder.write, samples, held_rate):
            yield _delta(piece)
    if not end.completed:
        code = "timeout" if end.state == "timeout" else "job_failed"
        error = {"message": f"job {job_id}: {end.error or end.state}", "type": "server_error", "code": code}
        yield json.dumps({"type": "error", "error": error})
        return
    if encoder is not None:
        rest = await asyncio.to_thread(encoder.close)
    else:
        joined = np.concatenate(held).astype(np.float32) if held else np.zeros(0, np.float32)
        rest = await asyncio.to_thread(encode, joined, held_rate, fmt, rate)
    if rest:
        yield _delta(rest)
    yield json.dumps({"type": "speech.audio.done", "usage": usage(text, audio_s)})
