"""Cancellation as a worker sees it: a job nobody wants is not synthesized, or stops at a segment boundary.

``JobCancelled`` lands in the job's partition after its ``JobQueued``, so a
worker acting on the job may not have read it yet. It asks the projection
instead: once before it claims a job (with the cache lookup, in the job's one
``Outlook`` read: consumers.ports), and then at segment boundaries, once the
claim is ``CHECK_EVERY_S`` old (a short job is never asked again; a long one
learns within a segment and that interval). The worker asks for all the jobs
it holds together (:class:`CancelWatches`): one statement at most every
``CHECK_EVERY_S``, run by whichever attempt asks first once the last answer is
that old (attempts asking meanwhile wait for that one answer, none starts a
query of its own), not one per held job. With the projection unreadable the
jobs go on: wasted work, never a wrong answer (the attempt's events after the
cancellation are fenced).

A job that others wait for is not stopped: when a live job of the same
fingerprint (a duplicate that would coalesce onto this result) still wants
the audio, the attempt renders its remaining segments into the blob store and
the segment cache without recording them, and the duplicate, taken next,
reuses every segment instead of synthesizing it again.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Final, Protocol

from projections.errors import ProjectionUnavailable

CHECK_EVERY_S: Final = 0.5  # one statement for every job the worker holds: twice a second costs nothing


class CancelLookup(Protocol):
    """The projection's view of cancellations; raises :class:`ProjectionUnavailable` when it cannot be read."""

    async def cancelled_among(self, job_ids: Collection[uuid.UUID]) -> set[uuid.UUID]:
        """Those of ``job_ids`` that are cancelled, in one statement."""
        ...

    async def wanted_elsewhere(self, fingerprint: str, job_id: uuid.UUID) -> bool:
        """Whether a live job of ``fingerprint`` other than ``job_id`` waits for the same audio."""
        ...


class CancelWatches:
    """The worker's one watch over the jobs it holds: which of them are cancelled, asked of the projection in
    one statement at most every ``every_s`` (refreshed by the first attempt to ask after that; attempts asking
    while it runs share its answer)."""

    def __init__(
        self,
        lookup: CancelLookup | None,
        every_s: float = CHECK_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lookup = lookup
        self.every_s = every_s
        self.clock = clock
        self._watched: set[uuid.UUID] = set()
        self._cancelled: set[uuid.UUID] = set()
        self._covered: frozenset[uuid.UUID] = frozenset()  # the jobs the last answer was about
        self._asked_at = -math.inf
        self._asking = asyncio.Lock()

    @contextmanager
    def watch(self, job_id: uuid.UUID, fingerprint: str) -> Iterator[CancelWatch]:
        """``job_id`` watched while the block runs (its attempt): the watch its attempt asks."""
        self._watched.add(job_id)
        try:
            yield CancelWatch(self, job_id, fingerprint, self.clock())
        finally:
            self._watched.discard(job_id)
            self._cancelled.discard(job_id)

    async def cancelled(self, job_id: uuid.UUID) -> bool:
        """Whether ``job_id`` (watched) was cancelled, by an answer at most ``every_s`` old."""
        if self.lookup is None:
            return False
        if self._stale(job_id):
            async with self._asking:
                if self._stale(job_id):  # else another attempt's query answered it while this one waited
                    await self._ask(self.lookup)
        return job_id in self._cancelled

    def _stale(self, job_id: uuid.UUID) -> bool:
        return job_id not in self._covered or self.clock() - self._asked_at >= self.every_s

    async def _ask(self, lookup: CancelLookup) -> None:
        jobs = frozenset(self._watched)
        self._asked_at = self.clock()
        try:
            found = await lookup.cancelled_among(jobs)
        except ProjectionUnavailable:
            found = set()  # cannot tell: going on (the lookup says when PostgreSQL goes and comes back)
        self._cancelled = set(found) & self._watched  # an attempt that ended meanwhile is no longer asked about
        self._covered = jobs


@dataclass
class CancelWatch:
    """One attempt's view of its job's cancellation (from :meth:`CancelWatches.watch`)."""

    watches: CancelWatches
    job_id: uuid.UUID
    fingerprint: str
    since: float = field(default_factory=time.monotonic)  # its claim, checked before (the Outlook)

    async def cancelled(self) -> bool:
        """Whether the job was cancelled; not asked before the claim is ``every_s`` old."""
        if self.watches.clock() - self.since < self.watches.every_s:
            return False
        return await self.watches.cancelled(self.job_id)

    async def wanted_elsewhere(self) -> bool:
        lookup = self.watches.lookup
        if lookup is None:
            return False
        try:
            return await lookup.wanted_elsewhere(self.fingerprint, self.job_id)
        except ProjectionUnavailable:
            return False  # stop: a duplicate taken later still reuses the segments rendered so far
