"""One segment's audio, in the blob store before its event is: reused when the same segment was said before,
else rendered and stored.

The engine renders on the node's FIFO (``call``), off the event loop; the
encoded audio is written off the loop too. The segment cache
(:mod:`consumers.segment_reuse`) is asked first, by the segment's key; a hit
counts only once its blob is marked used (a blob the sweeper deleted
meanwhile means a new rendering), and only at the engine's own sample rate.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from consumers.errors import BlobWriteFailed
from consumers.ports import AudioSink, PlannedSegment, SegmentReuse, SpeechEngine
from consumers.segment_reuse import LOOKUP_WORTH_S
from consumers.segment_stores import SegmentStores
from consumers.worker_activity import Activity
from contracts import AudioRef, SynthesisRequest, WordTiming
from contracts.fingerprint import segment_key
from contracts.word_timings import shifted
from foundation.metrics import SEGMENTS_REUSED
from projections.reads.worker import ReusableSegment

if TYPE_CHECKING:
    from consumers.engine_turns import HeldTurns


@dataclass(frozen=True)
class SegmentAudio:
    """A segment's stored audio, and whether it was reused rather than rendered."""

    ref: AudioRef
    byte_length: int
    duration_ms: int
    key: str | None  # the segment's key in the segment cache (None: never reused)
    reused: bool
    words: tuple[WordTiming, ...] | None = None  # their characters in the request text


class SegmentMaker:
    def __init__(
        self,
        engine: SpeechEngine,
        blobs: AudioSink,
        call: Callable[..., Awaitable[Any]],
        activity: Activity,
        segments: SegmentReuse | None,
    ) -> None:
        self._engine = engine
        self._blobs = blobs
        self._stores = SegmentStores(blobs)
        self._call = call
        self._activity = activity
        self._segments = segments

    async def make(
        self, segment: PlannedSegment, request: SynthesisRequest, job_id: uuid.UUID, turns: HeldTurns | None = None
    ) -> SegmentAudio:
        """``segment``'s audio in the blob store, made when the engine's turn comes to ``turns``' claim (at once
        without one). Raises what the engine raises, :class:`BlobWriteFailed`, and :class:`TurnWithdrawn`."""
        key = self._key(segment, request)
        found = await self._reusable(segment, key)
        if found is None:
            return await self._render(segment, request, key, job_id, turns)
        self._activity.reused(job_id, len(segment.text))
        SEGMENTS_REUSED.labels(self._engine.description.name).inc()
        words = shifted(found.words, segment.start) if found.text == segment.text else None
        return SegmentAudio(found.audio, found.byte_length, found.duration_ms, key, reused=True, words=words)

    async def _reusable(self, segment: PlannedSegment, key: str | None) -> ReusableSegment | None:
        if not key or self._segments is None:
            return None
        speed = self._activity.chars_per_s  # unknown yet: assume the engine is slow enough to ask
        worth = speed is None or len(segment.text) / speed > LOOKUP_WORTH_S
        found = await self._segments.find(key, ask_projection=worth)
        if found is None or found.sample_rate != self._engine.description.sample_rate:
            return None
        return found if await asyncio.to_thread(self._blobs.touch, [found.audio]) else None

    async def _render(
        self,
        segment: PlannedSegment,
        request: SynthesisRequest,
        key: str | None,
        job_id: uuid.UUID,
        turns: HeldTurns | None,
    ) -> SegmentAudio:
        sample_rate = self._engine.description.sample_rate
        if turns is not None:
            turns.asking(len(segment.ids) or len(segment.text))  # its length bucket in a batch
        async with turns.engine() if turns is not None else contextlib.nullcontext():
            self._activity.running = job_id
            rendering = time.perf_counter()
            try:
                speed = request.speed * segment.rate
                if turns is not None:  # in its forward: batched with the other claims' segments in it
                    rendered = await turns.render(self._call, self._engine, segment, request.voice, speed)
                else:
                    rendered = await self._call(self._engine.render, segment, request.voice, speed)
            finally:
                self._activity.running = None
            engine_s = time.perf_counter() - rendering
            if turns is not None and turns.engine_share_s is not None:
                # Batched: its share of the forward, not the whole forward it waited for. The node's measured
                # speed (and so the backlog the API admits by) counted each of a forward's segments as taking
                # all of it: a GPU worker looked as many times slower as its batches were large.
                engine_s = turns.engine_share_s
            self._activity.rendered(job_id, engine_s)
        samples = rendered.samples
        try:  # encoded and written off the loop, in one hop with the forward's other segments
            ref, byte_length = await self._stores.store(samples, sample_rate)
        except OSError as exc:
            raise BlobWriteFailed(f"cannot store segment {segment.index}'s audio: {exc}") from exc
        duration_ms = round(1000 * len(samples) / sample_rate)
        if key and self._segments is not None:
            words = shifted(rendered.words, -segment.start)
            self._segments.remember(
                key, ReusableSegment(ref, duration_ms, byte_length, sample_rate, segment.text, words)
            )
        return SegmentAudio(ref, byte_length, duration_ms, key, reused=False, words=rendered.words)

    def _key(self, segment: PlannedSegment, request: SynthesisRequest) -> str | None:
        if not segment.ids:
            return None
        description = self._engine.description
        return segment_key(
            engine=description.name,
            model_version=description.model_version,
            voice=request.voice,
            speed=request.speed * segment.rate,
            ids=segment.ids,
            cache_scope=request.cache_scope,  # a tenant's own under VOXLOG_CACHE_SCOPE=tenant
        )
