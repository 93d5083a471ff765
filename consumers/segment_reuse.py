"""The segment cache: identical sentences of different requests are synthesized once.

A segment's key (:func:`contracts.fingerprint.segment_key`) names everything
its audio depends on: engine, model version, voice, speed and phoneme ids, and
the request's cache scope when it has one (``VOXLOG_CACHE_SCOPE=tenant``: a
tenant's sentences are reused by its own jobs only, never another tenant's).
Before synthesizing a segment the worker looks its key up, first among the
segments it produced itself lately (the projection lags), then in the
projection (``segments.segment_key``, every worker's segments). The claims
in a forward ask for their next segments at about the same time: one query
to the projection is in flight at a time, and the keys asked while it runs
go together in the next one (:mod:`consumers.grouped_reads`), not one query
per segment. A hit is
reused only once its blob is marked used (touched), exactly as a whole
result is: a blob the sweeper deleted meanwhile means a new synthesis. The
projection is not asked for a segment the engine would render faster than
the query takes (``LOOKUP_WORTH_S`` at the node's measured speed).
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Final, Protocol

from consumers.grouped_reads import GroupedReads
from projections.errors import ProjectionUnavailable
from projections.reads.worker import ReusableSegment

REMEMBERED: Final = 20_000  # recent segments of this worker, about 2 MB of keys and references
LOOKUP_WORTH_S: Final = 0.02  # a projection query and a blob touch cost about a millisecond or two


class SegmentLookup(Protocol):
    async def segments(self, keys: Collection[str]) -> dict[str, ReusableSegment]:
        """A segment of each of ``keys`` some job produced (those found), in one query."""
        ...


class SegmentCache:
    def __init__(self, lookup: SegmentLookup | None, remembered: int = REMEMBERED) -> None:
        self._reads = None if lookup is None else GroupedReads(_in_key_order(lookup))
        self._recent: OrderedDict[str, ReusableSegment] = OrderedDict()
        self._remembered = remembered

    async def find(self, key: str, *, ask_projection: bool = True) -> ReusableSegment | None:
        """The segment of ``key`` this worker produced lately, else (``ask_projection``) any worker's."""
        found = self._recent.get(key)
        if found is not None:
            self._recent.move_to_end(key)
            return found
        if self._reads is None or not ask_projection:
            return None
        # Unreadable: this worker's own segments only (the lookup says when PostgreSQL goes and comes back).
        with contextlib.suppress(ProjectionUnavailable):
            answer = await self._reads.ask(key)
            return None if answer is None else answer.get(key)  # unanswered (its leader cancelled): synthesized
        return None

    def remember(self, key: str, segment: ReusableSegment) -> None:
        self._recent[key] = segment
        self._recent.move_to_end(key)
        while len(self._recent) > self._remembered:
            self._recent.popitem(last=False)


def _in_key_order(lookup: SegmentLookup) -> Callable[[Sequence[str]], Awaitable[Mapping[str, ReusableSegment]]]:
    """``lookup``'s read of a group's keys, sorted: a query's keys in the same order whoever asked first."""

    async def read(keys: Sequence[str]) -> Mapping[str, ReusableSegment]:
        return await lookup.segments(sorted(keys))

    return read
