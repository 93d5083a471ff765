"""The API's reads of the log (GET /v1/jobs/{id}/events and ?as_of=), shared between tenants, with a bounded wait.

Each read is a Kafka consumer and a scan of a partition, so only
four of them run at once (``voxlog.composition.api.AUDIT_SLOTS``). A request waits for a slot at most
five seconds (``AUDIT_SLOT_WAIT_S``), then is answered 503 with Retry-After. The slots are
shared between tenants (:class:`FairSlots`): a slot that comes free goes to the
waiting tenant that holds the fewest, so a tenant that sends many reads at once
holds every slot only while no other tenant waits, and another tenant's read
waits for one read to end, not for the first tenant's queue.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from producers.errors import Rejected


@dataclass(eq=False)
class _Waiter:
    tenant: str
    turn: int  # the order of arrival, among every tenant's waiters
    granted: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class FairSlots:
    """``slots`` slots shared between tenants.

    A slot is taken at once while one is free and no one waits. When one comes free, it goes to the waiting tenant
    that holds the fewest slots (among equals, the one whose first waiter came first), each tenant's waiters in the
    order they came: a tenant's share is the slots divided among the tenants that want them, and it never holds more
    than that while another tenant waits for longer than one read.
    """

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"{slots} slots: at least one is needed")
        self.slots = slots
        self._taken = 0
        self._held: Counter[str] = Counter()
        self._waiting: dict[str, deque[_Waiter]] = {}
        self._turns = itertools.count()

    def held(self, tenant: str) -> int:
        """How many slots ``tenant`` holds."""
        return self._held[tenant]

    def waiting(self, tenant: str) -> int:
        """How many of ``tenant``'s requests wait for a slot."""
        return len(self._waiting.get(tenant, ()))

    async def acquire(self, tenant: str, within_s: float) -> None:
        """Take a slot for ``tenant``, waiting at most ``within_s``: ``TimeoutError`` past it, holding nothing."""
        if self._taken < self.slots and not self._waiting:
            self._take(tenant)
            return
        waiter = _Waiter(tenant, next(self._turns))
        self._waiting.setdefault(tenant, deque()).append(waiter)
        self._hand_on()  # a slot freed while only a cancelled waiter, not yet forgotten, waited
        try:
            async with asyncio.timeout(within_s):
                await waiter.granted
        except BaseException:
            if waiter.granted.done() and not waiter.granted.cancelled():
                self.release(tenant)  # granted just as the wait ended: handed on to the next
            else:
                self._forget(waiter)
            raise

    def release(self, tenant: str) -> None:
        """Give back a slot ``tenant`` took; it goes to the waiter whose turn it is."""
        if self._held[tenant] < 1:
            raise RuntimeError(f"tenant {tenant!r} holds no slot to release")
        self._held[tenant] -= 1
        if not self._held[tenant]:
            del self._held[tenant]
        self._taken -= 1
        self._hand_on()

    def _take(self, tenant: str) -> None:
        self._taken += 1
        self._held[tenant] += 1

    def _forget(self, waiter: _Waiter) -> None:
        queue = self._waiting.get(waiter.tenant)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            if not queue:
                del self._waiting[waiter.tenant]
        self._hand_on()

    def _hand_on(self) -> None:
        while self._taken < self.slots and self._waiting:
            tenant = min(self._waiting, key=lambda t: (self._held[t], self._waiting[t][0].turn))
            queue = self._waiting[tenant]
            waiter = queue.popleft()
            if not queue:
                del self._waiting[tenant]
            if waiter.granted.done():  # cancelled, and not forgotten yet
                continue
            self._take(tenant)
            waiter.granted.set_result(None)


class AuditSlots:
    """The API's slots for reads of the log: ``slots`` at once, shared between tenants, a request waiting at most
    ``wait_s`` for one."""

    def __init__(self, slots: int = 4, wait_s: float = 5.0) -> None:
        self.fair = FairSlots(slots)
        self.wait_s = wait_s

    @asynccontextmanager
    async def held(self, tenant: str) -> AsyncIterator[None]:
        """A slot held for ``tenant`` while the block runs; :class:`Rejected` (503, Retry-After) when none comes
        free within ``wait_s``."""
        try:
            await self.fair.acquire(tenant, self.wait_s)
        except TimeoutError as exc:
            raise Rejected(
                f"every one of this API's {self.fair.slots} slots for reading the log stayed taken for"
                f" {self.wait_s:g} s: retry after Retry-After;"
                " GET /v1/jobs/{id} without as_of answers from the projection without reading the log",
                503,
            ) from exc
        try:
            yield
        finally:
            self.fair.release(tenant)
