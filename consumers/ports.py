"""What the worker needs from the outside, as protocols; the composition root hands it the adapters."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeAlias

import numpy as np
import numpy.typing as npt
from aiokafka import ConsumerRecord

from contracts import AudioRef, JobEvent, SynthesisRequest, WordTiming
from contracts.engine_info import EngineInfo
from projections.reads.worker import Outlook, ReusableSegment


@dataclass(frozen=True)
class PlannedSegment:
    """One piece of text the engine accepts in one call; ``handle`` is the engine's own form of it."""

    index: int
    start: int
    end: int
    text: str
    handle: object
    ids: tuple[int, ...] = ()  # its phoneme ids, which key the segment cache (none: never reused)
    rate: float = 1.0  # said at the request's speed times this (an SSML <prosody rate>)


@dataclass(frozen=True)
class Rendering:
    """A segment's audio, and when its words are said in it (``None``: the engine cannot tell)."""

    samples: npt.NDArray[np.float32]
    words: tuple[WordTiming, ...] | None = None


class SegmentReuse(Protocol):
    """The segment cache: ``find`` raises nothing (a segment not found is synthesized)."""

    async def find(self, key: str, *, ask_projection: bool = True) -> ReusableSegment | None: ...

    def remember(self, key: str, segment: ReusableSegment) -> None: ...


class SpeechEngine(Protocol):
    """Blocking calls: the worker runs them on its synthesis thread, never on the event loop.

    ``plan`` raises :class:`InputRejected` for text it cannot speak (``input_format="ssml"``: the text is
    the canonical SSML of :mod:`contracts.ssml`, whose pauses are segments of silence; ``pronunciations``: the
    words said as given phonemes, :mod:`contracts.pronunciations`); ``render``
    raises :class:`InputRejected` or :class:`TransientEngineError`.
    """

    @property
    def description(self) -> EngineInfo: ...

    def plan(
        self,
        text: str,
        lang: str,
        normalize: bool = True,
        input_format: str = "text",
        pronunciations: Mapping[str, str] | None = None,
    ) -> Sequence[PlannedSegment]: ...

    def render(self, segment: PlannedSegment, voice: str, speed: float) -> Rendering: ...

    def render_batch(self, items: Sequence[tuple[PlannedSegment, str, float]]) -> Sequence[Rendering]:
        """Several segments in one model call, each as ``render`` would make it alone; raises as ``render`` does
        for the whole batch (the caller then tells the items apart one by one)."""
        ...


class ResultLookup(Protocol):
    """The projections, read-only: results and requests other workers produced.

    Each raises :class:`projections.errors.ProjectionUnavailable` when the projection cannot be read.
    """

    async def outlook(self, job_id: uuid.UUID, fingerprint: str, now: datetime) -> Outlook:
        """Whether the job was cancelled, and a live result of its fingerprint: one round trip, asked
        before every claim."""
        ...

    async def request_of(self, job_id: uuid.UUID) -> SynthesisRequest | None: ...

    async def result_blobs(self, job_id: uuid.UUID) -> list[AudioRef]:
        """The blobs of a completed job's segments (empty while the projection does not show them)."""
        ...


class AudioSink(Protocol):
    def put(self, data: bytes, suffix: str) -> AudioRef: ...

    def touch(self, refs: Iterable[AudioRef]) -> bool:
        """Mark blobs used now; ``False`` when one is gone (see ``foundation.blobs``)."""
        ...


class Appended(Protocol):
    """Where an acknowledged event landed in its partition."""

    @property
    def offset(self) -> int: ...


class EventLog(Protocol):
    """The jobs topic, as the worker writes it: ``publish`` returns once the event is acknowledged
    (acks=all) and raises ``foundation.errors.BrokerUnavailable`` when it cannot be. ``send`` hands the
    event over and returns at once with a future of its acknowledgement (which fails with
    ``BrokerUnavailable``); events sent one after another keep their order. A job's events go to
    ``partition``, the one its ``JobQueued`` is in (``None``: the fingerprint's, the default partitioner's)."""

    async def publish(self, event: JobEvent, *, partition: int | None = None) -> Appended: ...

    async def send(self, event: JobEvent, partition: int | None = None) -> Acknowledgement: ...


class Acknowledgement(Protocol):
    """An event handed to the log: awaited, where it landed (an ``asyncio.Future`` is one)."""

    def done(self) -> bool: ...

    def exception(self) -> BaseException | None: ...

    def __await__(self) -> Generator[Any, None, Appended]: ...


DeadLetter: TypeAlias = Callable[[ConsumerRecord, str], Awaitable[object]]
"""Keeps a record the worker cannot decode, with the reason, and goes on."""
