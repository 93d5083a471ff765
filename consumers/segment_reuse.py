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
go together in the next one (``segment_key = ANY``), not one query per
segment. A hit is
reused only once its blob is marked used (touched), exactly as a whole
result is: a blob the sweeper deleted meanwhile means a new synthesis. The
projection is not asked for a segment the engine would render faster than
the query takes (``LOOKUP_WORTH_S`` at the node's measured speed).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Final, Protocol

from projections.errors import ProjectionUnavailable
from projections.reads.worker import ReusableSegment

REMEMBERED: Final = 20_000  # recent segments of this worker, about 2 MB of keys and references
LOOKUP_WORTH_S: Final = 0.02  # a projection query and a blob touch cost about a millisecond or two


class SegmentLookup(Protocol):
    async def segments(self, keys: Collection[str]) -> dict[str, ReusableSegment]:
        """A segment of each of ``keys`` some job produced (those found), in one query."""
        ...


@dataclass
class _Asked:
    """Keys asked of the projection together, in the query after the one in flight."""

    keys: set[str] = field(default_factory=set)
    found: asyncio.Future[dict[str, ReusableSegment]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class SegmentCache:
    def __init__(self, lookup: SegmentLookup | None, remembered: int = REMEMBERED) -> None:
        self._lookup = lookup
        self._recent: OrderedDict[str, ReusableSegment] = OrderedDict()
        self._remembered = remembered
        self._next: _Asked | None = None  # keys waiting for the query in flight to end
        self._one_query = asyncio.Lock()

    async def find(self, key: str, *, ask_projection: bool = True) -> ReusableSegment | None:
        """The segment of ``key`` this worker produced lately, else (``ask_projection``) any worker's."""
        found = self._recent.get(key)
        if found is not None:
            self._recent.move_to_end(key)
            return found
        if self._lookup is None or not ask_projection:
            return None
        if self._next is not None:  # a query is in flight: asked in the next, with the keys asked meanwhile
            self._next.keys.add(key)
            return (await asyncio.shield(self._next.found)).get(key)
        asked = self._next = _Asked({key})
        return (await self._ask(self._lookup, asked)).get(key)

    async def _ask(self, lookup: SegmentLookup, asked: _Asked) -> dict[str, ReusableSegment]:
        """The query for ``asked``'s keys, once the one in flight is over (its other askers get its answer)."""
        found: dict[str, ReusableSegment] = {}
        try:
            async with self._one_query:
                if self._next is asked:
                    self._next = None  # keys asked from now on wait for the next query
                # Unreadable: this worker's own segments only (the lookup says when PostgreSQL goes and comes back).
                with contextlib.suppress(ProjectionUnavailable):
                    found = await lookup.segments(sorted(asked.keys))
        finally:  # cancelled too (its attempt ended): the others' segments are synthesized, never left waiting
            if self._next is asked:
                self._next = None
            if not asked.found.done():
                asked.found.set_result(found)
        return found

    def remember(self, key: str, segment: ReusableSegment) -> None:
        self._recent[key] = segment
        self._recent.move_to_end(key)
        while len(self._recent) > self._remembered:
            self._recent.popitem(last=False)
