"""Captions built off the event loop, and kept.

Building the captions of a document of two million characters (every word's time, the cues, the SRT) took
about 2 s of CPU; on the event loop every other request waited for it, and every request for the same
captions paid it again. The build runs in a thread here: it is pure Python, so the loop gets the GIL back
every switch interval (a process, :mod:`foundation.offload`, would pickle every segment there and back for
no gain). What it made is kept, least recently used first out, within a bound in bytes: the captions of a
completed job or document never change (its audio is fixed), so they are never stale. The caller checks
that the job or document is the caller's and completed before it asks. Requests that want the same captions
while they are being built wait for that one build.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Hashable


class CaptionCache:
    """Rendered captions by key (what, which, format), at most ``max_bytes`` of them (0: none kept)."""

    def __init__(self, max_bytes: int = 64 * 2**20) -> None:
        self.max_bytes = max_bytes
        self.builds = 0
        """How many builds were started (a hit starts none)."""
        self._entries: OrderedDict[Hashable, bytes] = OrderedDict()
        self._bytes = 0
        self._building: dict[Hashable, asyncio.Future[bytes]] = {}

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def cached(self, key: Hashable) -> bytes | None:
        """The captions kept under ``key``, if they are."""
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    async def get(self, key: Hashable, build: Callable[[], bytes]) -> bytes:
        """The captions kept under ``key``, else ``build()``'s, run in a thread and kept."""
        found = self.cached(key)
        if found is not None:
            return found
        running = self._building.get(key)
        if running is None:
            self.builds += 1
            running = asyncio.ensure_future(asyncio.to_thread(build))
            self._building[key] = running
            running.add_done_callback(lambda done: self._built(key, done))
        # A waiter that leaves (its client went) leaves the build to the others, and to the cache.
        return await asyncio.shield(running)

    def _built(self, key: Hashable, done: asyncio.Future[bytes]) -> None:
        self._building.pop(key, None)
        if done.cancelled() or done.exception() is not None:  # retrieved: no "never retrieved" warning
            return
        self._keep(key, done.result())

    def _keep(self, key: Hashable, value: bytes) -> None:
        if len(value) > self.max_bytes:
            return  # larger than the whole cache: kept, it would only push everything else out
        self._entries[key] = value
        self._bytes += len(value)
        while self._bytes > self.max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= len(evicted)
