"""The segment cache: identical sentences of different requests are synthesized once.

A segment's key (:func:`contracts.fingerprint.segment_key`) names everything
its audio depends on: engine, model version, voice, speed and phoneme ids, and
the request's cache scope when it has one (``VOXLOG_CACHE_SCOPE=tenant``: a
tenant's sentences are reused by its own jobs only, never another tenant's).
Before synthesizing a segment the worker looks its key up, first among the
segments it produced itself lately (the projection lags), then in the
projection (``segments.segment_key``, every worker's segments). A hit is
reused only once its blob is marked used (touched), exactly as a whole
result is: a blob the sweeper deleted meanwhile means a new synthesis. The
projection is not asked for a segment the engine would render faster than
the query takes (``LOOKUP_WORTH_S`` at the node's measured speed).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final, Protocol

from projections.errors import ProjectionUnavailable
from projections.reads.worker import ReusableSegment

REMEMBERED: Final = 20_000  # recent segments of this worker, about 2 MB of keys and references
LOOKUP_WORTH_S: Final = 0.02  # a projection query and a blob touch cost about a millisecond or two


class SegmentLookup(Protocol):
    async def segment(self, key: str) -> ReusableSegment | None: ...


class SegmentCache:
    def __init__(self, lookup: SegmentLookup | None, remembered: int = REMEMBERED) -> None:
        self._lookup = lookup
        self._recent: OrderedDict[str, ReusableSegment] = OrderedDict()
        self._remembered = remembered

    async def find(self, key: str, *, ask_projection: bool = True) -> ReusableSegment | None:
        """The segment of ``key`` this worker produced lately, else (``ask_projection``) any worker's."""
        found = self._recent.get(key)
        if found is not None:
            self._recent.move_to_end(key)
            return found
        if self._lookup is None or not ask_projection:
            return None
        try:
            return await self._lookup.segment(key)
        except ProjectionUnavailable:
            return None  # this worker's own segments only (the lookup says when PostgreSQL goes and comes back)

    def remember(self, key: str, segment: ReusableSegment) -> None:
        self._recent[key] = segment
        self._recent.move_to_end(key)
        while len(self._recent) > self._remembered:
            self._recent.popitem(last=False)
