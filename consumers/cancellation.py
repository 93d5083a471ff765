"""Cancellation as a worker sees it: a job nobody wants is not synthesized, or stops at a segment boundary.

``JobCancelled`` lands in the job's partition after its ``JobQueued``, so a
worker acting on the job may not have read it yet. It asks the projection
instead: once before it claims a job (with the cache lookup, in the job's one
``Outlook`` read: consumers.ports), and then at segment boundaries, at most
every ``CHECK_EVERY_S`` (a short job is never asked again; a long one learns
within a segment and that interval). With the projection unreadable the job
goes on: wasted work, never a wrong answer (the attempt's events after the
cancellation are fenced).

A job that others wait for is not stopped: when a live job of the same
fingerprint (a duplicate that would coalesce onto this result) still wants
the audio, the attempt renders its remaining segments into the blob store and
the segment cache without recording them, and the duplicate, taken next,
reuses every segment instead of synthesizing it again.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Final, Protocol

from projections.errors import ProjectionUnavailable

CHECK_EVERY_S: Final = 0.5  # a primary-key read; twice a second per busy worker costs nothing


class CancelLookup(Protocol):
    """The projection's view of cancellations; raises :class:`ProjectionUnavailable` when it cannot be read."""

    async def cancelled(self, job_id: uuid.UUID) -> bool: ...

    async def wanted_elsewhere(self, fingerprint: str, job_id: uuid.UUID) -> bool:
        """Whether a live job of ``fingerprint`` other than ``job_id`` waits for the same audio."""
        ...


@dataclass
class CancelWatch:
    """One attempt's view of its job's cancellation."""

    lookup: CancelLookup | None
    job_id: uuid.UUID
    fingerprint: str
    every_s: float = CHECK_EVERY_S
    _checked_at: float = field(default_factory=time.monotonic)

    async def cancelled(self, *, now: bool = False) -> bool:
        """Whether the job was cancelled; asks at most every ``every_s`` unless ``now``."""
        if self.lookup is None:
            return False
        moment = time.monotonic()
        if not now and moment - self._checked_at < self.every_s:
            return False
        self._checked_at = moment
        try:
            return await self.lookup.cancelled(self.job_id)
        except ProjectionUnavailable:
            return False  # cannot tell: going on (the lookup says when PostgreSQL goes and comes back)

    async def wanted_elsewhere(self) -> bool:
        if self.lookup is None:
            return False
        try:
            return await self.lookup.wanted_elsewhere(self.fingerprint, self.job_id)
        except ProjectionUnavailable:
            return False  # stop: a duplicate taken later still reuses the segments rendered so far
