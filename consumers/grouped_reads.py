"""Reads of the projection grouped: one in flight at a time, the keys asked while it runs go together in the next.

The claims of a forward (or a backlog's claims, taken together) ask the
projection about their jobs or segments at about the same time: one query per
asker would queue them on the pool, one query per group answers them all.
Whoever asks while no group waits leads the next group: it waits for the query
in flight to end, then reads every key asked meanwhile in one query; the
others share its answer.

What each asker gets is the answer of the query its key went into:
``ProjectionUnavailable`` reaches every asker of that query (the projection is
unreadable for all of them, and each does without it as it would alone). A
leader cancelled (its attempt ended) or failing otherwise leaves its group
unanswered (``None``), never waiting: each asker then does without, or asks
again in a later group.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from projections.errors import ProjectionUnavailable

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass
class _Group(Generic[K, V]):
    """Keys asked together, in the query after the one in flight (a dict: asked once each, in order)."""

    keys: dict[K, None]
    answer: asyncio.Future[Mapping[K, V] | ProjectionUnavailable | None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class GroupedReads(Generic[K, V]):
    def __init__(self, read: Callable[[Sequence[K]], Awaitable[Mapping[K, V]]]) -> None:
        """``read``: the keys found among those given, in one query (raises ``ProjectionUnavailable``)."""
        self._read = read
        self._next: _Group[K, V] | None = None  # keys waiting for the query in flight to end
        self._one_query = asyncio.Lock()

    async def ask(self, key: K) -> Mapping[K, V] | None:
        """The answer of the query ``key`` went into (``key`` absent: not found); ``None``: that query's leader
        was cancelled or failed before it answered. Raises ``ProjectionUnavailable`` as that query did."""
        if self._next is not None:  # a query is in flight: asked in the next, with the keys asked meanwhile
            self._next.keys[key] = None
            # Shielded: a follower cancelled must not cancel the answer its group's other askers wait for.
            answer = await asyncio.shield(self._next.answer)
            if isinstance(answer, ProjectionUnavailable):
                raise ProjectionUnavailable(str(answer)) from answer  # each asker its own, as if it had read
            return answer
        group: _Group[K, V] = _Group({key: None})
        self._next = group
        return await self._lead(group)

    async def _lead(self, group: _Group[K, V]) -> Mapping[K, V]:
        """The query for ``group``'s keys, once the one in flight is over (the group's other askers get its answer)."""
        answer: Mapping[K, V] | ProjectionUnavailable | None = None
        try:
            async with self._one_query:
                if self._next is group:
                    self._next = None  # keys asked from now on wait for the next query
                try:
                    found = answer = await self._read(list(group.keys))
                except ProjectionUnavailable as exc:
                    answer = exc
                    raise
        finally:  # cancelled too (its attempt ended): the others are answered, never left waiting
            if self._next is group:
                self._next = None
            if not group.answer.done():
                group.answer.set_result(answer)
        return found
