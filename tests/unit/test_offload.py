"""Work in a process of its own under budgets (foundation.offload): answers, errors, budgets, and stopping.

Budgets are the kernel's (RLIMIT_CPU counts CPU seconds, not seconds of the clock; RLIMIT_AS counts bytes),
and where a test must know a process is running it waits for it at a socket, never for a while: a loaded
two-core machine makes these slower, not different.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from foundation.offload import Budget, Offload, OffloadClosed, OverBudget, WorkerDied
from tests.support import offloaded

PRELOAD = ("foundation.offload", "tests.support.offloaded")

pytestmark = pytest.mark.unit


@pytest.fixture
async def offload() -> AsyncIterator[Offload]:
    work = Offload(Budget(cpu_s=1, memory_bytes=256 * 2**20), processes=2, preload=PRELOAD)
    yield work
    await work.close()


class Gate:
    """A Unix socket the work connects to and waits on: who arrived, and a byte to let each go."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self.arrived: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._changed = asyncio.Condition()

    async def __aenter__(self) -> Gate:
        self._server = await asyncio.start_unix_server(self._arrive, self.path)
        return self

    async def __aexit__(self, *_: object) -> None:
        for _, writer in self.arrived:
            writer.close()
        self._server.close()

    async def _arrive(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with self._changed:
            self.arrived.append((reader, writer))
            self._changed.notify_all()

    async def until(self, count: int) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: len(self.arrived) >= count)

    async def release(self, index: int) -> None:
        self.arrived[index][1].write(b"go")
        await self.arrived[index][1].drain()


async def test_the_work_runs_in_another_process_and_its_answer_comes_back(offload: Offload):
    assert await offload.run(offloaded.pid) != os.getpid()
    payload = {"text": "x" * 1_000_000, "nested": [1, (2, 3)]}
    assert await offload.run(offloaded.echo, payload) == payload


async def test_what_the_work_raises_is_raised_again(offload: Offload):
    with pytest.raises(ValueError, match="not a book"):
        await offload.run(offloaded.refuse, "not a book")


async def test_an_answer_that_cannot_be_sent_back_is_an_error_of_its_own(offload: Offload):
    with pytest.raises(WorkerDied, match="could not be sent back"):
        await offload.run(offloaded.unpicklable)


async def test_work_past_its_cpu_seconds_is_stopped(offload: Offload):
    with pytest.raises(OverBudget) as stopped:
        await offload.run(offloaded.spin)
    assert (stopped.value.budget, stopped.value.limit) == ("cpu", "1 CPU seconds")


async def test_work_past_its_memory_is_stopped(offload: Offload):
    with pytest.raises(OverBudget) as stopped:
        await offload.run(offloaded.hog)
    assert (stopped.value.budget, stopped.value.limit) == ("memory", "256 MiB of memory")
    assert await offload.run(offloaded.echo, "after") == "after"  # the next call has a process of its own


async def test_at_most_processes_calls_run_at_once_and_the_loop_is_free_meanwhile(offload: Offload, tmp_path: Path):
    async with Gate(tmp_path / "gate") as gate:
        calls = [asyncio.create_task(offload.run(offloaded.held, gate.path)) for _ in range(3)]
        await gate.until(2)  # this coroutine runs while two processes wait at the gate
        assert len(gate.arrived) == 2
        assert not any(call.done() for call in calls)
        await gate.release(0)
        await gate.until(3)  # the third starts once one of the two is done
        await gate.release(1)
        await gate.release(2)
        assert await asyncio.gather(*calls) == ["released"] * 3


async def test_a_cancelled_call_kills_its_process(offload: Offload, tmp_path: Path):
    async with Gate(tmp_path / "gate") as gate:
        call = asyncio.create_task(offload.run(offloaded.held, gate.path))
        await gate.until(1)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await gate.arrived[0][0].read() == b""  # the process is gone: its end of the socket closed


async def test_closing_kills_what_runs_and_refuses_new_work(tmp_path: Path):
    offload = Offload(Budget(cpu_s=5, memory_bytes=256 * 2**20), processes=1, preload=PRELOAD)
    async with Gate(tmp_path / "gate") as gate:
        call = asyncio.create_task(offload.run(offloaded.held, gate.path))
        await gate.until(1)
        await offload.close()
        with pytest.raises(OffloadClosed):
            await call
    with pytest.raises(OffloadClosed):
        await offload.run(offloaded.echo, 1)


def test_the_wall_clock_allowance_is_a_backstop_well_past_the_cpu_budget():
    assert Budget(cpu_s=30, memory_bytes=1).wall_s == 330.0
