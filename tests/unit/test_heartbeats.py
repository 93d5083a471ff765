"""The worker's heartbeat loop (consumers.heartbeat.beat) through a broker outage: one in flight at a time,
the outage said once, the beat resumed when Kafka acknowledges again."""

from __future__ import annotations

import asyncio

from consumers.heartbeat import beat
from foundation.outages import Backoff, Outage
from tests.unit.test_outages import Lines


class Broker:
    """Acknowledges heartbeats while up; while down, holds them as an idempotent producer does."""

    def __init__(self) -> None:
        self.up = asyncio.Event()
        self.sent: list[int] = []
        self.three_acknowledged = asyncio.Event()

    async def send(self, beat_number: int) -> object:
        self.sent.append(beat_number)
        await self.up.wait()
        if len(self.sent) == 3:
            self.three_acknowledged.set()
        return beat_number


class CountedOutage(Outage):
    def __init__(self, said: Lines, failures: int) -> None:
        super().__init__("Kafka (heartbeats)", backoff=Backoff(first_s=0.01, cap_s=0.02), logger=said)
        self.enough = asyncio.Event()
        self._enough_at = failures

    def failed(self, error: BaseException | str, **context: object) -> float:
        delay = super().failed(error, **context)
        if self.failures >= self._enough_at:
            self.enough.set()
        return delay


async def test_a_heartbeat_kafka_does_not_acknowledge_is_the_only_one_in_flight_and_the_outage_is_said_once():
    broker, said, stop = Broker(), Lines(), asyncio.Event()
    outage = CountedOutage(said, failures=5)
    numbers = iter(range(1000))
    beating = asyncio.create_task(beat(broker.send, lambda: next(numbers), 0.01, stop, outage))  # type: ignore[arg-type]
    await asyncio.wait_for(outage.enough.wait(), 10)  # five intervals without an acknowledgement
    assert broker.sent == [0], "no second heartbeat while the first is not acknowledged"
    broker.up.set()
    await asyncio.wait_for(broker.three_acknowledged.wait(), 10)
    stop.set()
    await asyncio.wait_for(beating, 5)
    assert said.events() == ["waiting for Kafka (heartbeats)", "Kafka (heartbeats) available again"]
