"""A process's stop is bounded (foundation.shutdown): whatever is down, it ends within its timeout and says
what it abandoned. A worker sent SIGTERM while its broker was down had not exited 110 s later."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

from foundation.lifecycle import OwnedTasks
from foundation.shutdown import Shutdown
from tests.unit.test_outages import Lines


async def never() -> None:
    await asyncio.Event().wait()  # an acknowledgement from a broker that is gone


async def test_regression_a_stop_that_waits_on_a_broker_that_is_gone_is_abandoned_at_its_timeout():
    said = Lines()
    shutdown = Shutdown(0.3, backstop_s=None, logger=said)
    shutdown.holds("records handed to Kafka", lambda: "2 record(s) not acknowledged")
    shutdown.holds("the job in hand", lambda: None)
    closed: list[str] = []

    async def process() -> str:
        async with AsyncExitStack() as resources:
            resources.push_async_callback(shutdown.closing("closing the pool", lambda: _closes(closed)))
            resources.push_async_callback(shutdown.closing("flushing the Kafka producer", never))
            await shutdown.stop.wait()
            await never()  # the last commit waits for acknowledgements that never come
        return "finished"

    async def signal_soon() -> None:
        await asyncio.sleep(0.05)
        shutdown.begin()  # what SIGTERM does

    stopping = asyncio.create_task(signal_soon())
    assert await asyncio.wait_for(shutdown.run(process()), 10) is None, "cancelled at the deadline, not finished"
    await stopping
    assert shutdown.expired
    timed_out = next(fields for _, event, fields in said.lines if event.startswith("shutdown timed out"))
    assert timed_out["abandoned"] == ["records handed to Kafka: 2 record(s) not acknowledged"]
    assert [fields["step"] for _, event, fields in said.lines if event == "shutdown abandoned a step"] == [
        "flushing the Kafka producer"
    ]
    assert closed == ["the pool"], "a step that still could was done: the deadline cut off only what hung"


async def _closes(closed: list[str]) -> None:
    closed.append("the pool")


async def test_a_stop_that_finishes_in_time_abandons_nothing():
    said = Lines()
    shutdown = Shutdown(5.0, backstop_s=None, logger=said)
    tasks = OwnedTasks()
    tasks.start(shutdown.stop.wait(), "ends at the stop")

    async def process() -> str:
        shutdown.begin()
        await tasks.close(grace_s=shutdown.remaining_s())
        return "finished"

    assert await shutdown.run(process()) == "finished"
    assert not shutdown.expired
    assert said.lines == []
    assert 0 < shutdown.remaining_s() <= 5.0


async def test_closing_starts_the_clock_when_no_signal_did():
    shutdown = Shutdown(0.2, backstop_s=None, logger=Lines())
    step = shutdown.closing("flushing the Kafka producer", never)
    await asyncio.wait_for(step(), 5)  # a process whose work ended by itself (an error) still stops in time
    assert shutdown.stop.is_set()
    assert shutdown.remaining_s() == 0.0
