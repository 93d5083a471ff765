"""The API's slots for reading the log (producers.audit_slots): shared between tenants, a bounded wait.

Every request here is held on a gate of its own while it holds its slot; no test waits for time to pass: the
loop is only let run until what the test awaits has happened (``settled``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from producers.audit_slots import FairSlots


async def settled(check: Callable[[], bool], what: str) -> None:
    """Let the loop run the tasks until ``check`` holds (a bounded number of turns of the loop, no time)."""
    for _ in range(1000):
        if check():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never: {what}")


class Requests:
    """Reads that take a slot each, note when they got it, and hold it until their gate opens."""

    def __init__(self, slots: FairSlots) -> None:
        self.slots = slots
        self.granted: list[str] = []
        self.gates: dict[str, asyncio.Event] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def send(self, tenant: str, name: str, within_s: float = 60.0) -> None:
        self.gates[name] = asyncio.Event()
        self.tasks[name] = asyncio.create_task(self._read(tenant, name, within_s))

    async def _read(self, tenant: str, name: str, within_s: float) -> None:
        await self.slots.acquire(tenant, within_s)
        self.granted.append(name)
        try:
            await self.gates[name].wait()
        finally:
            self.slots.release(tenant)

    async def finish(self, name: str) -> None:
        self.gates[name].set()
        await self.tasks[name]


async def test_audit_slots_are_shared_between_tenants():
    """Issue 40: four slots served every tenant in the order they asked; a tenant that sent many reads held all
    four and queued the rest, and another tenant's read waited behind the whole queue. Now it gets the first slot
    that comes free."""
    requests = Requests(FairSlots(4))
    for n in range(10):
        requests.send("acme", f"a{n}")
    await settled(lambda: requests.slots.waiting("acme") == 6, "acme's six queued behind its four")
    requests.send("globex", "b0")
    await settled(lambda: requests.slots.waiting("globex") == 1, "globex's read waiting")
    assert requests.granted == ["a0", "a1", "a2", "a3"]

    await requests.finish("a0")
    await settled(lambda: len(requests.granted) == 5, "the freed slot taken")
    assert requests.granted[-1] == "b0", "ahead of acme's six, which came first"
    assert (requests.slots.held("acme"), requests.slots.held("globex")) == (3, 1)

    await requests.finish("a1")
    await settled(lambda: len(requests.granted) == 6, "the next freed slot taken")
    assert requests.granted[-1] == "a4", "acme's queue goes on in its order"
    for name in list(requests.gates):
        requests.gates[name].set()
    await asyncio.gather(*requests.tasks.values())
    assert sorted(requests.granted) == sorted(requests.gates)
    assert (requests.slots.held("acme"), requests.slots.held("globex")) == (0, 0)


async def test_a_slot_that_comes_free_goes_to_the_waiting_tenant_holding_the_fewest():
    requests = Requests(FairSlots(4))
    for n in range(8):
        requests.send("acme", f"a{n}")
    await settled(lambda: requests.slots.waiting("acme") == 4, "acme's four queued")
    for n in range(3):
        requests.send("globex", f"b{n}")
    await settled(lambda: requests.slots.waiting("globex") == 3, "globex's three queued")

    for n in range(4):
        await requests.finish(f"a{n}")
        await settled(lambda n=n: len(requests.granted) == 5 + n, "the freed slot taken")

    assert requests.granted[4:] == ["b0", "b1", "a4", "a5"]
    assert (requests.slots.held("acme"), requests.slots.held("globex")) == (2, 2), "each its half of the four"
    for gate in requests.gates.values():
        gate.set()
    await asyncio.gather(*requests.tasks.values())


async def test_one_tenant_alone_may_use_every_slot():
    slots = FairSlots(3)
    for _ in range(3):
        await slots.acquire("acme", within_s=0)
    assert slots.held("acme") == 3


async def test_a_wait_for_a_slot_that_ends_unanswered_holds_nothing_and_queues_nothing():
    slots = FairSlots(1)
    await slots.acquire("acme", within_s=0)
    with pytest.raises(TimeoutError):
        await slots.acquire("globex", within_s=0)
    assert (slots.held("globex"), slots.waiting("globex")) == (0, 0)
    slots.release("acme")
    await slots.acquire("globex", within_s=0)
    assert slots.held("globex") == 1


async def test_a_waiter_cancelled_as_its_slot_is_granted_hands_the_slot_on():
    """The slot is given (its future resolved) before the waiting task runs again; cancelled then, the task must
    give it back, or the slot is lost for good."""
    requests = Requests(FairSlots(1))
    requests.send("acme", "a0")
    requests.send("globex", "b0")
    requests.send("initech", "c0")
    await settled(lambda: requests.slots.waiting("initech") == 1, "both waiting")

    requests.gates["a0"].set()
    await settled(lambda: requests.slots.held("globex") == 1, "b0 granted, its task not run yet")
    assert "b0" not in requests.granted
    requests.tasks["b0"].cancel()
    await settled(lambda: "c0" in requests.granted, "the slot handed on to c0")
    assert requests.tasks["b0"].cancelled()
    assert requests.slots.held("globex") == 0
    await requests.finish("c0")


def test_there_is_at_least_one_slot():
    with pytest.raises(ValueError, match="at least one"):
        FairSlots(0)
