"""The segment cache's reads of the projection (consumers.segment_reuse.SegmentCache): one query in flight at a time,
and the keys asked while it runs (the other claims of a forward) go together in the next, not one query each."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from consumers.segment_reuse import SegmentCache
from contracts import AudioRef
from projections.errors import ProjectionUnavailable
from projections.reads.worker import ReusableSegment

pytestmark = pytest.mark.unit


def stored(key: str) -> ReusableSegment:
    return ReusableSegment(
        AudioRef(sha256=hashlib.sha256(key.encode()).hexdigest(), uri=f"file:///blobs/{key}.wav"), 100, 4844, 24000, key
    )


class CountingSegments:
    """The projection's segments, counting queries; each query waits for its own gate to be opened."""

    def __init__(self, known: set[str]) -> None:
        self.known = known
        self.queries: list[list[str]] = []
        self.gates: list[asyncio.Event] = []
        self.asked = asyncio.Condition()
        self.down = False

    async def segments(self, keys) -> dict[str, ReusableSegment]:
        gate = asyncio.Event()
        async with self.asked:
            self.queries.append(list(keys))
            self.gates.append(gate)
            self.asked.notify_all()
        await gate.wait()
        if self.down:
            raise ProjectionUnavailable("PostgreSQL is unreachable")
        return {key: stored(key) for key in keys if key in self.known}

    async def until_asked(self, count: int) -> None:
        async with self.asked:
            await self.asked.wait_for(lambda: len(self.queries) >= count)


async def settle() -> None:
    """Let every task started so far run up to its next real wait."""
    for _ in range(5):
        await asyncio.sleep(0)


async def test_keys_asked_while_a_query_is_in_flight_go_together_in_the_next_one():
    lookup = CountingSegments({"a", "c", "e"})
    cache = SegmentCache(lookup)
    first = asyncio.ensure_future(cache.find("a"))
    await lookup.until_asked(1)
    forward = [asyncio.ensure_future(cache.find(key)) for key in ("b", "c", "d", "e")]
    await settle()
    assert lookup.queries == [["a"]], "the others wait for the query in flight"
    lookup.gates[0].set()
    await lookup.until_asked(2)
    lookup.gates[1].set()
    assert await first == stored("a")
    assert await asyncio.gather(*forward) == [None, stored("c"), None, stored("e")]
    assert lookup.queries == [["a"], ["b", "c", "d", "e"]], "two queries for five segments"


async def test_a_segment_of_its_own_is_not_asked_for():
    lookup = CountingSegments(set())
    cache = SegmentCache(lookup)
    cache.remember("mine", stored("mine"))
    assert await cache.find("mine") == stored("mine")
    assert await cache.find("other", ask_projection=False) is None
    assert lookup.queries == []


async def test_with_the_projection_unreadable_every_asker_synthesizes():
    lookup = CountingSegments({"a", "b"})
    lookup.down = True
    cache = SegmentCache(lookup)
    first = asyncio.ensure_future(cache.find("a"))
    await lookup.until_asked(1)
    second = asyncio.ensure_future(cache.find("b"))
    lookup.gates[0].set()
    await lookup.until_asked(2)
    lookup.gates[1].set()
    assert (await first, await second) == (None, None)


async def test_an_asker_cancelled_while_it_waits_leaves_no_one_waiting():
    lookup = CountingSegments({"b", "c"})
    cache = SegmentCache(lookup)
    first = asyncio.ensure_future(cache.find("a"))
    await lookup.until_asked(1)
    leader = asyncio.ensure_future(cache.find("b"))  # waits to run the next query
    await settle()
    follower = asyncio.ensure_future(cache.find("c"))  # joins it
    await settle()
    leader.cancel()  # its attempt ended (a hung engine's watchdog) before the next query began
    await settle()
    assert await follower is None, "not found, so synthesized: never left waiting"
    lookup.gates[0].set()
    assert await first is None
    later = asyncio.ensure_future(cache.find("c"))
    await lookup.until_asked(2)
    lookup.gates[1].set()
    assert await later == stored("c")
    assert lookup.queries == [["a"], ["c"]]
